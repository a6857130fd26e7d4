// TODO.md items (getTodo): the backlog in the project's TODO.md on its default branch, by
// section, each with "Start" (a task whose agent works on the item) and "Discuss" (the agent
// talks it over first). An item with an active task links to it instead.

import { html, useState, useEffect } from "../html.js";
import { api } from "../api.js";
import { ensureProject } from "../store.js";
import { navigate } from "../router.js";
import { renderMarkdown } from "../markdown.js";

function sections(items) {
  const out = [];
  for (const item of items) {
    const last = out[out.length - 1];
    if (last && last.name === item.section) last.items.push(item);
    else out.push({ name: item.section, items: [item] });
  }
  return out;
}

function Item({ projectId, item, active, busy, onStart }) {
  const [open, setOpen] = useState(false);
  return html`<li class="todo-item" data-testid="todo-item" data-title=${item.title}>
    <div class="todo-head">
      <span class="todo-title" data-testid="todo-title">${item.title}</span>
      ${active
        ? html`<a class="badge" href=${`/tasks/${active.id}`} data-testid="todo-task" title="the active task working on this item">in ${active.branch}</a>`
        : html`<span class="todo-actions">
            <button type="button" class="small" disabled=${busy} data-testid="todo-discuss" onClick=${() => onStart(item, true)} title="Start a task whose agent talks the item over with you before changing anything">Discuss</button>
            <button type="button" class="small primary" disabled=${busy} data-testid="todo-start" onClick=${() => onStart(item, false)}>Start</button>
          </span>`}
    </div>
    ${item.body
      ? html`<button type="button" class="link hint" onClick=${() => setOpen(!open)} aria-expanded=${open}>${open ? "less" : "more"}</button>
        ${open ? html`<div class="md todo-body" data-testid="todo-body" dangerouslySetInnerHTML=${{ __html: renderMarkdown(item.body) }}></div>` : null}`
      : null}
  </li>`;
}

/** The project's TODO.md items, with start / discuss. */
export function TodoList({ projectId, state }) {
  const [todo, setTodo] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const project = state.projects.get(projectId);
  useEffect(() => {
    setTodo(null);
    api.getTodo(projectId).then(setTodo).catch((e) => setError(e.message));
  }, [projectId]);
  const activeFor = (title) => {
    for (const t of state.tasks.values()) if (t.project_id === projectId && t.status === "active" && t.todo_item === title) return t;
    return null;
  };
  const onStart = async (item, discuss) => {
    setBusy(true);
    setError(null);
    try {
      const t = await api.startTodoItem(projectId, { title: item.title, discuss });
      await ensureProject(projectId).catch(() => {});
      navigate(`/tasks/${t.id}`);
    } catch (e) {
      setError(e.message);
      setBusy(false);
    }
  };
  const branch = project ? project.default_branch : "the default branch";
  let body;
  if (!todo) body = error ? null : html`<p class="hint">Reading TODO.md…</p>`;
  else if (!todo.exists) body = html`<p class="hint" data-testid="todo-none">No TODO.md at the root of <code>${branch}</code>. Commit one (a Markdown list, one item per task) to start tasks from it here.</p>`;
  else if (!todo.items.length) body = html`<p class="hint" data-testid="todo-none">TODO.md on <code>${branch}</code> has no list items.</p>`;
  else body = sections(todo.items).map((s) => html`<section class="todo-section">
      ${s.name ? html`<h3 data-testid="todo-section">${s.name}</h3>` : null}
      <ul class="todo-list">${s.items.map((item) => html`<${Item} key=${item.title} projectId=${projectId} item=${item} active=${activeFor(item.title)} busy=${busy} onStart=${onStart} />`)}</ul>
    </section>`);
  return html`<div class="todo" data-testid="todo">
    <h2>TODO.md <span class="hint">on ${branch}</span></h2>
    ${error ? html`<div class="form-error" role="alert" data-testid="todo-error">${error}</div>` : null}
    ${body}
  </div>`;
}

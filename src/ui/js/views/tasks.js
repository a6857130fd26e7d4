// A project's tasks (newest first, subtasks under their parent: state badge, colour, unread
// summary, open inbox count) and the new-task form.

import { html, useState, useEffect, useRef, memo } from "../html.js";
import { api, shownHere } from "../api.js";
import { ensureProject } from "../store.js";
import { navigate } from "../router.js";
import { ago, taskColor, STATE_LABEL } from "../util.js";
import { TodoList } from "./todo.js";
import { treeRows } from "./subtasks.js";

const listCache = new Map(); // project id -> { version, list }
/** The project's loaded tasks, newest first (memoised per change of any task). */
export function projectTasks(state, projectId) {
  const hit = listCache.get(projectId);
  if (hit && hit.version === state.tasksVersion) return hit.list;
  const list = [];
  for (const t of state.tasks.values()) if (t.project_id === projectId) list.push(t);
  list.sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : 0));
  listCache.set(projectId, { version: state.tasksVersion, list });
  return list;
}

let inboxCache = { version: -1, map: new Map() };
/** Open inbox items per task id. */
export function openInboxByTask(state) {
  if (inboxCache.version === state.inboxVersion) return inboxCache.map;
  const map = new Map();
  for (const i of state.inbox.values()) if (i.state === "open" && i.task_id) map.set(i.task_id, (map.get(i.task_id) || 0) + 1);
  inboxCache = { version: state.inboxVersion, map };
  return map;
}

/**
 * How many of `n` rows to draw: the first 150 at once, all of them a frame later, so a
 * project of 1,000 tasks shows its newest at once and the rest without holding up the page.
 */
export function useProgressive(n) {
  const [all, setAll] = useState(false);
  const big = n > 150;
  useEffect(() => {
    if (all || !big) return undefined;
    const t = setTimeout(() => requestAnimationFrame(() => setAll(true)), 30);
    return () => clearTimeout(t);
  }, [big]);
  return all ? n : Math.min(n, 150);
}

/** Whether the task has a summary the user has not read. */
export const unread = (state, t) => t.summary_seq > 0 && (state.reads[t.id] || 0) < t.summary_seq;

/** One task in a list (re-rendered only when its task, dot, count or selection changes). */
export const TaskRow = memo(function TaskRow({ t, isUnread, inbox, compact, current, selected, depth = 0 }) {
  return html`<a class=${`task-row ${compact ? "compact" : ""} ${current ? "current" : ""} ${selected ? "selected" : ""} ${depth ? "subtask" : ""} st-${t.state}`}
      href=${`/tasks/${t.id}`} data-testid="task-row" data-task-id=${t.id} data-state=${t.state}
      data-parent-task-id=${t.parent_task_id} data-depth=${depth} style=${depth ? { "--depth": depth } : undefined}>
    ${depth ? html`<span class="sub-mark" title="subtask" data-testid="task-subtask-mark">↳</span>` : null}
    <span class="swatch" style=${{ background: taskColor(t) }}></span>
    <span class="task-title" data-testid="task-title" title=${t.title}>${t.title}</span>
    ${t.workflow_stage ? html`<span class="stage-mark" title=${`stage ${t.workflow_stage} of a ${t.workflow} run`} data-testid="task-stage">${t.workflow_stage}</span>` : null}
    ${isUnread ? html`<span class="dot" title="unread summary" data-testid="task-unread"></span>` : null}
    ${inbox ? html`<span class="count" title="open inbox items" data-testid="task-inbox-count">${inbox}</span>` : null}
    <span class=${`badge st-${t.state}`} data-testid="task-state">${STATE_LABEL[t.state] || t.state}</span>
    ${compact ? null : html`<span class="task-meta">${t.branch} · ${t.created_by} · ${ago(t.created_at)}${t.merge_queued_at ? " · merge held" : ""}</span>`}
  </a>`;
});

/** `/projects/{id}`: the project's tasks. */
export function ProjectPage({ projectId, state }) {
  const [error, setError] = useState(null);
  const [filter, setFilter] = useState("all");
  const [sel, setSel] = useState(-1);
  useEffect(() => {
    ensureProject(projectId).catch((e) => setError(shownHere(e)));
  }, [projectId]);
  const project = state.projects.get(projectId);
  const all = projectTasks(state, projectId);
  const flat = filter === "all" ? all : filter === "active" ? all.filter((t) => t.status === "active") : all.filter((t) => t.status !== "active");
  const rows = treeRows(flat);
  const list = rows.map((r) => r.t);
  const inbox = openInboxByTask(state);
  const shown = useProgressive(list.length);
  const listRef = useRef(list);
  listRef.current = list;
  useEffect(() => {
    const onKey = (e) => {
      if (e.target.closest("input, textarea, select, [contenteditable]") || e.metaKey || e.ctrlKey || e.altKey) return;
      if (e.key === "j") setSel((s) => Math.min(listRef.current.length - 1, s + 1));
      else if (e.key === "k") setSel((s) => Math.max(0, s - 1));
      else if (e.key === "n") navigate(`/projects/${projectId}/new`);
      else if (e.key === "Enter") {
        setSel((s) => {
          const t = listRef.current[s];
          if (t) navigate(`/tasks/${t.id}`);
          return s;
        });
      } else return;
      e.preventDefault();
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [projectId]);
  if (error) return html`<div class="page"><div class="form-error" role="alert">${error}</div></div>`;
  const loading = state.projectTasks.get(projectId) !== "loaded";
  const n = (f) => (f === "all" ? all.length : f === "active" ? all.filter((t) => t.status === "active").length : all.filter((t) => t.status !== "active").length);
  return html`<div class="page project-page">
    <div class="page-head">
      <h1>${project ? project.name : "…"}</h1>
      <a class="button primary" href=${`/projects/${projectId}/new`} data-testid="new-task-button" title="New task (n)">New task</a>
    </div>
    ${project ? html`<p class="hint">${project.repo_path} · tasks branch from <code>${project.default_branch}</code></p>` : null}
    <div class="filters" role="tablist">
      ${["all", "active", "closed"].map((f) => html`<button type="button" role="tab" aria-selected=${filter === f} class=${filter === f ? "chip on" : "chip"} onClick=${() => setFilter(f)}>${f} <span class="n">${n(f)}</span></button>`)}
    </div>
    ${loading ? html`<p class="hint">Loading tasks…</p>` : list.length === 0
      ? html`<p class="empty" data-testid="task-list">No tasks${filter === "all" ? " yet" : ""}. <a href=${`/projects/${projectId}/new`}>Start one</a>.</p>`
      : html`<div class="task-list" data-testid="task-list">
        ${rows.slice(0, shown).map(({ t, depth }, i) => html`<${TaskRow} key=${t.id} t=${t} depth=${depth} isUnread=${unread(state, t)} inbox=${inbox.get(t.id) || 0} selected=${i === sel} />`)}
      </div>`}
    <${TodoList} projectId=${projectId} state=${state} />
    <p class="keys hint"><kbd>j</kbd>/<kbd>k</kbd> move · <kbd>Enter</kbd> open · <kbd>n</kbd> new task · <kbd>g</kbd> <kbd>i</kbd> inbox · <kbd>g</kbd> <kbd>s</kbd> status · on a task: <kbd>1</kbd>–<kbd>6</kbd> tabs, <kbd>c</kbd> write, <kbd>Esc</kbd> interrupt</p>
  </div>`;
}

/** Models offered in the pickers (any other name can be typed). */
export const MODELS = ["sonnet", "opus", "haiku", "gpt-5.5", "gpt-5"];

/** `/projects/{id}/new`: title, prompt, model; or a run of a saved workflow (its title is the brief). */
export function NewTaskPage({ projectId, state }) {
  const [title, setTitle] = useState("");
  const [prompt, setPrompt] = useState("");
  const [model, setModel] = useState(state.me.default_model || "");
  const [workflows, setWorkflows] = useState([]);
  const [workflow, setWorkflow] = useState("");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const project = state.projects.get(projectId);
  useEffect(() => {
    api.listWorkflows().then(setWorkflows).catch(() => {});
  }, [state.workflowsVersion || 0]);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    const body = { title: title.trim() || prompt.trim().split("\n")[0].slice(0, 80) };
    if (workflow) body.workflow = workflow;
    else if (prompt.trim()) {
      body.prompt = prompt;
      if (model.trim()) body.model = model.trim();
    }
    try {
      const t = await api.createTask(projectId, body);
      await ensureProject(projectId).catch(() => {});
      navigate(workflow ? `/tasks/${t.id}/workflow` : `/tasks/${t.id}`);
    } catch (err) {
      setError(err.message);
      setBusy(false);
    }
  };
  const onKey = (e) => {
    if (e.key === "Enter" && (e.metaKey || e.ctrlKey)) submit(e);
  };
  const chosen = workflows.find((w) => w.name === workflow);
  return html`<div class="page new-task-page">
    <h1>New task${project ? html` <span class="sub">in ${project.name}</span>` : null}</h1>
    <form class="card" data-testid="new-task-form" onSubmit=${submit} onKeyDown=${onKey}>
      <label>Run
        <select data-testid="new-task-workflow" value=${workflow} onChange=${(e) => setWorkflow(e.target.value)}>
          <option value="">one agent</option>
          ${workflows.map((w) => html`<option value=${w.name}>workflow: ${w.name}</option>`)}
        </select>
        ${chosen ? html`<span class="hint" data-testid="new-task-workflow-description">${chosen.description || "no description"} · each stage runs as its own task, titled “title: stage”. <a href="/workflows">Edit workflows</a></span>`
          : workflows.length ? null : html`<span class="hint">No workflows saved yet: <a href="/workflows">write one</a> to run stages as tasks.</span>`}
      </label>
      <label>${workflow ? "Title — the run's brief, which every stage gets" : "Title"}
        <input data-testid="new-task-title" value=${title} onInput=${(e) => setTitle(e.target.value)} placeholder="Fix the login page" maxlength="200" autofocus />
      </label>
      ${workflow ? null : html`<label>Prompt <span class="hint">(optional: starts the agent at once; without one the task waits with no agent)</span>
        <textarea data-testid="new-task-prompt" rows="8" value=${prompt} onInput=${(e) => setPrompt(e.target.value)} placeholder="What should the agent do?"></textarea>
      </label>
      <label>Model
        <input data-testid="new-task-model" list="models" value=${model} onInput=${(e) => setModel(e.target.value)} autocomplete="off" spellcheck="false" />
        <datalist id="models">${MODELS.map((m) => html`<option value=${m} />`)}</datalist>
      </label>`}
      ${error ? html`<div class="form-error" role="alert" data-testid="new-task-error">${error}</div>` : null}
      <div class="actions">
        <a class="button" href=${`/projects/${projectId}`}>Cancel</a>
        <button type="submit" class="primary" data-testid="new-task-submit" disabled=${busy || !(title.trim() || (!workflow && prompt.trim()))}>${busy ? (workflow ? "Starting the run…" : "Creating the worktree…") : workflow ? "Start the run" : "Create task"}</button>
        <span class="hint">⌘/Ctrl+Enter</span>
      </div>
    </form>
  </div>`;
}

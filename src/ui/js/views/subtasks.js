// Subtasks: tasks a task's agent started (`parent_task_id`). The project's task list shows them
// as a tree under their parent; a task's header links its parent and lists its subtasks.

import { html } from "../html.js";
import { STATE_LABEL } from "../util.js";

/**
 * `list` (newest first) as a tree: each task whose parent is not in `list` first, in list
 * order, each followed by its subtasks (newest first, recursively). Returns `[{ t, depth }]`.
 */
export function treeRows(list) {
  const ids = new Set(list.map((t) => t.id));
  const children = new Map();
  for (const t of list) {
    if (t.parent_task_id && ids.has(t.parent_task_id)) {
      if (!children.has(t.parent_task_id)) children.set(t.parent_task_id, []);
      children.get(t.parent_task_id).push(t);
    }
  }
  const out = [];
  const seen = new Set();
  const visit = (t, depth) => {
    if (seen.has(t.id)) return;
    seen.add(t.id);
    out.push({ t, depth });
    for (const c of children.get(t.id) || []) visit(c, depth + 1);
  };
  for (const t of list) if (!(t.parent_task_id && ids.has(t.parent_task_id))) visit(t, 0);
  return out;
}

/** The loaded subtasks of task `id`, oldest first. */
export function subtasksOf(state, id) {
  const out = [];
  for (const t of state.tasks.values()) if (t.parent_task_id === id) out.push(t);
  return out.sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : 0));
}

/** Under a task's title: its parent (a link) and its subtasks (links with their state). */
export function SubtaskLinks({ task, state }) {
  const parent = task.parent_task_id ? state.tasks.get(task.parent_task_id) : null;
  const subs = subtasksOf(state, task.id);
  if (!task.parent_task_id && subs.length === 0) return null;
  return html`<div class="subtasks" data-testid="task-subtasks">
    ${task.parent_task_id ? html`<div>Subtask of <a data-testid="task-parent-link" href=${`/tasks/${task.parent_task_id}`}>${parent ? parent.title : task.parent_task_id}</a>${task.merging_into_parent ? html` <span class="tag busy" data-testid="merging-into-parent">merging into its parent…</span>` : null}</div>` : null}
    ${subs.length ? html`<div>Subtasks: ${subs.map((s, i) => html`${i ? ", " : ""}<a data-testid="task-subtask-link" data-task-id=${s.id} href=${`/tasks/${s.id}`}>${s.title}</a> <span class=${`badge st-${s.state}`}>${STATE_LABEL[s.state] || s.state}</span>`)}</div>` : null}
  </div>`;
}

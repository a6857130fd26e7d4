// A task: header (title, state, branch, finishing), transcript and composer, and the right
// pane with its tabs. The whole task view is the contract's "right pane" (what the lead's
// `show` moves): its task and tab are the user's Focus, and working in it is PaneFocus.
// On a phone the pane is its own page (/tasks/{id}/{tab}).

import { html, useState, useEffect } from "../html.js";
import { openTask, setFocus, setPaneFocus, markRead } from "../store.js";
import { navigate } from "../router.js";
import { shownHere } from "../api.js";
import { Transcript } from "./transcript.js";
import { Composer } from "./composer.js";
import { Pane, TABS, tabsFor } from "./pane.js";
import { FinishBar } from "./finish.js";
import { SubtaskLinks } from "./subtasks.js";
import { taskColor, STATE_LABEL, short } from "../util.js";

function chooseTab(route, state, task) {
  const mine = tabsFor(task);
  if (route.tab && mine.some((t) => t.id === route.tab)) return route.tab;
  const f = state.focus;
  if (f && f.task_id === route.taskId && f.tab && mine.some((t) => t.id === f.tab)) return f.tab;
  return "changes";
}

/** `/tasks/{id}` and `/tasks/{id}/{tab}`. */
export function TaskPage({ route, state, phone }) {
  const taskId = route.taskId;
  const [error, setError] = useState(null);
  useEffect(() => {
    // Shown here only while the task is unknown (below); otherwise the toast says it.
    openTask(taskId).catch((e) => setError(state.tasks.has(taskId) ? e.message : shownHere(e)));
  }, [taskId]);
  const task = state.tasks.get(taskId);
  const tab = chooseTab(route, state, task);
  const paneOnly = phone && !!route.tab;

  useEffect(() => {
    if (task) setFocus(taskId, tab);
  }, [taskId, tab, !!task]);
  useEffect(() => {
    if (task && !document.hidden) markRead(taskId);
  }, [taskId, task && task.summary_seq]);
  useEffect(() => {
    const onVis = () => !document.hidden && markRead(taskId);
    document.addEventListener("visibilitychange", onVis);
    return () => document.removeEventListener("visibilitychange", onVis);
  }, [taskId]);

  useEffect(() => {
    const onKey = (e) => {
      if (e.target.closest("input, textarea, select, [contenteditable]") || e.metaKey || e.ctrlKey || e.altKey) return;
      const n = Number(e.key);
      if (n >= 1 && n <= TABS.length) navigate(`/tasks/${taskId}/${TABS[n - 1].id}`, { replace: !phone });
      else if (e.key === "c" || e.key === "/") {
        const box = document.querySelector("[data-testid=composer-input]");
        if (box) box.focus();
      } else return;
      e.preventDefault();
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [taskId, phone]);

  if (error && !task) return html`<div class="page"><div class="form-error" role="alert">${error}</div><p><a href="/">Back to the projects</a></p></div>`;
  if (!task) return html`<div class="page hint">Loading the task…</div>`;
  const project = state.projects.get(task.project_id);
  const selectTab = (id) => navigate(`/tasks/${taskId}/${id}`, { replace: !phone });

  const header = html`<header class="task-head">
    ${phone ? html`<a class="back" href=${paneOnly ? `/tasks/${taskId}` : `/projects/${task.project_id}`}>‹ ${paneOnly ? "Transcript" : project ? project.name : "Tasks"}</a>` : null}
    <div class="title-row">
      <span class="swatch" style=${{ background: taskColor(task) }}></span>
      <h1 data-testid="task-header-title" title=${task.title}>${task.title}</h1>
      <span class=${`badge st-${task.state}`} data-testid="task-header-state">${STATE_LABEL[task.state] || task.state}</span>
    </div>
    <div class="sub-row">
      <code data-testid="task-header-branch">${task.branch}</code>${project ? html` · <a href=${`/projects/${project.id}`}>${project.name}</a>` : null}${` · by ${task.created_by}`}${task.merge_commit ? html` · merged as <code>${short(task.merge_commit)}</code>` : null}
    </div>
    <${SubtaskLinks} task=${task} state=${state} />
    ${paneOnly ? null : html`<${FinishBar} task=${task} state=${state} />`}
  </header>`;

  const pane = html`<${Pane} task=${task} state=${state} tab=${tab} onTab=${selectTab} phone=${phone} />`;
  const onFocusIn = () => setPaneFocus({ focused: true });
  const onFocusOut = (e) => {
    if (!e.relatedTarget || !e.currentTarget.contains(e.relatedTarget)) setPaneFocus({ focused: false });
  };
  if (paneOnly) {
    return html`<div class="task-view pane-page" data-testid="task-view" data-task-id=${taskId} data-state=${task.state} onFocusIn=${onFocusIn} onFocusOut=${onFocusOut}>${header}${pane}</div>`;
  }
  return html`<div class="task-view" data-testid="task-view" data-task-id=${taskId} data-state=${task.state} onFocusIn=${onFocusIn} onFocusOut=${onFocusOut}>
    <section class="convo">
      ${header}
      <${Transcript} state=${state} taskId=${taskId} />
      <${Composer} key=${taskId} state=${state} task=${task} />
      ${phone ? html`<nav class="phone-tabs">${tabsFor(task).filter((t) => t.id !== "transcript").map((t) => html`<a href=${`/tasks/${taskId}/${t.id}`} data-testid=${`pane-tab-${t.id}`}>${t.label}</a>`)}</nav>` : null}
    </section>
    ${phone ? null : pane}
  </div>`;
}

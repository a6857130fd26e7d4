// The right pane: the contract's TaskTab tabs, each a view of what exists today. Tabs for
// capabilities not built yet are listed with `ready: false` and stay hidden until their
// issues land: flip the flag and add the view. The workflow tab shows only on stage tasks.

import { html, useState, useEffect, useRef } from "../html.js";
import { api } from "../api.js";
import { Changes } from "./changes.js";
import { Files } from "./files.js";
import { InboxList } from "./inbox.js";
import { EventLog } from "./eventlog.js";
import { Reviews } from "./reviews.js";
import { TodoList } from "./todo.js";
import { WorkflowTab } from "./workflow.js";
import { Terminal } from "./terminal.js";
import { openFindings } from "../reviews.js";
import { when, short } from "../util.js";

const ALL_TABS = [
  { id: "changes", label: "Changes", ready: true },
  { id: "files", label: "Files", ready: true },
  { id: "inbox", label: "Inbox", ready: true },
  { id: "transcript", label: "Events", ready: true },
  { id: "project", label: "Project", ready: true },
  { id: "terminal", label: "Terminal", ready: true },
  { id: "reviews", label: "Reviews", ready: true },
  { id: "workflow", label: "Workflow", ready: true },
];
/** The tabs shown today. */
export const TABS = ALL_TABS.filter((t) => t.ready);

/** The tabs `task` has: the workflow tab only on a stage task. */
export const tabsFor = (task) => TABS.filter((t) => t.id !== "workflow" || (task && task.workflow));

function ordered(state, task) {
  const first = (state.focus && state.focus.tabs) || [];
  const mine = tabsFor(task);
  const head = first.map((id) => mine.find((t) => t.id === id)).filter(Boolean);
  return [...head, ...mine.filter((t) => !first.includes(t.id))];
}

function ProjectTab({ task, state }) {
  const project = state.projects.get(task.project_id);
  const [previews, setPreviews] = useState([]);
  const [snaps, setSnaps] = useState([]);
  const nSnap = (state.transcripts.get(task.id) || { version: 0 }).version;
  useEffect(() => {
    api.listSnapshots(task.id).then(setSnaps).catch(() => {});
  }, [task.id, nSnap]);
  useEffect(() => {
    api.listPreviews(task.id).then(setPreviews).catch(() => {});
  }, [task.id]);
  return html`<div class="pane-body project-tab" data-testid="project-info">
    ${project ? html`<h3>${project.name}</h3>
    <dl class="kv">
      <dt>repository</dt><dd><code>${project.repo_path}</code></dd>
      <dt>default branch</dt><dd><code>${project.default_branch}</code></dd>
      <dt>remote</dt><dd>${project.remote || html`<span class="hint">none</span>`}</dd>
    </dl>` : null}
    <h3>This task</h3>
    <dl class="kv">
      <dt>branch</dt><dd><code>${task.branch}</code></dd>
      <dt>from</dt><dd><code>${short(task.base_ref)}</code></dd>
      <dt>worktree</dt><dd><code>${task.worktree_path}</code></dd>
      <dt>ports</dt><dd>${task.port_base}–${task.port_base + 9}</dd>
      <dt>merge title</dt><dd>${task.merge_title}</dd>
      <dt>created</dt><dd>${when(task.created_at)} by ${task.created_by}</dd>
      ${task.closed_at ? html`<dt>closed</dt><dd>${when(task.closed_at)} (${task.status})</dd>` : null}
    </dl>
    ${previews.length ? html`<h3>Previews</h3><ul>${previews.map((p) => html`<li>${p.name}: port ${p.port}</li>`)}</ul>` : null}
    <h3>Snapshots</h3>
    ${snaps.length ? html`<ul class="snaps">${snaps.map((s) => html`<li><a href=${`/tasks/${task.id}/changes?snapshot=${s.n}`}>#${s.n}</a> <code>${short(s.commit_sha)}</code> ${s.trigger} · ${when(s.created_at)}</li>`)}</ul>` : html`<p class="hint">None yet: one is taken at the end of every turn.</p>`}
    ${task.todo_item ? html`<p>Started from the TODO.md item <strong data-testid="task-todo-item">${task.todo_item}</strong>.</p>` : null}
    <${TodoList} projectId=${task.project_id} state=${state} />
  </div>`;
}

/** The pane for `task` showing `tab`. */
export function Pane({ task, state, tab, onTab, phone }) {
  const tabs = ordered(state, task);
  const strip = useRef(null);
  // The strip scrolls sideways when its tabs are wider than the pane (a stage task with a
  // terminal has eight): keep the open tab in view, on opening it and when the window resizes.
  useEffect(() => {
    const reveal = () => {
      const el = strip.current;
      const on = el && el.querySelector(".tab.on");
      if (!on) return;
      const a = el.getBoundingClientRect();
      const b = on.getBoundingClientRect();
      if (b.right > a.right) el.scrollLeft += b.right - a.right + 8;
      else if (b.left < a.left) el.scrollLeft -= a.left - b.left + 8;
    };
    reveal();
    window.addEventListener("resize", reveal);
    return () => window.removeEventListener("resize", reveal);
  }, [tab, task.id, phone, tabs.length]);
  let body;
  switch (tab) {
    case "files": body = html`<${Files} key=${task.id} task=${task} />`; break;
    case "inbox": body = html`<${InboxList} state=${state} taskId=${task.id} />`; break;
    case "transcript": body = html`<${EventLog} state=${state} taskId=${task.id} />`; break;
    case "reviews": body = html`<${Reviews} task=${task} state=${state} />`; break;
    case "workflow": body = html`<${WorkflowTab} key=${task.id} task=${task} state=${state} />`; break;
    case "terminal": body = html`<${Terminal} key=${task.id} task=${task} />`; break;
    case "project": body = html`<${ProjectTab} task=${task} state=${state} />`; break;
    default: body = html`<${Changes} key=${task.id} task=${task} state=${state} />`;
  }
  let open = 0;
  for (const i of state.inbox.values()) if (i.task_id === task.id && i.state === "open") open++;
  const findings = openFindings(state.reviews.get(task.id)).length;
  const counts = { inbox: open, reviews: findings };
  return html`<aside class=${`pane ${phone ? "phone" : ""}`} data-testid="pane" data-tab=${tab}>
    <div class="tabs" role="tablist" ref=${strip}>
      ${tabs.map((t) => html`<button type="button" role="tab" aria-selected=${t.id === tab} class=${t.id === tab ? "tab on" : "tab"} title=${`${t.label} (${TABS.indexOf(t) + 1})`}
        data-testid=${`pane-tab-${t.id}`} onClick=${() => onTab(t.id)}>${t.label}${counts[t.id] ? html` <span class="count">${counts[t.id]}</span>` : null}</button>`)}
    </div>
    ${body}
  </aside>`;
}

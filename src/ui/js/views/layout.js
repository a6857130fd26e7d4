// The frame: a sidebar (navigation, projects, the current project's tasks), the lead's chat
// beside it when shown (desktop; `l` or the sidebar's "Lead" toggles it, remembered in
// localStorage), and the main area chosen by the route. On a phone: one column, with a top
// bar whose menu holds the navigation, and the lead is the `/lead` page.

import { html, useMemo, useState, useEffect } from "../html.js";
import { LeadPanel } from "./lead.js";
import { ProjectsPage } from "./projects.js";
import { ProjectPage, NewTaskPage, TaskRow, projectTasks, openInboxByTask, unread, useProgressive } from "./tasks.js";
import { TaskPage } from "./task.js";
import { InboxPage } from "./inbox.js";
import { StatusPage } from "./status.js";
import { WorkflowsPage } from "./workflows.js";
import { isPhone } from "../util.js";
import { touch } from "../store.js";
import { signOut } from "../api.js";

function currentProjectId(route, state) {
  if (route.projectId) return route.projectId;
  if (route.taskId) {
    const t = state.tasks.get(route.taskId);
    return t ? t.project_id : null;
  }
  return null;
}

function StreamDot({ state }) {
  const label = { live: "live", connecting: "reconnecting…", reloading: "reloading…" }[state.stream];
  return html`<span class=${`stream ${state.stream}`} title=${`event stream: ${label}; seq ${state.lastSeq}`} data-testid="stream-state">${label}</span>`;
}

const LEAD_KEY = "byre.lead";
/** Whether the lead column is shown (desktop), and its toggle; `l` toggles it too. */
function useLeadOpen() {
  const [open, setOpen] = useState(() => {
    try {
      return localStorage.getItem(LEAD_KEY) === "open";
    } catch (_) {
      return false;
    }
  });
  const set = (v) => {
    setOpen(v);
    try {
      localStorage.setItem(LEAD_KEY, v ? "open" : "closed");
    } catch (_) { /* private mode */ }
  };
  useEffect(() => {
    const onKey = (e) => {
      if (e.defaultPrevented || e.metaKey || e.ctrlKey || e.altKey || e.key !== "l") return;
      if (e.target.closest && e.target.closest("input, textarea, select, [contenteditable]")) return;
      e.preventDefault();
      setOpen((o) => {
        try {
          localStorage.setItem(LEAD_KEY, o ? "closed" : "open");
        } catch (_) { /* private mode */ }
        return !o;
      });
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, []);
  return [open, set];
}

function Nav({ state, route, leadOpen, onLead }) {
  let open = 0;
  for (const i of state.inbox.values()) if (i.state === "open") open++;
  const cls = (name) => (route.name === name ? "active" : "");
  const cur = (name) => (route.name === name ? "page" : undefined);
  // One item is highlighted: the page's. The lead's column is a toggle beside it, shown as
  // pressed (its own mark), not as a second current page.
  return html`<nav class="nav">
    <a href="/" class=${cls("projects")} aria-current=${cur("projects")} data-testid="nav-projects">Projects</a>
    <a href="/inbox" class=${cls("inbox")} aria-current=${cur("inbox")} data-testid="nav-inbox">Inbox${open ? html` <span class="count" data-testid="nav-inbox-count">${open}</span>` : null}</a>
    ${onLead ? html`<button type="button" class="nav-button" aria-pressed=${leadOpen} data-testid="nav-lead" title=${`${leadOpen ? "Hide" : "Show"} your lead agent's column (l)`} onClick=${() => onLead(!leadOpen)}>Lead</button>`
      : html`<a href="/lead" class=${cls("lead")} aria-current=${cur("lead")} data-testid="nav-lead">Lead</a>`}
    <a href="/workflows" class=${cls("workflows")} aria-current=${cur("workflows")} data-testid="nav-workflows">Workflows</a>
    <a href="/status" class=${cls("status")} aria-current=${cur("status")} data-testid="nav-status">Status</a>
  </nav>`;
}

function NotifyButton({ state }) {
  if (typeof Notification === "undefined" || Notification.permission !== "default") return null;
  return html`<button type="button" class="link small" data-testid="notify-enable"
    onClick=${() => Notification.requestPermission().then(touch)}>Enable notifications</button>`;
}

/** Token mode only: ends the browser's session, then the sign-in page. */
function SignOut({ state }) {
  if (state.authMode !== "token") return null;
  const out = async () => {
    try {
      await signOut();
    } finally {
      location.assign("/signin");
    }
  };
  return html`<button type="button" class="link small" data-testid="sign-out" onClick=${out}>Sign out</button>`;
}

function Sidebar({ state, route, leadOpen, onLead }) {
  const pid = currentProjectId(route, state);
  const projects = useMemo(() => [...state.projects.values()].sort((a, b) => a.name.localeCompare(b.name)), [state.projects.size, state.version]);
  const tasks = pid && route.name === "task" ? projectTasks(state, pid).filter((t) => t.status === "active") : null;
  const inboxBy = tasks ? openInboxByTask(state) : null;
  const shown = useProgressive(tasks ? tasks.length : 0);
  return html`<aside class="sidebar">
    <div class="brand"><a href="/">byre</a> <${StreamDot} state=${state} /></div>
    <${Nav} state=${state} route=${route} leadOpen=${leadOpen} onLead=${onLead} />
    <div class="side-section">
      <div class="side-title">Projects</div>
      ${projects.map((p) => html`<a href=${`/projects/${p.id}`} class=${`side-project ${p.id === pid ? "active" : ""}`} title=${p.name}>${p.name}</a>`)}
    </div>
    ${tasks ? html`<div class="side-section side-tasks">
      <div class="side-title">Active tasks <a class="small" href=${`/projects/${pid}/new`}>new</a></div>
      ${tasks.slice(0, shown).map((t) => html`<${TaskRow} key=${t.id} t=${t} isUnread=${unread(state, t)} inbox=${inboxBy.get(t.id) || 0} compact=${true} current=${t.id === route.taskId} />`)}
    </div>` : null}
    <div class="side-foot"><span data-testid="signed-in-as" title="signed in as">${state.me.login}</span> <${NotifyButton} state=${state} /> <${SignOut} state=${state} /></div>
  </aside>`;
}

/**
 * A phone's top bar: the brand, the stream's state and a menu button (with the open inbox
 * count) whose menu holds the navigation; any navigation, Escape or a tap outside closes it.
 */
function TopBar({ state, route }) {
  const [open, setOpen] = useState(false);
  useEffect(() => setOpen(false), [route]);
  useEffect(() => {
    if (!open) return undefined;
    const onKey = (e) => e.key === "Escape" && setOpen(false);
    const onDown = (e) => !e.target.closest(".topbar") && setOpen(false);
    document.addEventListener("keydown", onKey);
    document.addEventListener("pointerdown", onDown);
    return () => {
      document.removeEventListener("keydown", onKey);
      document.removeEventListener("pointerdown", onDown);
    };
  }, [open]);
  let inbox = 0;
  for (const i of state.inbox.values()) if (i.state === "open") inbox++;
  return html`<header class="topbar">
    <a href="/" class="brand">byre</a> <${StreamDot} state=${state} />
    <button type="button" class="menu-button" data-testid="nav-menu" aria-expanded=${open} aria-controls="phone-menu"
      onClick=${() => setOpen(!open)}>Menu${inbox && !open ? html` <span class="count">${inbox}</span>` : null}</button>
    ${open ? html`<div class="phone-menu" id="phone-menu">
      <${Nav} state=${state} route=${route} />
      <div class="side-foot"><span title="signed in as">${state.me.login}</span> <${SignOut} state=${state} /></div>
    </div>` : null}
  </header>`;
}

/** The whole page for a route. */
export function Layout({ route, state }) {
  const phone = isPhone();
  const [leadOpen, setLeadOpen] = useLeadOpen();
  let main;
  switch (route.name) {
    case "project": main = html`<${ProjectPage} key=${route.projectId} projectId=${route.projectId} state=${state} />`; break;
    case "new-task": main = html`<${NewTaskPage} key=${route.projectId} projectId=${route.projectId} state=${state} />`; break;
    case "task": main = html`<${TaskPage} key=${route.taskId} route=${route} state=${state} phone=${phone} />`; break;
    case "inbox": main = html`<${InboxPage} state=${state} />`; break;
    case "workflows": main = html`<${WorkflowsPage} state=${state} />`; break;
    case "lead": main = html`<${LeadPanel} state=${state} />`; break;
    case "status": main = html`<${StatusPage} state=${state} />`; break;
    default: main = html`<${ProjectsPage} state=${state} />`;
  }
  const lead = !phone && leadOpen && route.name !== "lead";
  return html`<div class=${`shell ${phone ? "phone" : "desk"} route-${route.name} ${lead ? "with-lead" : ""}`}>
    ${phone ? html`<${TopBar} state=${state} route=${route} />` : html`<${Sidebar} state=${state} route=${route} leadOpen=${leadOpen} onLead=${setLeadOpen} />`}
    ${lead ? html`<${LeadPanel} state=${state} onClose=${() => setLeadOpen(false)} />` : null}
    <main class="main">${main}</main>
  </div>`;
}

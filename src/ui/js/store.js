// The page's state: a fold of byre's log. First load through REST, then one EventSource on
// /api/events resumed by the browser with Last-Event-ID; every event folds once (by seq).
// Folds set fields and never count, so an event that a REST read already reflects folds
// to the same state. See src/ui/README.md.

import { api, withKey } from "./api.js";
import { foldReview, isReviewKind } from "./reviews.js";

/** The state views read. Mutated only here; views re-render on `subscribe`. */
export const state = {
  me: null,
  stream: "connecting", // connecting | live | reloading
  lastSeq: 0,
  version: 0,
  projects: new Map(), // id -> Project
  projectTasks: new Map(), // project id -> "loading" | "loaded"
  tasks: new Map(), // id -> Task (of loaded projects)
  tasksVersion: 0,
  inbox: new Map(), // id -> InboxItem (open at load, then every item seen)
  inboxVersion: 0,
  reads: {}, // task id -> highest summary seq read
  focus: null,
  sessions: new Map(), // task id -> Map(session id -> AgentSession), for opened tasks
  transcripts: new Map(), // task id -> Transcript
  deltas: new Map(), // session id -> { task_id, text, after, n }: a running turn's text (live text)
  reviews: new Map(), // task id -> Map(review id -> Review), for opened tasks (js/reviews.js)
  reviewsVersion: 0,
  workflowVersion: 0, // bumped by every workflow run event (the workflow tab reads the run again)
  workflowsVersion: 0, // bumped by workflow.saved / workflow.deleted
};

const subscribers = new Set();
let scheduled = false;
/** Calls `fn` after each batch of changes (at most once per animation frame). */
export function subscribe(fn) {
  subscribers.add(fn);
  return () => subscribers.delete(fn);
}
/** Re-renders the page (for state outside the store, e.g. a permission the browser gave). */
export function touch() {
  changed();
}
function changed() {
  state.version++;
  if (scheduled) return;
  scheduled = true;
  const run = () => {
    scheduled = false;
    document.body.dataset.lastSeq = String(state.lastSeq);
    document.body.dataset.stream = state.stream;
    subscribers.forEach((fn) => fn(state.version));
  };
  if (document.hidden) setTimeout(run, 50);
  else requestAnimationFrame(run);
}

// ---------------------------------------------------------------- first load and stream

let source = null;
const pending = new Map(); // project id -> events held while its tasks load
const sessionPending = new Map(); // task id -> events held while its sessions load
const reviewPending = new Map(); // task id -> review events held while its reviews load
const reviewReadAt = new Map(); // task id -> the seq folded when its reviews were last read
const focusEchoes = []; // JSON of foci this page sent, awaiting their focus.updated
let onFocusFromElsewhere = () => {};

/** Registers what to do when another window of this user moves the right pane. */
export function setFocusHandler(fn) {
  onFocusFromElsewhere = fn;
}

/**
 * Reads everything from REST, then opens the stream after the log's head. `hint` names the
 * project or task the page shows, read alongside (their reads hold their events meanwhile).
 */
export async function boot(hint = {}) {
  if (source) {
    source.close();
    source = null;
  }
  const loadedProjects = [...state.projectTasks.keys()];
  const openTranscripts = [...state.transcripts.keys()];
  state.projectTasks = new Map();
  state.tasks = new Map();
  state.tasksVersion++;
  state.transcripts = new Map();
  state.sessions = new Map();
  state.deltas = new Map();
  liveEnded.clear();
  state.reviews = new Map();
  state.reviewsVersion++;
  pending.clear();
  sessionPending.clear();
  reviewPending.clear();
  reviewReadAt.clear();
  const status = await api.getStatus();
  const head = status.last_event_seq;
  state.authMode = status.auth_mode || "local";
  state.lastSeq = head;
  const early = [];
  if (hint.projectId) early.push(ensureProject(hint.projectId));
  if (hint.taskId) early.push(openTask(hint.taskId));
  early.forEach((p) => p.catch(() => {}));
  const [me, projects, inbox, reads, focus] = await Promise.all([
    api.getMe(), api.listProjects(), api.listInbox(), api.getSummaryReads(), api.getFocus(),
  ]);
  state.me = me;
  for (const p of projects) state.projects.set(p.id, p);
  state.inbox = new Map(inbox.map((i) => [i.id, i]));
  state.inboxVersion++;
  state.reads = reads || {};
  state.focus = focus;
  changed();
  connect(head);
  await Promise.all([
    ...loadedProjects.map((p) => ensureProject(p)),
    ...openTranscripts.map((t) => openTask(t)),
  ]);
}

function connect(after) {
  state.stream = "connecting";
  const es = new EventSource(withKey(`/api/events?after=${after}`));
  source = es;
  es.onopen = () => {
    state.stream = "live";
    changed();
  };
  es.onmessage = (m) => {
    let ev;
    try {
      ev = JSON.parse(m.data);
    } catch (_) {
      return;
    }
    ingest(ev);
  };
  es.addEventListener("agent.delta", (m) => {
    try {
      delta(JSON.parse(m.data), false);
    } catch (_) { /* ignore a malformed frame */ }
  });
  // The text a running turn streamed before this stream opened (or while it lagged).
  es.addEventListener("agent.streaming", (m) => {
    try {
      delta(JSON.parse(m.data), true);
    } catch (_) { /* ignore a malformed frame */ }
  });
  es.onerror = () => {
    if (source !== es) return;
    if (es.readyState === EventSource.CLOSED) {
      // Refused (e.g. 400: the cursor is ahead of this log): start over from REST.
      state.stream = "reloading";
      changed();
      es.close();
      source = null;
      setTimeout(() => boot().catch(() => setTimeout(() => boot().catch(() => {}), 3000)), 500);
    } else {
      state.stream = "connecting";
      changed();
    }
  };
}

/** Loads a project's tasks once; events for it that arrive meanwhile fold after the read. */
export async function ensureProject(projectId) {
  if (state.projectTasks.has(projectId)) return;
  state.projectTasks.set(projectId, "loading");
  pending.set(projectId, []);
  try {
    const tasks = await api.listTasks(projectId);
    for (const t of tasks) state.tasks.set(t.id, t);
    if (!state.projects.has(projectId)) {
      state.projects.set(projectId, await api.getProject(projectId));
    }
  } catch (e) {
    state.projectTasks.delete(projectId);
    pending.delete(projectId);
    throw e;
  }
  state.projectTasks.set(projectId, "loaded");
  const held = pending.get(projectId) || [];
  pending.delete(projectId);
  for (const ev of held) foldTask(ev);
  state.tasksVersion++;
  changed();
}

// ---------------------------------------------------------------- transcripts

const PAGE = 300;

/** Opens a task: its project's tasks, its sessions and the newest page of its events. */
export async function openTask(taskId) {
  let task = state.tasks.get(taskId);
  if (!task) {
    task = await api.getTask(taskId);
    await ensureProject(task.project_id);
  }
  if (!state.reviews.has(taskId) && !reviewPending.has(taskId)) loadReviews(taskId).catch(() => {});
  if (!state.transcripts.has(taskId)) {
    const tr = { events: [], seqs: new Set(), more: true, loading: true, version: 0 };
    state.transcripts.set(taskId, tr);
    changed();
    sessionPending.set(taskId, []);
    let page;
    try {
      let sessions;
      [page, sessions] = await Promise.all([
        api.listTaskEvents(taskId, { before: Number.MAX_SAFE_INTEGER, limit: PAGE }),
        api.listSessions(taskId),
      ]);
      state.sessions.set(taskId, new Map(sessions.map((s) => [s.id, s])));
    } finally {
      const held = sessionPending.get(taskId) || [];
      sessionPending.delete(taskId);
      for (const ev of held) foldSession(ev);
    }
    mergeEvents(tr, page);
    tr.more = page.length >= PAGE;
    tr.loading = false;
    changed();
  }
}

/**
 * Reads the task's reviews (listReviews); review events that arrive meanwhile are held and
 * folded after it. Waiting reviews the page saw asked for (not listed) are kept.
 */
export async function loadReviews(taskId) {
  if (reviewPending.has(taskId)) return;
  reviewPending.set(taskId, []);
  reviewReadAt.set(taskId, state.lastSeq);
  try {
    const list = await api.listReviews(taskId);
    const map = new Map();
    for (const r of (state.reviews.get(taskId) || new Map()).values()) if (r.state === "pending") map.set(r.id, r);
    for (const r of list) map.set(r.id, r);
    state.reviews.set(taskId, map);
  } finally {
    const held = reviewPending.get(taskId) || [];
    reviewPending.delete(taskId);
    for (const ev of held) foldReviewEvent(ev);
    state.reviewsVersion++;
    changed();
  }
}

/** Pages read back on their own (to fill the view) before the reader has to scroll up. */
const AUTO_PAGES = 3;

/**
 * Reads the page of events before the earliest one loaded. `auto` (filling the view rather
 * than the reader scrolling up) reads at most AUTO_PAGES pages in a row, so a task whose
 * newest thousands of events draw nothing is not read whole on opening.
 */
export async function loadEarlier(taskId, auto = false) {
  const tr = state.transcripts.get(taskId);
  if (!tr || tr.loading || !tr.more || tr.events.length === 0) return;
  if (auto && (tr.autoPages || 0) >= AUTO_PAGES) return;
  tr.autoPages = auto ? (tr.autoPages || 0) + 1 : 0;
  tr.loading = true;
  changed();
  try {
    const page = await api.listTaskEvents(taskId, { before: tr.events[0].seq, limit: PAGE });
    mergeEvents(tr, page);
    tr.more = page.length >= PAGE;
  } finally {
    tr.loading = false;
    changed();
  }
}

function mergeEvents(tr, list) {
  let added = false;
  let ordered = true;
  for (const ev of list) {
    if (tr.seqs.has(ev.seq)) continue;
    const last = tr.events[tr.events.length - 1];
    if (last && last.seq > ev.seq) ordered = false;
    tr.seqs.add(ev.seq);
    tr.events.push(ev);
    endLive(ev);
    added = true;
  }
  if (!added) return;
  if (!ordered) tr.events.sort((a, b) => a.seq - b.seq);
  tr.version++;
}

// ---------------------------------------------------------------- the fold

/** Folds one event from the stream; a seq already folded is dropped. */
export function ingest(ev) {
  if (ev.seq <= state.lastSeq) return;
  state.lastSeq = ev.seq;
  fold(ev);
  notify(ev);
  changed();
}

function fold(ev) {
  const p = ev.payload || {};
  // Workflow runs are read, not folded (js/views/workflow.js): their events only say "read
  // again". Saved definitions likewise (the workflows page).
  if (ev.kind === "workflow.saved" || ev.kind === "workflow.deleted") state.workflowsVersion++;
  else if (ev.kind.startsWith("workflow.")) state.workflowVersion++;
  if (ev.kind === "workflow.run_started") runNames.set(p.run, p.name);
  switch (ev.kind) {
    case "user.notification_prefs_updated":
      if (state.me && p.login === state.me.login) state.me = { ...state.me, notification_prefs: p.notification_prefs };
      break;
    case "user.default_model_updated":
      if (state.me && p.login === state.me.login) state.me = { ...state.me, default_model: p.model };
      break;
    case "user.updated":
      if (state.me && p.login === state.me.login) state.me = { ...state.me, git_name: p.git_name, git_email: p.git_email };
      break;
    case "project.created":
      state.projects.set(p.id, {
        id: p.id, name: p.name, repo_path: p.repo_path, default_branch: p.default_branch,
        remote: p.remote, created_by: ev.actor, created_at: ev.created_at,
      });
      break;
    case "summary.read":
      if (ev.task_id && (state.reads[ev.task_id] || 0) < p.seq) state.reads = { ...state.reads, [ev.task_id]: p.seq };
      break;
    case "focus.updated": {
      const focus = { project_id: p.project_id, task_id: p.task_id, tabs: p.tabs || [], tab: p.tab };
      const key = focusKey(focus);
      const i = focusEchoes.indexOf(key);
      if (i >= 0) focusEchoes.splice(0, i + 1);
      else if (focusEchoes.length === 0 && key !== focusKey(state.focus)) {
        state.focus = focus;
        onFocusFromElsewhere(focus);
      }
      break;
    }
    case "inbox.item_created":
      state.inbox.set(p.id, {
        id: p.id, project_id: ev.project_id || "", task_id: ev.task_id || "",
        agent_session_id: ev.agent_session_id || "", thread_id: p.thread_id, kind: p.kind,
        payload: p.payload || {}, state: "open", created_at: ev.created_at, responses: [],
      });
      state.inboxVersion++;
      break;
    case "inbox.responded": {
      const r = p.response || {};
      const item = state.inbox.get(r.item_id);
      if (item) {
        const responses = item.responses.some((x) => x.id === r.id) ? item.responses : [...item.responses, { ...r, created_at: ev.created_at }];
        state.inbox.set(item.id, {
          ...item, responses, state: r.type === "dismiss" ? "dismissed" : "answered",
          resolved_by: ev.actor, resolved_at: ev.created_at,
        });
        state.inboxVersion++;
      }
      break;
    }
    case "inbox.superseded": {
      const item = state.inbox.get(p.id);
      if (item) {
        state.inbox.set(item.id, { ...item, state: "superseded" });
        state.inboxVersion++;
      }
      break;
    }
    case "inbox.closed": {
      // The item's task closed while it was open: byre dismissed it (schema/events.md).
      const item = state.inbox.get(p.id);
      if (item) {
        state.inbox.set(item.id, { ...item, state: "dismissed", resolved_by: ev.actor, resolved_at: ev.created_at });
        state.inboxVersion++;
      }
      break;
    }
    default:
      break;
  }
  if (ev.task_id) {
    const t = state.tasks.get(ev.task_id);
    const projectId = ev.project_id || (t && t.project_id);
    if (projectId && pending.has(projectId)) pending.get(projectId).push(ev);
    else foldTask(ev);
    if (sessionPending.has(ev.task_id)) sessionPending.get(ev.task_id).push(ev);
    else foldSession(ev);
    if (isReviewKind(ev.kind)) {
      if (reviewPending.has(ev.task_id)) reviewPending.get(ev.task_id).push(ev);
      else foldReviewEvent(ev);
    }
    const tr = state.transcripts.get(ev.task_id);
    if (tr) mergeEvents(tr, [ev]);
  }
  endLive(ev);
}

/** The fold of Task fields (only for tasks of loaded projects). */
function foldTask(ev) {
  const p = ev.payload || {};
  if (ev.kind === "task.created") {
    if (state.projectTasks.get(p.project_id) !== "loaded") return;
    state.tasks.set(p.id, {
      id: p.id, project_id: p.project_id, title: p.title, merge_title: p.title, branch: p.branch,
      worktree_path: p.worktree_path, base_ref: p.base_ref, port_base: p.port_base, color: p.color,
      status: "active", created_by: ev.actor, created_at: ev.created_at, state: "no_agent",
      merging: false, discarding: false, merging_into_parent: false, merge_after_review: false,
      summary_seq: 0,
    });
    const t = state.tasks.get(p.id);
    for (const k of ["todo_item", "forked_from", "forked_at"]) if (p[k] !== undefined) t[k] = p[k];
    state.tasksVersion++;
    return;
  }

  const t = state.tasks.get(ev.task_id);
  if (!t) return;
  const n = { ...t };
  switch (ev.kind) {
    case "task.state": n.state = p.state; break;
    case "task.worktree_failed": n.status = "discarded"; n.closed_at = ev.created_at; break;
    case "task.merge_title_set": n.merge_title = p.merge_title; break;
    case "task.merge_requested":
      n.merge_title = p.merge_title;
      n.merge_after_review = false;
      if (p.queued) n.merge_queued_at = ev.created_at;
      else n.merging = true;
      break;
    case "task.merge_started": delete n.merge_queued_at; n.merging = true; break;
    case "task.merge_after_review_set": n.merge_after_review = true; break;
    case "task.merge_after_review_dropped": n.merge_after_review = false; break;
    case "task.merge_failed": n.merging = false; delete n.merge_queued_at; break;
    case "task.merged":
      n.status = "merged"; n.merging = false; n.closed_at = ev.created_at; n.merge_commit = p.merge_commit;
      n.merging_into_parent = false;
      break;
    case "task.subtask_started": n.parent_task_id = p.parent_task_id; break;
    case "workflow.stage_started":
      n.workflow_run = p.run;
      n.workflow_stage = p.stage;
      if (runNames.has(p.run)) n.workflow = runNames.get(p.run);
      else api.getTask(t.id).then((full) => foldFetched(full)).catch(() => {});
      break;
    case "task.merge_into_parent_requested": n.merging_into_parent = true; break;
    case "task.discard_requested": n.discarding = true; delete n.merge_queued_at; break;
    case "task.discarded":
      n.status = "discarded"; n.discarding = false; n.closed_at = ev.created_at; n.merging_into_parent = false;
      break;
    case "turn.ended": if (p.summary) n.summary_seq = ev.seq; break;
    default: return;
  }
  state.tasks.set(t.id, n);
  state.tasksVersion++;
}

const runNames = new Map(); // workflow run id -> workflow name, from workflow.run_started

/** A task read again (getTask) replaces the folded one, if the page still holds it. */
function foldFetched(full) {
  if (!state.tasks.has(full.id)) return;
  state.tasks.set(full.id, full);
  state.tasksVersion++;
  changed();
}

/**
 * The fold of the reviews of opened tasks. An event about a review the page never saw asked
 * for (it waited when listReviews was read) reads the list again, unless that read already
 * came after the event.
 */
function foldReviewEvent(ev) {
  const map = state.reviews.get(ev.task_id);
  if (!map) return;
  if (foldReview(map, ev)) state.reviewsVersion++;
  else if (ev.seq > (reviewReadAt.get(ev.task_id) || 0)) loadReviews(ev.task_id).catch(() => {});
}

/** The fold of the agent sessions of opened tasks. */
function foldSession(ev) {
  const map = state.sessions.get(ev.task_id);
  if (!map) return;
  const p = ev.payload || {};
  if (ev.kind === "session.created") {
    map.set(p.id, {
      id: p.id, task_id: p.task_id, owner: "", vendor: p.vendor, model: p.model,
      vendor_session_id: p.vendor_session_id, state: "running", role: p.role,
      created_by: ev.actor, created_at: ev.created_at, subagents: 0,
    });
    return;
  }
  const s = ev.agent_session_id && map.get(ev.agent_session_id);
  if (!s) return;
  if (ev.kind === "session.state") map.set(s.id, { ...s, state: p.state });
  else if (ev.kind === "subagent.started" || ev.kind === "subagent.ended") map.set(s.id, { ...s, subagents: p.subagents });
  else if ((ev.kind === "user.message" || ev.kind === "user.queued") && p.model) map.set(s.id, { ...s, model: p.model });
}

// ---------------------------------------------------------------- live text

// Per session, the highest seq of a logged event that ends its live text: the finished text
// or the next step replaces what streamed. Frames say which text they continue (`after_seq`:
// schema/events.md, "Live-only frames"); one continuing an older text is late (the stream
// interleaves live frames and logged events in no fixed order) and dropped.
const liveEnded = new Map();
const LIVE_ENDS = new Set(["agent.text", "tool.call", "turn.started", "turn.ended", "agent.streamed"]);
/** Whether logged event `ev` ends its session's live text; notes its seq in `ended` if so. */
export function endsLive(ev, ended) {
  const sid = ev.agent_session_id;
  if (!sid || !LIVE_ENDS.has(ev.kind)) return false;
  if ((ended.get(sid) || 0) < ev.seq) ended.set(sid, ev.seq);
  return true;
}
function endLive(ev) {
  if (!endsLive(ev, liveEnded)) return;
  const cur = state.deltas.get(ev.agent_session_id);
  if (cur && !(cur.after >= ev.seq)) {
    state.deltas.delete(ev.agent_session_id);
    changed();
  }
}

/** Takes one `agent.delta` frame (exported for the page-speed bench, which feeds it directly). */
export function ingestDelta(d) {
  delta(d, false);
}
/**
 * The session's live text `cur` (`{task_id, text, after, n}` or undefined) after live frame
 * `d`, or null when the frame adds nothing; `ended` is the seq of the last logged event that
 * ended the session's text. A delta (`whole` false) appends unless its `delta_seq` is already
 * in the text; an `agent.streaming` frame (`whole`) is the text so far up to its `delta_seq`.
 * So a page that opens mid-turn shows the text so far, then the rest, each piece once. Pure.
 */
export function liveAfter(cur, d, whole, ended) {
  const p = d.payload || {};
  const text = p.text || "";
  const after = typeof p.after_seq === "number" ? p.after_seq : null;
  const n = typeof p.delta_seq === "number" ? p.delta_seq : null;
  if (after !== null && after < ended) return null;
  const same = cur && cur.after === after;
  let next;
  if (whole) {
    if (same && cur.n !== null && n !== null && cur.n >= n) return null;
    next = text;
  } else if (same) {
    if (cur.n !== null && n !== null && n <= cur.n) return null;
    next = cur.text + text;
  } else if (!cur || after === null || cur.after === null || after > cur.after) {
    next = text;
  } else {
    return null;
  }
  return { task_id: d.task_id, text: next, after, n: n === null && same ? cur.n : n };
}
/** Folds a live frame; drawn at most once per animation frame (`changed`). */
function delta(d, whole) {
  const sid = d.agent_session_id;
  if (!sid) return;
  const next = liveAfter(state.deltas.get(sid), d, whole, liveEnded.get(sid) || 0);
  if (!next) return;
  state.deltas.set(sid, next);
  changed();
}

// ---------------------------------------------------------------- focus, reads, notifications

function focusKey(f) {
  if (!f) return "";
  return JSON.stringify([f.task_id || "", f.task_id ? "" : f.project_id || "", f.tab || "", f.tabs || []]);
}

let focusChain = Promise.resolve();
/** Records the right pane's task and tab (setFocus), unless it is already so. */
export function setFocus(taskId, tab) {
  const focus = { tabs: (state.focus && state.focus.tabs) || [], tab };
  if (taskId) focus.task_id = taskId;
  const t = taskId && state.tasks.get(taskId);
  if (t) focus.project_id = t.project_id;
  if (focusKey(focus) === focusKey(state.focus)) return;
  state.focus = focus;
  const key = focusKey(focus);
  focusEchoes.push(key);
  focusChain = focusChain
    .then(() => api.setFocus(focus))
    .catch(() => {
      const i = focusEchoes.indexOf(key);
      if (i >= 0) focusEchoes.splice(i, 1);
    });
}

let paneFocus = { focused: false, drafting: false };
/** Records whether the human works in the right pane and has unsent text there. */
export function setPaneFocus(next) {
  const merged = { ...paneFocus, ...next };
  if (merged.focused === paneFocus.focused && merged.drafting === paneFocus.drafting) return;
  paneFocus = merged;
  api.setPaneFocus(merged).catch(() => {});
}

/** Marks the task's latest summary read when it is newer than the recorded one. */
export function markRead(taskId) {
  const t = state.tasks.get(taskId);
  if (!t || !t.summary_seq) return;
  if ((state.reads[taskId] || 0) >= t.summary_seq) return;
  state.reads = { ...state.reads, [taskId]: t.summary_seq };
  changed();
  api.markSummaryRead(taskId, t.summary_seq).catch(() => {});
}

/** The task id the page shows now (set by the router), to skip notifying about it. */
export const viewing = { taskId: null };

function notify(ev) {
  if (typeof Notification === "undefined" || Notification.permission !== "granted") return;
  const prefs = (state.me && state.me.notification_prefs) || {};
  const p = ev.payload || {};
  let title = "";
  let body = "";
  if (ev.kind === "inbox.item_created") {
    const pref = { question: "questions", session_error: "errors", rate_limited: "rate_limits" }[p.kind];
    if (!pref || !prefs[pref]) return;
    const t = state.tasks.get(ev.task_id);
    title = { question: "Question", session_error: "Agent error", rate_limited: "Rate limited" }[p.kind] + (t ? `: ${t.title}` : "");
    body = p.kind === "question" ? (p.payload && p.payload.question) || "" : (p.payload && p.payload.error) || "";
  } else if (ev.kind === "turn.ended" && p.summary) {
    if (!prefs.reports) return;
    const t = state.tasks.get(ev.task_id);
    title = "Report" + (t ? `: ${t.title}` : "");
    body = (p.result || "").slice(0, 200);
  } else return;
  if (!document.hidden && viewing.taskId === ev.task_id) return;
  try {
    const n = new Notification(title, { body, tag: `byre-${ev.seq}` });
    n.onclick = () => {
      window.focus();
      if (ev.task_id) window.dispatchEvent(new CustomEvent("byre:navigate", { detail: `/tasks/${ev.task_id}` }));
    };
  } catch (_) { /* not allowed here */ }
}

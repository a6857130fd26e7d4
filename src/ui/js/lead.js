// The user's lead agent, as the page holds it: its transcript (listLeadEvents, whole turns,
// paging back by the first event's seq), its sessions (listLeadSessions), its notes
// (listLeadNotes) and its live text. Opened on first show: the log's head is read, then the
// newest page of turns, then one EventSource on `/api/events?lead=true` after that head (only
// the caller's lead events come on it). Events fold once, by seq; every change re-renders
// through the store's `touch`. See src/ui/README.md.

import { api, withKey } from "./api.js";
import { endsLive, liveAfter, touch } from "./store.js";

/** The lead's state. `events` oldest first; `deltas`: session id -> streaming text. */
export const lead = {
  opened: false,
  loading: false,
  more: false,
  error: null,
  events: [],
  seqs: new Set(),
  version: 0,
  sessions: new Map(), // id -> AgentSession
  notes: null, // [LeadNote] once read
  deltas: new Map(),
  stream: "closed", // closed | connecting | live
};

const TURNS = 20;
let source = null;
// Live text as the page's store folds it (js/store.js `liveAfter`): per session, the text with
// the frames it covers, and the seq of the last logged event that ended a session's text.
const live = new Map();
const liveEnded = new Map();

function add(list) {
  let added = false;
  for (const ev of list) {
    if (lead.seqs.has(ev.seq)) continue;
    lead.seqs.add(ev.seq);
    lead.events.push(ev);
    added = true;
  }
  if (!added) return;
  lead.events.sort((a, b) => a.seq - b.seq);
  lead.version++;
}

/** Reads the lead's newest turns, sessions and notes, then follows its events. Once. */
export async function openLead() {
  if (lead.opened) return;
  lead.opened = true;
  lead.loading = true;
  touch();
  try {
    const status = await api.getStatus();
    const head = status.last_event_seq;
    const [page, sessions, notes] = await Promise.all([
      api.listLeadEvents({ turns: TURNS }),
      api.listLeadSessions(),
      api.listLeadNotes(),
    ]);
    add(page.events);
    lead.more = page.more;
    lead.sessions = new Map(sessions.map((s) => [s.id, s]));
    lead.notes = notes;
    lead.error = null;
    connect(head);
  } catch (e) {
    lead.error = e.message;
    lead.opened = false;
  } finally {
    lead.loading = false;
    touch();
  }
}

/** Reads the page of whole turns before the earliest event loaded. */
export async function leadEarlier() {
  if (lead.loading || !lead.more || !lead.events.length) return;
  lead.loading = true;
  touch();
  try {
    const page = await api.listLeadEvents({ before: lead.events[0].seq, turns: TURNS });
    add(page.events);
    lead.more = page.more;
  } catch (e) {
    lead.error = e.message;
  } finally {
    lead.loading = false;
    touch();
  }
}

/** Reads the notes again (after a delete, or a remember/forget the stream announced). */
export async function reloadNotes() {
  try {
    lead.notes = await api.listLeadNotes();
  } catch (e) {
    lead.error = e.message;
  }
  touch();
}

function connect(after) {
  if (source) source.close();
  lead.stream = "connecting";
  const es = new EventSource(withKey(`/api/events?lead=true&after=${after}`));
  source = es;
  es.onopen = () => {
    lead.stream = "live";
    touch();
  };
  es.onmessage = (m) => {
    let ev;
    try {
      ev = JSON.parse(m.data);
    } catch (_) {
      return;
    }
    fold(ev);
    touch();
  };
  const onLive = (whole) => (m) => {
    let d;
    try {
      d = JSON.parse(m.data);
    } catch (_) {
      return;
    }
    const sid = d.agent_session_id;
    const next = sid && liveAfter(live.get(sid), d, whole, liveEnded.get(sid) || 0);
    if (!next) return;
    live.set(sid, next);
    lead.deltas.set(sid, next.text);
    touch();
  };
  es.addEventListener("agent.delta", onLive(false));
  // The text a running turn streamed before this stream opened (or while it lagged).
  es.addEventListener("agent.streaming", onLive(true));
  es.onerror = () => {
    if (source !== es) return;
    if (es.readyState === EventSource.CLOSED) {
      // Refused (a cursor from another log): read everything again.
      es.close();
      source = null;
      Object.assign(lead, { opened: false, events: [], seqs: new Set(), version: lead.version + 1, deltas: new Map() });
      live.clear();
      liveEnded.clear();
      setTimeout(() => openLead(), 1000);
    } else {
      lead.stream = "connecting";
      touch();
    }
  };
}

function fold(ev) {
  const p = ev.payload || {};
  add([ev]);
  const sid = ev.agent_session_id;
  if (endsLive(ev, liveEnded) && !(live.get(sid) && live.get(sid).after >= ev.seq)) {
    live.delete(sid);
    lead.deltas.delete(sid);
  }
  if (ev.kind === "session.created") {
    lead.sessions.set(p.id, { id: p.id, owner: ev.owner || "", task_id: "", vendor: p.vendor, model: p.model, role: p.role, state: "idle", created_at: ev.created_at });
  } else if (ev.kind === "session.state" && sid && lead.sessions.has(sid)) {
    lead.sessions.set(sid, { ...lead.sessions.get(sid), state: p.state });
  } else if (ev.kind.startsWith("lead_note.")) {
    reloadNotes();
  } else if (ev.kind === "tool.call" && (p.name || "").match(/(^|__)(remember|forget)$/)) {
    // The note events follow the call; read them once the turn moves on.
    setTimeout(reloadNotes, 300);
  }
}

/** The lead's live session (the newest not completed), or null. */
export function liveLeadSession() {
  let live = null;
  for (const s of lead.sessions.values()) {
    if (s.state === "completed") continue;
    if (!live || s.created_at >= live.created_at) live = s;
  }
  return live;
}

/** Sends `text` to the lead (messageLead); the session it went to or is held for. */
export async function sendToLead(text) {
  const s = await api.messageLead({ text });
  if (s && s.id) lead.sessions.set(s.id, { ...(lead.sessions.get(s.id) || {}), ...s });
  touch();
  return s;
}

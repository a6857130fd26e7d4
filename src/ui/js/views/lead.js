// The lead agent's chat (js/lead.js holds its state): its transcript drawn like a task's
// (the same items), paging back by whole turns, its live text, a composer (messageLead: held
// as the next turn while the lead is mid-turn; Escape interrupts), and its notes with delete.
// On a desktop it is a column beside the task list (toggled from the sidebar, remembered in
// localStorage); on a phone it is the `/lead` page. The right pane follows the lead's `show`
// through the user's Focus, as any other window's moves (js/main.js).

import { html, useState, useEffect, useRef } from "../html.js";
import { api } from "../api.js";
import { lead, openLead, leadEarlier, reloadNotes, liveLeadSession, sendToLead } from "../lead.js";
import { buildItems, ItemView } from "./items.js";
import { VList, stickToBottom } from "../vlist.js";
import { when } from "../util.js";

/**
 * A lead session's first message is byre's instructions and the user's notes, `---`, then the
 * user's own words (or a compacted lead's handoff): the chat shows the user's words only.
 */
const MARK = "\n\n---\n\n";
const SAID = "The user's message:\n\n";
function userWords(ev) {
  if (ev.kind !== "user.message" && ev.kind !== "user.queued") return ev;
  const text = (ev.payload && ev.payload.text) || "";
  const at = text.indexOf(MARK);
  if (at < 0) return ev;
  let rest = text.slice(at + MARK.length);
  if (rest.startsWith(SAID)) rest = rest.slice(SAID.length);
  return { ...ev, payload: { ...ev.payload, text: rest } };
}

let built = { version: -1, items: [] };
function items() {
  if (built.version !== lead.version) built = { version: lead.version, items: buildItems(lead.events.map(userWords)) };
  return built.items;
}

function Notes({ state }) {
  const [error, setError] = useState(null);
  if (!lead.notes) return null;
  const remove = async (id) => {
    setError(null);
    try {
      await api.deleteLeadNote(id);
    } catch (e) {
      setError(e.message);
    }
    reloadNotes();
  };
  return html`<div class="lead-notes" data-testid="lead-notes">
    ${lead.notes.length === 0 ? html`<p class="hint">No notes yet. The lead keeps what it learns about how you work here (its <code>remember</code> tool); each new lead session starts with them.</p>` : null}
    <ul>${lead.notes.map((n) => html`<li key=${n.id} data-testid="lead-note" data-note-id=${n.id}>
      <span class="note-text">${n.text}</span>
      <span class="hint">${n.project_id ? `${(state.projects.get(n.project_id) || { name: n.project_id }).name} · ` : ""}${when(n.updated_at)}</span>
      <button type="button" class="link small danger-quiet" data-testid="lead-note-delete" title="Delete this note" onClick=${() => remove(n.id)}>delete</button>
    </li>`)}</ul>
    ${error ? html`<div class="form-error" role="alert">${error}</div>` : null}
  </div>`;
}

function Live() {
  const list = [...lead.deltas.entries()].filter(([, t]) => t);
  if (!list.length) return null;
  return html`<div class="live">${list.map(([sid, text]) => html`<div class="item agent streaming" data-testid="lead-live" data-session-id=${sid}>
    <div class="live-text">${text}</div><span class="caret"></span></div>`)}</div>`;
}

function LeadComposer({ state }) {
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const input = useRef(null);
  const session = liveLeadSession();
  const running = session && session.state === "running";
  const send = async () => {
    if (busy || !text.trim()) return;
    setBusy(true);
    setError(null);
    try {
      await sendToLead(text);
      setText("");
      stickToBottom();
    } catch (e) {
      setError(e.message);
    } finally {
      setBusy(false);
      if (input.current) input.current.focus();
    }
  };
  const interrupt = async () => {
    try {
      await api.interruptSession(session.id);
    } catch (e) {
      setError(e.message);
    }
  };
  const onKey = (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    } else if (e.key === "Escape" && running) {
      e.preventDefault();
      interrupt();
    }
  };
  return html`<div class="composer lead-composer" data-testid="lead-composer">
    <textarea ref=${input} data-testid="lead-input" rows="3" value=${text} onInput=${(e) => setText(e.target.value)} onKeyDown=${onKey}
      placeholder=${running ? "Message (sent as the lead's next turn)…" : "Ask your lead: start tasks, check on agents, show a task…"}></textarea>
    ${error ? html`<div class="form-error" role="alert" data-testid="lead-error">${error}</div>` : null}
    <div class="composer-bar">
      <span class="hint">${session ? `${session.model}${running ? " · working" : ""}` : `starts on ${state.me.default_model || "your default model"}`}</span>
      <span class="grow"></span>
      ${running ? html`<button type="button" class="danger" data-testid="lead-interrupt" title="Interrupt (Esc)" onClick=${interrupt}>Interrupt</button>` : null}
      <button type="button" class="primary" data-testid="lead-send" disabled=${busy || !text.trim()} onClick=${send}>${running ? "Queue" : "Send"}</button>
    </div>
  </div>`;
}

/** The lead's chat: transcript, live text, composer; notes behind a toggle. */
export function LeadPanel({ state, onClose }) {
  const [tab, setTab] = useState("chat");
  useEffect(() => {
    openLead();
  }, []);
  const list = items();
  const header = lead.loading && lead.events.length === 0 ? html`<div class="earlier">Loading…</div>`
    : lead.more ? html`<div class="earlier" data-testid="lead-earlier">${lead.loading ? "Loading earlier turns…"
      : html`<button type="button" class="link" onClick=${() => leadEarlier()}>Load earlier turns</button>`}</div>`
    : list.length ? html`<div class="earlier start">The beginning of your lead's conversation.</div>`
    : html`<div class="earlier start lead-empty">Your lead agent works across your projects: it starts tasks and workflow runs, messages their agents, and shows you what needs you. Merging, discarding and answering the inbox stay with you.</div>`;
  return html`<section class="lead-panel" data-testid="lead-panel" data-stream=${lead.stream}>
    <header class="lead-head">
      <strong>Lead</strong>
      <div class="tabs small">
        <button type="button" class=${tab === "chat" ? "tab on" : "tab"} data-testid="lead-tab-chat" onClick=${() => setTab("chat")}>Chat</button>
        <button type="button" class=${tab === "notes" ? "tab on" : "tab"} data-testid="lead-tab-notes" onClick=${() => { setTab("notes"); reloadNotes(); }}>Notes${lead.notes && lead.notes.length ? html` <span class="count">${lead.notes.length}</span>` : null}</button>
      </div>
      ${onClose ? html`<button type="button" class="link small" data-testid="lead-close" title="Hide the lead (l)" onClick=${onClose}>hide</button>` : null}
    </header>
    ${lead.error ? html`<div class="form-error" role="alert" data-testid="lead-load-error">${lead.error}</div>` : null}
    ${tab === "notes" ? html`<${Notes} state=${state} />` : html`<div class="transcript-wrap">
      <${VList} testid="lead-transcript" items=${list} itemKey=${(it) => it.key}
        renderItem=${(it) => html`<${ItemView} type=${it.type} ev=${it.ev} result=${it.result} n=${it.n} taskId=${null} />`}
        onNearTop=${(auto) => !auto && leadEarlier()}
        header=${header} footer=${html`<${Live} />`} />
    </div>
    <${LeadComposer} state=${state} />`}
  </section>`;
}

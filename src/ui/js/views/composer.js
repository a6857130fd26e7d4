// The composer: send (Enter; Shift+Enter for a new line), images by paste, drop or picker
// (uploadBlob), model, interrupt (Esc), queued messages with withdraw, compact.

import { html, useState, useRef, useEffect } from "../html.js";
import { api } from "../api.js";
import { setPaneFocus } from "../store.js";
import { MODELS } from "./tasks.js";
import { stickToBottom } from "../vlist.js";

/** The task's live implementer session (the newest not completed), or null. */
export function liveSession(state, taskId) {
  const map = state.sessions.get(taskId);
  if (!map) return null;
  let live = null;
  for (const s of map.values()) {
    if (s.state === "completed" || (s.role && s.role !== "implementer")) continue;
    if (!live || s.created_at >= live.created_at) live = s;
  }
  return live;
}

const queuedCache = new WeakMap(); // transcript -> { version, list }
/** Messages queued and not yet handed over, from the loaded events (memoised per change). */
export function queuedMessages(state, taskId) {
  const tr = state.transcripts.get(taskId);
  if (!tr) return [];
  const hit = queuedCache.get(tr);
  if (hit && hit.version === tr.version) return hit.list;
  const list = scanQueued(tr);
  queuedCache.set(tr, { version: tr.version, list });
  return list;
}

function scanQueued(tr) {
  const q = new Map();
  for (const ev of tr.events) {
    const p = ev.payload || {};
    if (ev.kind === "user.queued") q.set(p.input_id, ev);
    else if (ev.kind === "user.unqueued" || ev.kind === "user.message") q.delete(p.input_id);
  }
  return [...q.values()];
}

const drafts = new Map(); // task id -> text, kept while moving between tasks

export function Composer({ state, task }) {
  const taskId = task.id;
  const [text, setText] = useState(drafts.get(taskId) || "");
  const [images, setImages] = useState([]); // { id, url }
  const [model, setModel] = useState("");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [uploading, setUploading] = useState(0);
  const input = useRef(null);
  const session = liveSession(state, taskId);
  const running = session && session.state === "running";
  const closed = task.status !== "active";
  const finishing = task.merging || task.discarding;
  const queued = queuedMessages(state, taskId);

  useEffect(() => {
    drafts.set(taskId, text);
    setPaneFocus({ drafting: text.trim() !== "" });
  }, [text]);

  const upload = async (files) => {
    const all = [...files];
    const list = all.filter((f) => f.type.startsWith("image/"));
    if (list.length < all.length) setError(`Only images can be attached: ${all.filter((f) => !list.includes(f)).map((f) => f.name).join(", ")} left out.`);
    if (!list.length) return;
    setUploading((n) => n + list.length);
    for (const f of list) {
      try {
        const blob = await api.uploadBlob(f);
        setImages((imgs) => [...imgs, { id: blob.id, url: api.blobUrl(blob.id) }]);
      } catch (e) {
        setError(e.message);
      } finally {
        setUploading((n) => n - 1);
      }
    }
  };

  const send = async () => {
    if (busy || uploading) return;
    if (!text.trim() && !images.length) return;
    setBusy(true);
    setError(null);
    try {
      const m = model.trim();
      if (!session) {
        const body = { prompt: text };
        if (m) body.model = m;
        if (images.length) body.images = images.map((i) => i.id);
        await api.createSession(taskId, body);
      } else {
        const body = { text, images: images.map((i) => i.id) };
        if (m && m !== session.model) body.model = m;
        await api.sendMessage(session.id, body);
      }
      setText("");
      setImages([]);
      drafts.delete(taskId);
      stickToBottom();
    } catch (e) {
      setError(e.message);
    } finally {
      setBusy(false);
      if (input.current) input.current.focus();
    }
  };
  const act = (fn) => async () => {
    setError(null);
    try {
      await fn();
    } catch (e) {
      setError(e.message);
    }
  };
  const interrupt = act(() => api.interruptSession(session.id));
  const compact = act(() => {
    const m = model.trim();
    return api.compactSession(session.id, m ? { model: m } : {});
  });

  const onKey = (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    } else if (e.key === "Escape" && running) {
      e.preventDefault();
      interrupt();
    }
  };
  const onPaste = (e) => {
    const files = [...(e.clipboardData ? e.clipboardData.files : [])];
    if (files.length) {
      e.preventDefault();
      upload(files);
    }
  };
  const onDrop = (e) => {
    if (e.dataTransfer && e.dataTransfer.files.length) {
      e.preventDefault();
      upload(e.dataTransfer.files);
    }
  };

  if (closed) return html`<div class="composer closed" data-testid="composer">This task is ${task.status}; its transcript stays.</div>`;
  const placeholder = finishing ? (task.merging ? "Merging: no messages until it ends." : "Discarding: no messages.")
    : !session ? "Message to start the agent…" : running ? "Message (queued until the turn ends)…" : "Message the agent…";
  return html`<div class="composer" data-testid="composer" onDragOver=${(e) => e.preventDefault()} onDrop=${onDrop}>
    ${queued.length ? html`<div class="queued">
      ${queued.map((ev) => html`<div class="queued-item" data-testid="queued-item" data-input-id=${ev.payload.input_id}>
        <span class="tag">queued</span> <span class="qtext">${ev.payload.text || "(images)"}</span>
        <button type="button" class="link" data-testid="queued-withdraw" onClick=${act(() => api.withdrawMessage(taskId, ev.payload.input_id))}>withdraw</button>
      </div>`)}
    </div>` : null}
    ${images.length || uploading ? html`<div class="attached">
      ${images.map((im) => html`<span class="thumb" data-testid="composer-image"><img src=${im.url} alt="attached" />
        <button type="button" class="x" title="remove" data-testid="composer-image-remove" onClick=${() => setImages((l) => l.filter((x) => x.id !== im.id))}>×</button></span>`)}
      ${uploading ? html`<span class="hint">uploading…</span>` : null}
    </div>` : null}
    <textarea ref=${input} data-testid="composer-input" rows="3" value=${text} disabled=${finishing}
      placeholder=${placeholder} onInput=${(e) => setText(e.target.value)} onKeyDown=${onKey} onPaste=${onPaste}></textarea>
    ${error ? html`<div class="form-error" role="alert" data-testid="composer-error">${error}</div>` : null}
    <div class="composer-bar">
      <label class="file-button" title="Attach images">+ Image<input type="file" accept="image/png,image/jpeg,image/gif,image/webp" multiple data-testid="composer-attach" onChange=${(e) => { upload(e.target.files); e.target.value = ""; }} /></label>
      <input class="model" data-testid="composer-model" list="composer-models" value=${model} placeholder=${session ? session.model || "model" : state.me.default_model} title="Model (this turn and later ones)" onInput=${(e) => setModel(e.target.value)} spellcheck="false" autocomplete="off" />
      <datalist id="composer-models">${MODELS.map((m) => html`<option value=${m} />`)}</datalist>
      <span class="grow"></span>
      ${session && session.subagents > 0 ? html`<span class="hint" data-testid="composer-subagents" title="The agent's own subagents still running, background ones included">${session.subagents} subagent${session.subagents === 1 ? "" : "s"} running</span>` : null}
      ${session && !running && !finishing ? html`<button type="button" data-testid="composer-compact" title="Have the agent write a handoff and continue in a new session" onClick=${compact}>Compact</button>` : null}
      ${running ? html`<button type="button" class="danger" data-testid="composer-interrupt" title="Interrupt the turn (Esc)" onClick=${interrupt}>Interrupt</button>` : null}
      <button type="button" class="primary" data-testid="composer-send" disabled=${busy || finishing || uploading > 0 || (!text.trim() && !images.length)} onClick=${send}>${running ? "Queue" : "Send"}</button>
    </div>
  </div>`;
}

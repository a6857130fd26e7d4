// The inbox: agents' questions as forms (pick-one, pick-any, other with text and images,
// dismiss), session errors and rate limits; several answers go in one respondInbox.

import { html, useState, useEffect } from "../html.js";
import { api } from "../api.js";
import { renderMarkdown } from "../markdown.js";
import { ago, when } from "../util.js";
import { state as store, touch, ensureProject } from "../store.js";

const PREFS = [["questions", "questions"], ["reports", "reports (turns that end with a summary)"], ["errors", "session errors"], ["rate_limits", "rate limits"]];

/** Which new items notify this user (updateNotificationPrefs), and the browser's permission. */
function NotificationPrefs({ me }) {
  const prefs = me.notification_prefs || {};
  const [error, setError] = useState(null);
  const toggle = async (key) => {
    setError(null);
    try {
      const u = await api.updateNotificationPrefs({ ...prefs, [key]: !prefs[key] });
      store.me = { ...store.me, notification_prefs: u.notification_prefs };
      touch();
    } catch (e) {
      setError(e.message);
    }
  };
  const perm = typeof Notification === "undefined" ? "unsupported" : Notification.permission;
  return html`<section class="card prefs" data-testid="notification-prefs">
    <h2>Notifications</h2>
    <p class="hint">Shown by this browser while a byre page is open and you are not looking at that task.
      ${perm === "default" ? html` <button type="button" class="link" data-testid="notify-enable" onClick=${() => Notification.requestPermission().then(touch)}>Allow notifications</button>` : perm === "denied" ? " This browser blocks them for byre." : perm === "unsupported" ? " This browser has none." : ""}</p>
    <div class="prefs-row">${PREFS.map(([key, label]) => html`<label class="pref"><input type="checkbox" data-testid=${`pref-${key}`} checked=${!!prefs[key]} onChange=${() => toggle(key)} /> ${label}</label>`)}</div>
    ${error ? html`<div class="form-error" role="alert">${error}</div>` : null}
  </section>`;
}

function ItemCard({ item, answer, setAnswer, state, showTask }) {
  const p = item.payload || {};
  const open = item.state === "open";
  const chosen = open ? [] : item.responses.flatMap((r) => r.options || []);
  const a = answer || { options: chosen, text: "", dismiss: false, images: [] };
  const task = state.tasks.get(item.task_id);
  const set = (patch) => setAnswer({ ...a, ...patch });
  const pick = (opt) => {
    if (p.multiple) set({ options: a.options.includes(opt) ? a.options.filter((o) => o !== opt) : [...a.options, opt], dismiss: false });
    // A pick-one answer is the option alone (the contract takes no text or images with it):
    // picking one clears them, as typing an answer of one's own clears the option, so what
    // the form shows is what is sent.
    else set({ options: [opt], text: "", images: [], dismiss: false });
  };
  const upload = async (files) => {
    for (const f of files) {
      try {
        const b = await api.uploadBlob(f);
        setAnswer((cur) => {
          const c = cur || a;
          return { ...c, images: [...(c.images || []), b.id], dismiss: false, options: p.multiple ? c.options : [] };
        });
      } catch (e) { /* shown by the toast */ }
    }
  };
  const title = { question: "Question", session_error: "Session error", rate_limited: "Rate limited" }[item.kind];
  return html`<li class=${`inbox-item ${item.kind} ${item.state}`} data-testid="inbox-item" data-item-id=${item.id} data-kind=${item.kind} data-state=${item.state}>
    <div class="meta"><strong>${title}</strong>${showTask ? html` · <a href=${`/tasks/${item.task_id}/inbox`}>${task ? task.title : "a task"}</a>` : null}${" · "}<time title=${when(item.created_at)}>${ago(item.created_at)}</time>${open ? null : html` · <span class="tag">${item.state}${item.resolved_by ? ` by ${item.resolved_by}` : ""}</span>`}</div>
    ${item.kind === "question" ? html`
      <div class="q" data-testid="inbox-question">${p.question}</div>
      ${p.why_blocked ? html`<div class="why hint">Blocked because: ${p.why_blocked}</div>` : null}
      ${p.context ? html`<details class="ctx"><summary>Context</summary><div class="md" dangerouslySetInnerHTML=${{ __html: renderMarkdown(p.context, item.task_id) }}></div></details>` : null}
      ${(p.options || []).length ? html`<div class="choices" role=${p.multiple ? "group" : "radiogroup"}>
        ${p.options.map((opt) => html`<label class=${`choice ${(p.recommended || []).includes(opt) ? "rec" : ""}`}>
          <input type=${p.multiple ? "checkbox" : "radio"} name=${`q-${item.id}`} value=${opt} data-testid="inbox-choice" disabled=${!open}
            checked=${a.options.includes(opt)} onChange=${() => pick(opt)} />
          <span>${opt}</span>${(p.recommended || []).includes(opt) ? html`<span class="tag">recommended</span>` : null}</label>`)}
      </div>` : null}`
    : html`<pre class="err">${p.error || ""}</pre>`}
    ${open ? html`<div class="other">
      <textarea rows="2" data-testid="inbox-other-text" placeholder=${item.kind === "question" ? ((p.options || []).length ? (p.multiple ? "Add a note, or answer in your own words" : "Or answer in your own words") : "Your answer") : "Tell the agent what to do next (optional)"}
        value=${a.text} onInput=${(e) => set({ text: e.target.value, dismiss: false, options: p.multiple ? a.options : e.target.value ? [] : a.options })}></textarea>
      <div class="row">
        <label class="file-button small">+ Image<input type="file" accept="image/png,image/jpeg,image/gif,image/webp" multiple onChange=${(e) => { upload([...e.target.files]); e.target.value = ""; }} /></label>
        ${(a.images || []).map((id) => html`<img class="mini" src=${api.blobUrl(id)} alt="attached" />`)}
        <span class="grow"></span>
        <label class="dismiss"><input type="checkbox" data-testid="inbox-dismiss" checked=${a.dismiss} onChange=${(e) => set({ dismiss: e.target.checked, options: [], text: "" })} /> dismiss</label>
      </div>
    </div>` : html`${item.responses.map((r) => html`<div class="resp hint">${r.user}: ${r.type === "dismiss" ? "dismissed" : [...(r.options || []), r.text].filter(Boolean).join(" — ")}${r.delivered_at ? " (delivered)" : ""}</div>`)}`}
  </li>`;
}

function toResponse(item, a) {
  if (!a) return null;
  const p = item.payload || {};
  if (a.dismiss) return { item_id: item.id, type: "dismiss" };
  if (a.options.length) {
    const r = { item_id: item.id, type: "option", options: a.options };
    if (p.multiple && (a.text || (a.images || []).length)) {
      r.text = a.text;
      r.images = a.images || [];
    }
    return r;
  }
  if (a.text.trim() || (a.images || []).length) return { item_id: item.id, type: "other", text: a.text, images: a.images || [] };
  return null;
}

/** The open items (of one task, or all), answered together. */
export function InboxList({ state, taskId }) {
  const [answers, setAnswers] = useState({});
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const items = [...state.inbox.values()].filter((i) => !taskId || i.task_id === taskId)
    .sort((a, b) => (a.created_at < b.created_at ? -1 : 1));
  const [history, setHistory] = useState([]);
  useEffect(() => {
    if (!taskId) return;
    Promise.all(["answered", "dismissed", "superseded"].map((st) => api.listInbox({ task_id: taskId, state: st }).catch(() => [])))
      .then((lists) => setHistory(lists.flat()));
  }, [taskId]);
  const open = items.filter((i) => i.state === "open");
  const doneMap = new Map(history.map((i) => [i.id, i]));
  if (taskId) for (const i of items) if (i.state !== "open") doneMap.set(i.id, i);
  const done = [...doneMap.values()].filter((i) => !(state.inbox.get(i.id) && state.inbox.get(i.id).state === "open"))
    .sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
  const responses = open.map((i) => toResponse(i, answers[i.id])).filter(Boolean);
  const submit = async (e) => {
    e.preventDefault();
    if (!responses.length) return;
    setBusy(true);
    setError(null);
    try {
      await api.respondInbox(responses);
      setAnswers({});
    } catch (err) {
      setError(err.message);
    } finally {
      setBusy(false);
    }
  };
  const setFor = (id) => (next) => setAnswers((cur) => ({ ...cur, [id]: typeof next === "function" ? next(cur[id]) : next }));
  return html`<form class="pane-body inbox" data-testid="inbox-list" onSubmit=${submit}>
    ${open.length === 0 ? html`<p class="hint pad" data-testid="inbox-empty">Nothing waits for you${taskId ? " in this task" : ""}.</p>` : html`<ul class="inbox-items">
      ${open.map((i) => html`<${ItemCard} key=${i.id} item=${i} answer=${answers[i.id]} setAnswer=${setFor(i.id)} state=${state} showTask=${!taskId} />`)}
    </ul>`}
    ${open.length ? html`<div class="inbox-actions">
      ${error ? html`<div class="form-error" role="alert" data-testid="inbox-error">${error}</div>` : null}
      <button type="submit" class="primary" data-testid="inbox-submit" disabled=${busy || !responses.length}>${responses.length > 1 ? `Send ${responses.length} answers` : "Send answer"}</button>
    </div>` : null}
    ${done.length ? html`<h3 class="pad">Answered</h3><ul class="inbox-items done">${done.map((i) => html`<${ItemCard} key=${i.id} item=${i} state=${state} setAnswer=${() => {}} />`)}</ul>` : null}
  </form>`;
}

/** `/inbox`: every open item across projects. */
export function InboxPage({ state }) {
  // The tasks' titles: read the projects that have open items.
  const projects = [...new Set([...state.inbox.values()].filter((i) => i.state === "open").map((i) => i.project_id))].filter(Boolean);
  useEffect(() => {
    projects.forEach((p) => ensureProject(p).catch(() => {}));
  }, [projects.join(",")]);
  return html`<div class="page inbox-page"><h1>Inbox</h1><${InboxList} state=${state} taskId=${null} /><${NotificationPrefs} me=${state.me} /></div>`;
}

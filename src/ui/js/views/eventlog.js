// The pane's transcript tab: the task's events exactly as logged (seq, time, kind, actor,
// payload on demand), windowed like the transcript.

import { html } from "../html.js";
import { loadEarlier } from "../store.js";
import { VList } from "../vlist.js";
import { pretty } from "../util.js";

function Row({ ev }) {
  const p = { ...(ev.payload || {}) };
  delete p.raw;
  return html`<details class="evrow" data-seq=${ev.seq}>
    <summary><span class="seq">${ev.seq}</span> <span class="kind">${ev.kind}</span> <span class="actor">${ev.actor}</span>
      <time title=${ev.created_at}>${new Date(ev.created_at).toLocaleTimeString()}</time></summary>
    <pre>${pretty(p)}</pre>
  </details>`;
}

/** Every loaded event of the task, oldest first. */
export function EventLog({ state, taskId }) {
  const tr = state.transcripts.get(taskId);
  if (!tr) return html`<div class="pane-body hint">Loading…</div>`;
  return html`<div class="pane-body eventlog">
    <${VList} testid="eventlog" items=${tr.events} itemKey=${(ev) => String(ev.seq)} estimate=${26}
      renderItem=${(ev) => html`<${Row} ev=${ev} />`} onNearTop=${(auto) => loadEarlier(taskId, auto)}
      header=${tr.more ? html`<div class="earlier">${tr.loading ? "Loading…" : html`<button type="button" class="link" onClick=${() => loadEarlier(taskId, false)}>Load earlier events</button>`}</div>` : null} />
  </div>`;
}

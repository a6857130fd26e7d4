// A task's transcript: its events as items in a windowed list, paging back through
// listTaskEvents as the reader scrolls up, with the live text of running turns below (plain
// text while it streams, one text node per frame; the finished agent.text is Markdown).

import { html } from "../html.js";
import { loadEarlier } from "../store.js";
import { VList } from "../vlist.js";
import { buildItems, ItemView } from "./items.js";
import { reviewerSessions } from "../reviews.js";

const built = new WeakMap(); // transcript -> { version, items }
function itemsOf(tr) {
  const hit = built.get(tr);
  if (hit && hit.version === tr.version) return hit.items;
  const items = buildItems(tr.events);
  built.set(tr, { version: tr.version, items });
  return items;
}

function Live({ state, taskId }) {
  const live = [];
  // A reviewer's text is not the task's agent's: it shows as its review's report instead.
  const reviewers = reviewerSessions(state.reviews.get(taskId), state.sessions.get(taskId));
  for (const [sid, d] of state.deltas) if (d.task_id === taskId && d.text && !reviewers.has(sid)) live.push([sid, d.text]);
  if (!live.length) return null;
  return html`<div class="live">${live.map(([sid, text]) => html`<div class="item agent streaming" data-testid="live-delta" data-session-id=${sid}>
    <div class="live-text">${text}</div><span class="caret"></span>
  </div>`)}</div>`;
}

/** The transcript of `taskId` (the store must have opened it). */
export function Transcript({ state, taskId }) {
  const tr = state.transcripts.get(taskId);
  if (!tr) return html`<div class="transcript-wrap"><div class="hint pad">Loading…</div></div>`;
  const items = itemsOf(tr);
  const header = tr.loading || tr.more
    ? html`<div class="earlier" data-testid="transcript-earlier">${tr.loading ? "Loading earlier events…"
      : html`<button type="button" class="link" onClick=${() => loadEarlier(taskId, false)}>Load earlier events</button>`}</div>`
    : html`<div class="earlier start">The beginning of the task.</div>`;
  return html`<div class="transcript-wrap">
    <${VList} testid="transcript" items=${items} itemKey=${(it) => it.key}
      renderItem=${(it) => html`<${ItemView} type=${it.type} ev=${it.ev} result=${it.result} n=${it.n} taskId=${taskId} />`}
      onNearTop=${(auto) => loadEarlier(taskId, auto)}
      header=${header}
      footer=${html`<${Live} state=${state} taskId=${taskId} />`} />
  </div>`;
}

// The reviews tab: each snapshot's review, oldest first, as the store folds them (listReviews,
// then `review.*` events): its state, the reviewer's summary (Markdown, the transcript's safe
// renderer), its findings with `path:line` opening the changes tab at that file, "fix" and
// "ignore" per finding of a done review (setFindingState), "stop" on a running one
// (stopReview). Actions wait for their events; nothing here patches the state by hand.

import { html, useState } from "../html.js";
import { api } from "../api.js";
import { renderMarkdown } from "../markdown.js";
import { listed, openFindings } from "../reviews.js";
import { ago, when } from "../util.js";

const STATE_WORDS = { running: "reviewing", done: "done", failed: "failed", skipped: "skipped" };
const VENDOR_WORDS = { claude: "Claude Code", codex: "Codex" };

/** Where a finding points: the changes tab at its file (all changes up to the snapshot). */
export function findingHref(taskId, snapshotN, f) {
  const q = new URLSearchParams({ snapshot: String(snapshotN), path: f.path, line: String(f.line) });
  return `/tasks/${encodeURIComponent(taskId)}/changes?${q}`;
}

function Finding({ task, review, f, index }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const marked = review.finding_states[String(index)] || "";
  const done = review.state === "done";
  const set = async (to) => {
    setBusy(true);
    setError(null);
    try {
      await api.setFindingState(review.id, index, to);
    } catch (e) {
      setError(e.message);
    } finally {
      setBusy(false);
    }
  };
  const closed = task.status !== "active";
  return html`<li class=${`finding sev-${f.severity} ${marked ? `marked ${marked}` : "open"}`} data-testid="finding" data-index=${index} data-state=${marked || "open"} data-severity=${f.severity}>
    <div class="finding-head">
      <span class=${`sev sev-${f.severity}`} data-testid="finding-severity">${f.severity}</span>
      ${f.category ? html`<span class="tag" data-testid="finding-category">${f.category}</span>` : null}
      <strong class="finding-title" data-testid="finding-title">${f.title}</strong>
    </div>
    <a class="finding-loc" data-testid="finding-location" href=${findingHref(task.id, review.snapshot_n, f)} title="Open this file in the changes tab">${f.path}:${f.line}</a>
    ${f.detail ? html`<div class="md finding-detail" data-testid="finding-detail" dangerouslySetInnerHTML=${{ __html: renderMarkdown(f.detail, task.id) }}></div>` : null}
    ${done ? html`<div class="finding-actions">
      ${marked ? html`<span class=${`tag ${marked}`} data-testid="finding-state">${marked === "fixed" ? "fixed: sent to the agent" : "ignored"}</span>` : null}
      ${marked === "fixed" || closed ? null : html`<button type="button" class="small" data-testid="finding-fixed" disabled=${busy}
        title="Send this finding to the task's agent to fix (queued while a turn runs)" onClick=${() => set("fixed")}>Fix it</button>`}
      ${marked || closed ? null : html`<button type="button" class="small" data-testid="finding-ignored" disabled=${busy}
        title="Leave it: the merge dialog stops warning about it" onClick=${() => set("ignored")}>Ignore</button>`}
    </div>` : null}
    ${error ? html`<div class="form-error" role="alert" data-testid="finding-error">${error}</div>` : null}
  </li>`;
}

function ReviewCard({ task, review }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const stop = async () => {
    setBusy(true);
    setError(null);
    try {
      await api.stopReview(review.id);
    } catch (e) {
      setError(e.message);
    } finally {
      setBusy(false);
    }
  };
  const findings = (review.result && review.result.findings) || [];
  const who = review.vendor ? `${VENDOR_WORDS[review.vendor] || review.vendor}${review.model ? ` (${review.model})` : ""}` : "";
  return html`<li class=${`review rv-${review.state}`} data-testid="review" data-review-id=${review.id} data-state=${review.state} data-snapshot=${review.snapshot_n}>
    <div class="review-head">
      <a href=${`/tasks/${encodeURIComponent(task.id)}/changes?snapshot=${review.snapshot_n}&step=1`} title="The snapshot's step in the changes tab">Snapshot ${review.snapshot_n}</a>
      <span class=${`badge rv-${review.state}`} data-testid="review-state">${STATE_WORDS[review.state] || review.state}</span>
      ${who ? html`<span class="hint">${who}</span>` : null}
      <span class="grow"></span>
      <time class="hint" title=${when(review.finished_at || review.created_at)}>${ago(review.finished_at || review.created_at)}</time>
      ${review.state === "running" ? html`<button type="button" class="small danger-quiet" data-testid="review-stop" disabled=${busy} onClick=${stop}>Stop</button>` : null}
    </div>
    ${review.state === "failed" ? html`<div class="review-error" data-testid="review-error">${review.error}</div>` : null}
    ${review.state === "skipped" ? html`<div class="hint" data-testid="review-reason">${review.error || "No files changed: no reviewer ran."}</div>` : null}
    ${review.state === "running" ? html`<div class="hint">The reviewer reads the snapshot; its findings show here when it reports.</div>` : null}
    ${review.state === "done" ? html`
      <div class="md review-summary" data-testid="review-summary" dangerouslySetInnerHTML=${{ __html: renderMarkdown((review.result && review.result.summary) || "", task.id) }}></div>
      ${findings.length ? html`<ol class="findings">${findings.map((f, i) => html`<${Finding} key=${i} task=${task} review=${review} f=${f} index=${i} />`)}</ol>`
        : html`<p class="hint" data-testid="review-clean">No findings.</p>`}` : null}
    ${error ? html`<div class="form-error" role="alert" data-testid="review-action-error">${error}</div>` : null}
  </li>`;
}

/** The reviews tab of `task`. */
export function Reviews({ task, state }) {
  const map = state.reviews.get(task.id);
  if (!map) return html`<div class="pane-body hint pad">Loading the reviews…</div>`;
  const reviews = listed(map);
  const open = openFindings(map).length;
  const waiting = task.state === "review_pending" || [...map.values()].some((r) => r.state === "pending");
  return html`<div class="pane-body reviews" data-testid="reviews">
    ${open ? html`<p class="reviews-open pad" data-testid="reviews-open">${open} open finding${open === 1 ? "" : "s"}: fix or ignore ${open === 1 ? "it" : "each"} before merging.</p>` : null}
    ${reviews.length === 0 && !waiting ? html`<p class="hint pad" data-testid="reviews-empty">No reviews yet. When the server reviews snapshots, each one (taken at the end of every turn) is reviewed by an agent of the other vendor.</p>` : null}
    ${reviews.length ? html`<ol class="review-list">${reviews.map((r) => html`<${ReviewCard} key=${r.id} task=${task} review=${r} />`)}</ol>` : null}
    ${waiting ? html`<p class="hint pad" data-testid="reviews-waiting">The latest snapshot's review waits to start.</p>` : null}
  </div>`;
}

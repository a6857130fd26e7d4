// Reviews in the page's state: the fold of `review.*` events into a task's reviews (the
// contract's Review, read first through listReviews), and what views ask of them. Pure: the
// store owns the maps and calls `foldReview`; see schema/events.md "Reviews".

/**
 * Folds one `review.*` event into `reviews` (review id -> Review) of its task. Returns false
 * when the event names a review this map does not hold (it was asked for before the page's
 * listReviews read, which leaves waiting reviews out): the store then reads the list again.
 * `review.requested` makes a `pending` review, byre's own state that listReviews never lists
 * and the views leave out. Sets fields, never counts: folding an event twice changes nothing.
 */
export function foldReview(reviews, ev) {
  const p = ev.payload || {};
  if (ev.kind === "review.requested") {
    if (!reviews.has(p.id)) {
      reviews.set(p.id, {
        id: p.id, task_id: ev.task_id, snapshot_n: p.snapshot_n, agent_session_id: "", vendor: "",
        model: "", state: "pending", error: "", created_at: ev.created_at, finding_states: {},
      });
    }
    return true;
  }
  const r = reviews.get(p.review_id);
  if (!r) return false;
  const n = { ...r };
  switch (ev.kind) {
    case "review.skipped":
      n.state = "skipped";
      n.error = p.reason || "";
      n.finished_at = ev.created_at;
      break;
    case "review.started":
      // A review already ended (a REST read newer than this event) stays ended.
      if (r.state === "pending") n.state = "running";
      n.vendor = p.vendor || "";
      n.model = p.model || "";
      n.agent_session_id = ev.agent_session_id || "";
      break;
    case "review.done":
      n.state = "done";
      n.result = p.result;
      n.finished_at = ev.created_at;
      break;
    case "review.failed":
      n.state = "failed";
      n.error = p.error || "";
      n.finished_at = ev.created_at;
      break;
    case "review.finding_state_set":
      n.finding_states = { ...r.finding_states, [String(p.index)]: p.state };
      break;
    default:
      return true;
  }
  reviews.set(r.id, n);
  return true;
}

/** Whether `kind` is one the review fold takes. */
export const isReviewKind = (kind) => kind.startsWith("review.");

/** The reviews of a map the contract lists (not `pending`), oldest first. */
export function listed(reviews) {
  if (!reviews) return [];
  return [...reviews.values()].filter((r) => r.state !== "pending").sort((a, b) => a.snapshot_n - b.snapshot_n);
}

/** Open findings: those of done reviews not marked fixed or ignored, as [review, index]. */
export function openFindings(reviews) {
  const out = [];
  for (const r of listed(reviews)) {
    if (r.state !== "done" || !r.result) continue;
    (r.result.findings || []).forEach((_, i) => {
      if (!r.finding_states[String(i)]) out.push([r, i]);
    });
  }
  return out;
}

/** The review of the newest snapshot the page knows of (a waiting one included), or null. */
export function latestReview(reviews) {
  let latest = null;
  if (reviews) for (const r of reviews.values()) if (!latest || r.snapshot_n > latest.snapshot_n) latest = r;
  return latest;
}

/** The agent session ids of reviewers (their events and live text are not the task's agent's). */
export function reviewerSessions(reviews, sessions) {
  const ids = new Set();
  if (reviews) for (const r of reviews.values()) if (r.agent_session_id) ids.add(r.agent_session_id);
  if (sessions) for (const s of sessions.values()) if (s.role === "reviewer") ids.add(s.id);
  return ids;
}

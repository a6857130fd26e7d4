// Transcript items: which events are drawn and how. `buildItems` turns a task's events
// (oldest first) into items; a tool.result joins its tool.call. `Item` draws one.

import { html, memo } from "../html.js";
import { renderMarkdown } from "../markdown.js";
import { api } from "../api.js";
import { state as store } from "../store.js";
import { ago, when, short, tokens, duration, pretty } from "../util.js";
import { ToolDiff, useEdits, toolLabel, counts } from "./tooldiff.js";

/** Bytes as whole MiB. */
const mib = (n) => `${Math.round((n || 0) / 1048576)} MiB`;

const HIDDEN = new Set([
  "session.state", "task.state", "user.unqueued", "inbox.delivered", "vendor.unrecognized",
  "focus.updated", "summary.read", "pane_focus.updated", "user.notification_prefs_updated",
  "user.default_model_updated", "session.vendor_session_started", "task.merge_landed",
  "snapshot.requested", "review.requested", "terminal.closed",
]);

const MERGE_KINDS = new Set([
  "task.merge_requested", "task.merge_started", "task.merge_failed", "task.merged",
  "task.discard_requested", "task.discard_turn_started", "task.discarded", "task.cleanup_failed",
  "task.merge_into_parent_requested",
]);

/** Review events and what follows from them, drawn as one line each (`ReviewItem`). */
const REVIEW_KINDS = new Set([
  "review.started", "review.skipped", "review.done", "review.failed", "review.finding_state_set",
  "task.merge_after_review_set", "task.merge_after_review_dropped",
]);

/**
 * Items for the events; `tool.result`s fold into their calls. A queued message is drawn
 * where it was sent until it is handed over (then its `user.message` stands for it) or
 * withdrawn (then it is marked so); a message handing inbox answers over (`inbox.delivered`)
 * is not drawn, the answers' own lines stand for it. A reviewer's own events (its instructions, text, tools,
 * turns) are left out: the review's events stand for them, and the reviews tab shows its report.
 */
export function buildItems(events) {
  const items = [];
  const calls = new Map();
  const handed = new Set();
  const withdrawn = new Set();
  const reviewers = new Set();
  const snapshotOf = new Map(); // review id -> snapshot n
  const answers = new Set(); // input ids of the messages handing inbox answers over
  for (const ev of events) {
    if (ev.kind === "inbox.delivered" && ev.payload.input_id) answers.add(ev.payload.input_id);
    if (ev.kind === "user.message") handed.add(ev.payload.input_id);
    else if (ev.kind === "user.unqueued") withdrawn.add(ev.payload.input_id);
    else if (ev.kind === "session.created" && ev.payload.role === "reviewer") reviewers.add(ev.payload.id);
    else if (ev.kind === "review.started" && ev.agent_session_id) reviewers.add(ev.agent_session_id);
    else if (ev.kind === "review.requested") snapshotOf.set(ev.payload.id, ev.payload.snapshot_n);
  }
  for (const ev of events) {
    if (REVIEW_KINDS.has(ev.kind)) {
      items.push({ key: String(ev.seq), type: "review", ev, n: snapshotOf.get(ev.payload.review_id) });
      continue;
    }
    if (ev.agent_session_id && reviewers.has(ev.agent_session_id)) continue;
    if (ev.kind === "session.created" && ev.payload.role === "reviewer") continue;
    // The answer's own line (`inbox.responded`) stands for the message that hands it over.
    if ((ev.kind === "user.message" || ev.kind === "user.queued") && answers.has(ev.payload.input_id)) continue;
    if (ev.kind === "user.queued") {
      const id = ev.payload.input_id;
      if (handed.has(id)) continue;
      items.push({ key: String(ev.seq), type: withdrawn.has(id) ? "user.withdrawn" : "user.queued", ev });
      continue;
    }
    if (HIDDEN.has(ev.kind)) continue;
    // A stopped turn that had streamed nothing since its last text says nothing new.
    if (ev.kind === "agent.streamed" && !(ev.payload && ev.payload.text)) continue;
    // A viewer attaching to a running shell (a reload, a reconnect) is not news.
    if (ev.kind === "terminal.opened" && !ev.payload.started) continue;
    const p = ev.payload || {};
    if (ev.kind === "tool.result") {
      const call = calls.get(p.tool_use_id);
      if (call) {
        call.result = ev;
        continue;
      }
      items.push({ key: String(ev.seq), type: "tool-result-orphan", ev });
      continue;
    }
    if (ev.kind === "tool.call") {
      const item = { key: String(ev.seq), type: "tool-call", ev, result: null };
      calls.set(p.tool_use_id, item);
      items.push(item);
      continue;
    }
    if (ev.kind === "inbox.item_created") {
      const type = p.kind === "question" ? "question" : p.kind === "rate_limited" ? "rate-limit" : "session-error";
      items.push({ key: String(ev.seq), type, ev });
      continue;
    }
    items.push({ key: String(ev.seq), type: ev.kind, ev });
  }
  return items;
}

const Time = ({ ev }) => html`<time class="t" datetime=${ev.created_at} title=${when(ev.created_at)}>${ago(ev.created_at)}</time>`;

function Images({ ids }) {
  if (!ids || !ids.length) return null;
  return html`<div class="imgs">${ids.map((id) => html`<a href=${api.blobUrl(id)} target="_blank" rel="noopener"><img src=${api.blobUrl(id)} alt="attached image" loading="lazy" /></a>`)}</div>`;
}

/**
 * "show all" for a field byre cut to its event limit (`payload.cut`): a link to the blob
 * holding the whole text, served as text/plain (never run, never rendered as HTML).
 */
function ShowAll({ cut }) {
  if (!cut || !cut.blob_id) return null;
  return html`<div class="cut-note" data-testid="show-all">cut to the event limit ·
    <a href=${api.blobUrl(cut.blob_id)} target="_blank" rel="noopener noreferrer">show all (${(cut.size_bytes / 1048576).toFixed(1)} MiB)</a></div>`;
}

/** Tools whose result may name a screenshot: CodeBolt's browser and crawler. */
const SHOOTS = /^(browserEvent|crawlerEvent)\//;

/** The blobs a tool result names as `blob:<id>` (a CodeBolt browser screenshot). */
export function blobsIn(output) {
  const ids = [];
  for (const m of String(output || "").matchAll(/\bblob:([A-Za-z0-9_-]{8,})/g)) if (!ids.includes(m[1])) ids.push(m[1]);
  return ids;
}

function ToolCall({ item, taskId }) {
  const p = item.ev.payload || {};
  const r = item.result && item.result.payload;
  const input = p.input || {};
  const worktree = worktreeOf(taskId);
  const summary = toolSummary(p.name, input, worktree);
  const edits = useEdits(p.name, p.input, worktree);
  const state = !item.result ? "pending" : r.is_error ? "error" : "ok";
  return html`<div class=${`item tool ${state}`} data-testid="item-tool-call" data-seq=${item.ev.seq}
      data-tool-use-id=${p.tool_use_id} data-result-seq=${item.result ? item.result.seq : undefined}>
    <details>
      <summary><span class="tool-name" data-testid="tool-name" title=${p.name}>${toolLabel(p.name)}</span> <span class="tool-sum">${summary}</span>
        ${edits ? html` <span class="tool-counts">${counts(edits)}</span>` : null}
        <span class=${`tool-state ${state}`}>${state === "pending" ? "running…" : state === "error" ? "error" : ""}</span></summary>
      <div class="tool-body">
        ${edits ? null : html`<div class="label">input</div>
        <pre data-testid="tool-input">${pretty(input)}</pre>`}
        <${ShowAll} cut=${p.cut} />
        ${item.result ? html`<div class="label">result${r.is_error ? " (error)" : ""}</div>
          <pre data-testid="tool-result" class=${r.is_error ? "err" : ""}>${r.output}</pre>
          <${ShowAll} cut=${r.cut} />` : null}
      </div>
    </details>
    ${edits ? html`<${ToolDiff} files=${edits} />` : null}
    ${item.result && !r.is_error && SHOOTS.test(p.name || "") ? html`<${Images} ids=${blobsIn(r.output)} />` : null}
  </div>`;
}

function worktreeOf(taskId) {
  const t = store.tasks.get(taskId);
  return t ? `${t.worktree_path}/` : null;
}

function toolSummary(name, input, worktree) {
  if (!input || typeof input !== "object") return "";
  let v = input.command || input.file_path || input.path || input.pattern || input.url || input.question || input.description;
  if (typeof v === "string" && worktree) v = v.split(worktree).join("");
  if (typeof v === "string") return v.length > 120 ? `${v.slice(0, 120)}…` : v;
  if (Array.isArray(v)) return v.join(" ").slice(0, 120);
  if (Array.isArray(input.changes)) return input.changes.map((c) => c.path).join(", ").slice(0, 120);
  return "";
}

function Usage({ p }) {
  const u = p.usage || {};
  const parts = [];
  if (u.input_tokens != null) parts.push(`${tokens(u.input_tokens)} in`);
  if (u.cache_read_input_tokens) parts.push(`${tokens(u.cache_read_input_tokens)} cached`);
  if (u.output_tokens != null) parts.push(`${tokens(u.output_tokens)} out`);
  if (p.cost_micro_usd) parts.push(`$${(p.cost_micro_usd / 1e6).toFixed(4)}`);
  if (p.duration_ms != null) parts.push(duration(p.duration_ms));
  if (p.num_turns) parts.push(`${p.num_turns} call${p.num_turns === 1 ? "" : "s"}`);
  return html`<span class="usage">${parts.join(" · ")}</span>`;
}

/** One transcript item. */
export function Item({ item, taskId }) {
  const ev = item.ev;
  const p = ev.payload || {};
  switch (item.type) {
    case "user.message":
    case "user.queued":
    case "user.withdrawn": {
      const queued = item.type !== "user.message";
      const tag = item.type === "user.queued" ? "queued" : item.type === "user.withdrawn" ? "withdrawn" : "";
      return html`<div class=${`item user ${queued ? "queued" : ""} ${item.type === "user.withdrawn" ? "withdrawn" : ""}`} data-testid=${queued ? "item-queued" : "item-user-message"} data-seq=${ev.seq} data-actor=${ev.actor}>
        <div class="meta"><span class="sender" data-testid="item-sender">${ev.actor}</span>${tag ? html` <span class="tag">${tag}</span>` : null} <${Time} ev=${ev} />${p.model ? html` <span class="tag">→ ${p.model}</span>` : null}</div>
        <div class="text">${p.text}</div>
        <${Images} ids=${p.images} />
      </div>`;
    }
    case "agent.text":
      return html`<div class="item agent" data-testid="item-agent-text" data-seq=${ev.seq}>
        <div class="md" dangerouslySetInnerHTML=${{ __html: renderMarkdown(p.text, taskId) }}></div>
        <${ShowAll} cut=${p.cut} />
      </div>`;
    case "agent.streamed":
      return html`<div class="item agent" data-testid="item-agent-streamed" data-seq=${ev.seq}>
        <div class="live-text">${p.dropped_bytes ? "… " : ""}${p.text}</div>
        <div class="cut-note">streamed until byre stopped the turn</div>
      </div>`;
    case "tool-call":
      return html`<${ToolCall} item=${item} taskId=${taskId} />`;
    case "review":
      return html`<${ReviewItem} ev=${ev} n=${item.n} />`;
    case "tool-result-orphan":
      return html`<div class="item note" data-testid="item-note" data-seq=${ev.seq}>result of an earlier tool call${p.is_error ? " (error)" : ""}: <code>${(p.output || "").slice(0, 200)}</code></div>`;
    case "turn.started":
      return html`<div class="item turn start" data-testid="item-turn-start" data-seq=${ev.seq}><span>turn ${p.turn}</span> <${Time} ev=${ev} /></div>`;
    case "turn.ended":
      return html`<div class=${`item turn end ${p.outcome}`} data-testid="item-turn-end" data-seq=${ev.seq} data-outcome=${p.outcome}>
        <span class=${`outcome ${p.outcome}`}>turn ${p.turn} ${p.outcome}</span> <${Usage} p=${p} />
        ${p.error ? html`<div class="err">${p.error}</div>` : null}
      </div>`;
    case "snapshot.taken":
      return html`<div class="item snap" data-testid="item-snapshot" data-seq=${ev.seq}>
        snapshot ${p.n} saved: the worktree as it stood ${p.trigger === "turn_end" ? "at the end of the turn" : "when asked"}, <code>${short(p.commit)}</code>${p.branch_advanced ? ", committed to the task's branch" : ""} ·${" "}
        <a href=${`/tasks/${ev.task_id}/changes?snapshot=${p.n}&step=1`} data-nav="1">what this turn changed</a>
      </div>`;
    case "snapshot.failed":
      return html`<div class="item snap failed" data-testid="item-snapshot-failed" data-seq=${ev.seq}>no snapshot: ${p.reason}</div>`;
    case "session-error":
      return html`<div class="item error" data-testid="item-session-error" data-seq=${ev.seq}><strong>Session error</strong><pre>${(p.payload && p.payload.error) || ""}</pre></div>`;
    case "rate-limit":
      return html`<div class="item error rate" data-testid="item-rate-limit" data-seq=${ev.seq}><strong>Rate limited</strong> (${(p.payload && p.payload.vendor) || ""})<pre>${(p.payload && p.payload.error) || ""}</pre></div>`;
    case "question":
      return html`<div class="item question" data-testid="item-question" data-seq=${ev.seq}>
        <strong>Question:</strong> ${(p.payload && p.payload.question) || ""}${" "}
        <a href=${`/tasks/${ev.task_id}/inbox`} data-nav="1">answer in the inbox</a>
      </div>`;
    case "inbox.responded": {
      const r = p.response || {};
      const what = r.type === "dismiss" ? "dismissed the question" : r.type === "option" ? `answered ${(r.options || []).join(", ")}${r.text ? ` — ${r.text}` : ""}` : `answered: ${r.text}`;
      return html`<div class="item answer" data-testid="item-answer" data-seq=${ev.seq}><span class="sender">${ev.actor}</span> ${what}</div>`;
    }
    case "inbox.superseded":
      return html`<div class="item note" data-testid="item-note" data-seq=${ev.seq}>a question was superseded by a newer one</div>`;
    case "inbox.closed":
      return html`<div class="item note" data-testid="item-note" data-seq=${ev.seq}>an open inbox item closed with its task</div>`;
    case "agent.api_retry":
      return html`<div class="item note warn" data-testid="item-api-retry" data-seq=${ev.seq}>API retry ${p.attempt}/${p.max_retries}${p.error_status ? ` after HTTP ${p.error_status}` : ""} (${p.error})</div>`;
    case "session.created":
      return html`<div class="item note" data-testid="item-note" data-seq=${ev.seq}>${ev.actor} started a ${p.vendor} session on <code>${p.model || "default"}</code></div>`;
    case "session.completed":
      return html`<div class="item note" data-testid="item-note" data-seq=${ev.seq}>session ended (${p.reason === "compacted" ? "compacted: continued in a new session" : "task closed"})</div>`;
    case "session.compact_requested":
      return html`<div class="item note" data-testid="item-note" data-seq=${ev.seq}>${ev.actor} asked for a compaction${p.model ? ` onto ${p.model}` : ""}</div>`;
    case "session.interrupt_requested":
      return html`<div class="item note warn" data-testid="item-note" data-seq=${ev.seq}>${ev.actor} interrupted turn ${p.turn}</div>`;
    case "session.process_deferred":
      return html`<div class="item note warn" data-testid="item-note" data-seq=${ev.seq}>waiting for memory: ${mib(p.available_bytes)} available, the floor is ${mib(p.floor_bytes)}${p.n_ahead ? ` (${p.n_ahead} ahead)` : ""}; the agent starts when memory frees</div>`;
    case "session.process_exited":
      if (p.idle_ms) {
        return html`<div class="item note" data-testid="item-note" data-seq=${ev.seq}>agent paused while idle; the next message resumes it</div>`;
      }
      return html`<div class="item note warn" data-testid="item-note" data-seq=${ev.seq}>agent process ${p.pid} exited${p.code != null ? ` with ${p.code}` : p.signal != null ? ` by signal ${p.signal}` : ""}${p.reason ? `: ${p.reason}` : ""}</div>`;
    case "task.created":
      return html`<div class="item note" data-testid="item-note" data-seq=${ev.seq}>${ev.actor} created the task on <code>${p.branch}</code> from <code>${short(p.base_ref)}</code></div>`;
    case "task.worktree_created":
      return html`<div class="item note" data-testid="item-note" data-seq=${ev.seq}>worktree ready at <code>${short(p.head)}</code></div>`;
    case "task.worktree_failed":
      return html`<div class="item error" data-testid="item-note" data-seq=${ev.seq}>worktree failed: ${p.reason}</div>`;
    case "task.merge_title_set":
      return html`<div class="item note" data-testid="item-note" data-seq=${ev.seq}>merge title: <strong>${p.merge_title}</strong></div>`;
    case "preview.exposed":
      return html`<div class="item note" data-testid="item-note" data-seq=${ev.seq}>preview <strong>${p.name}</strong> on port ${p.port}</div>`;
    case "subagent.started":
    case "subagent.ended":
      return html`<div class="item note" data-testid="item-subagent" data-seq=${ev.seq}>subagent ${ev.kind === "subagent.started" ? "started" : `ended (${p.status})`}: ${p.description || p.summary || p.id} · ${p.subagents} running</div>`;
    case "task.subtask_started":
      return html`<div class="item note" data-testid="item-note" data-seq=${ev.seq}>started by <a href=${`/tasks/${p.parent_task_id}`} data-nav="1">its parent task</a> ${p.agent ? ` (agent ${p.agent})` : ""}</div>`;
    case "workflow.stage_started":
      return html`<div class="item note" data-testid="item-workflow" data-kind=${ev.kind} data-seq=${ev.seq}>stage <strong>${p.stage}</strong> of a workflow run${p.forked_from ? " (a new attempt)" : ""}${p.inputs && p.inputs.length ? `, from ${p.inputs.map((i) => i.stage).join(", ")}` : ""} · <a href=${`/tasks/${ev.task_id}/workflow`} data-nav="1">see the run</a></div>`;
    case "workflow.stage_reported":
      return html`<div class="item note" data-testid="item-workflow" data-kind=${ev.kind} data-seq=${ev.seq}>the agent finished the stage; it counts once this turn's snapshot is taken</div>`;
    case "workflow.stage_blocked":
      return html`<div class="item note warn" data-testid="item-workflow" data-kind=${ev.kind} data-seq=${ev.seq}>stage blocked: ${p.reason} · <a href=${`/tasks/${ev.task_id}/inbox`} data-nav="1">answer in the inbox</a></div>`;
    case "workflow.stage_finished":
      return html`<div class="item note" data-testid="item-workflow" data-kind=${ev.kind} data-seq=${ev.seq}>stage finished at <code>${short(p.commit)}</code> · <a href=${`/tasks/${ev.task_id}/workflow`} data-nav="1">see the run</a></div>`;
    case "workflow.run_finished":
      return html`<div class="item note" data-testid="item-workflow" data-kind=${ev.kind} data-seq=${ev.seq}>the run finished: this task is its final stage's, yours to merge</div>`;
    case "lead_note.saved":
      return html`<div class="item note" data-testid="item-note" data-seq=${ev.seq}>noted: ${p.text}</div>`;
    case "lead_note.deleted":
      return html`<div class="item note" data-testid="item-note" data-seq=${ev.seq}>${ev.agent_session_id ? "forgot" : `${ev.actor} deleted`} a note</div>`;
    case "terminal.opened":
      return html`<div class="item note" data-testid="item-terminal" data-seq=${ev.seq}>${ev.actor} opened the terminal: <code>${p.shell}</code> (pid ${p.shell_pid})</div>`;
    case "terminal.exited": {
      const why = { exited: "exited", task_closed: "was killed as the task closed", server_stopping: "was killed as byre stopped", server_restarted: "was killed after byre restarted" }[p.cause] || p.cause;
      return html`<div class="item note" data-testid="item-terminal" data-seq=${ev.seq}>the terminal's shell ${why}${p.status != null ? ` (status ${p.status})` : ""}</div>`;
    }
    default:
      if (MERGE_KINDS.has(ev.kind)) return html`<${MergeItem} ev=${ev} />`;
      return html`<div class="item note" data-testid="item-note" data-seq=${ev.seq}><code>${ev.kind}</code></div>`;
  }
}

const VENDOR = { claude: "Claude Code", codex: "Codex" };

function ReviewItem({ ev, n }) {
  const p = ev.payload || {};
  const of = n ? ` of snapshot ${n}` : "";
  const findings = (p.result && p.result.findings) || [];
  const text = {
    "review.started": `${VENDOR[p.vendor] || p.vendor} (${p.model}) reviews snapshot${n ? ` ${n}` : ""}`,
    "review.skipped": `review${of} skipped: ${p.reason}`,
    "review.done": `review${of} done: ${findings.length ? `${findings.length} finding${findings.length === 1 ? "" : "s"}` : "no findings"}`,
    "review.failed": `review${of} failed: ${p.error}`,
    "review.finding_state_set": `${ev.actor} marked finding ${p.index + 1}${of} ${p.state}`,
    "task.merge_after_review_set": `${ev.actor} asked to merge “${p.merge_title}” after the review`,
    "task.merge_after_review_dropped": p.reason,
  }[ev.kind];
  const warn = ev.kind === "review.failed" || ev.kind === "task.merge_after_review_dropped" || (ev.kind === "review.done" && findings.length);
  return html`<div class=${`item note rvnote ${warn ? "warn" : ""}`} data-testid="item-review" data-kind=${ev.kind} data-seq=${ev.seq}>
    ${text}${ev.kind === "review.done" || ev.kind === "review.failed" ? html` · <a href=${`/tasks/${ev.task_id}/reviews`} data-nav="1">see the reviews</a>` : null}
  </div>`;
}

function MergeItem({ ev }) {
  const p = ev.payload || {};
  const text = {
    "task.merge_requested": p.queued ? `${ev.actor} asked to merge “${p.merge_title}”: held behind another merge` : `${ev.actor} started the merge “${p.merge_title}”`,
    "task.merge_started": "the held merge started",
    "task.merge_failed": `merge failed: ${p.reason}`,
    "task.merged": p.merge_commit ? `merged as ${short(p.merge_commit)}` : "merged (nothing to merge)",
    "task.discard_requested": p.retry ? `${ev.actor} retried the clean-up` : p.summary === false ? `${ev.actor} discarded the task without a summary` : `${ev.actor} discarded the task: the agent writes its summary`,
    "task.discard_turn_started": "the discard's summary turn started",
    "task.discarded": "discarded",
    "task.cleanup_failed": `clean-up failed: ${p.reason}`,
    "task.merge_into_parent_requested": `${ev.actor} asked the parent task's agent to merge ${p.branch}`,
  }[ev.kind];
  const bad = ev.kind === "task.merge_failed" || ev.kind === "task.cleanup_failed";
  return html`<div class=${`item merge ${bad ? "error" : ""}`} data-testid="item-merge" data-kind=${ev.kind} data-seq=${ev.seq}>${text}</div>`;
}

/** `Item` re-rendered only when its event, its result or its kind changes. */
export const ItemView = memo(function ItemView({ type, ev, result, n, taskId }) {
  return Item({ item: { type, ev, result, n }, taskId });
});

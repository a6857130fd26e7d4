// Finishing a task: merge (title prefilled from merge_title, co-authors, unmerged stats, the
// held state, open review findings, merge after the running review; a subtask into its
// parent or onto the default branch), merge-in, discard; the server's refusals shown as it
// words them.

import { html, useState, useEffect, useRef } from "../html.js";
import { api, request } from "../api.js";
import { state as store } from "../store.js";
import { when } from "../util.js";
import { openFindings, latestReview } from "../reviews.js";

/**
 * Makes the element in `ref` behave as a modal dialog: focus moves into it on open (to its
 * `[autofocus]` element, else its first control) and back to the opener on close; Tab stays
 * inside it; Esc closes it from anywhere; and no other key reaches the page's shortcuts
 * (digits switching tabs, g-p leaving) while it is open.
 */
function useModal(ref, onClose) {
  useEffect(() => {
    const opener = document.activeElement;
    const controls = () => [...ref.current.querySelectorAll("input, button, select, textarea, a[href]")].filter((c) => !c.disabled);
    const first = ref.current.querySelector("[autofocus]") || controls()[0];
    if (first) first.focus();
    const onKey = (e) => {
      if (e.key === "Escape") {
        e.preventDefault();
        e.stopPropagation();
        onClose();
      } else if (e.key === "Tab") {
        const list = controls();
        if (!list.length) return;
        const i = list.indexOf(document.activeElement);
        const next = e.shiftKey ? (i <= 0 ? list.length - 1 : i - 1) : (i < 0 || i === list.length - 1 ? 0 : i + 1);
        e.preventDefault();
        list[next].focus();
      } else if (!ref.current.contains(e.target)) {
        e.stopPropagation();
      }
    };
    // Keys inside the dialog reach their element, then stop before the page's shortcuts.
    const inside = (e) => e.stopPropagation();
    const el = ref.current;
    document.addEventListener("keydown", onKey, true);
    el.addEventListener("keydown", inside);
    return () => {
      document.removeEventListener("keydown", onKey, true);
      el.removeEventListener("keydown", inside);
      if (opener && opener.isConnected && opener.focus) opener.focus();
    };
  }, []);
}

/**
 * What the reviews say about merging now: the open findings (warned about), whether the latest
 * snapshot's review runs (then "merge after review" is offered, unless one already waits).
 */
function ReviewNotes({ task, reviews }) {
  const [error, setError] = useState(null);
  const open = openFindings(reviews);
  const latest = latestReview(reviews);
  const running = latest && latest.state === "running";
  const cancel = async () => {
    setError(null);
    try {
      await api.cancelMergeAfterReview(task.id);
    } catch (e) {
      setError(e.message);
    }
  };
  return html`
    ${open.length ? html`<div class="warn-box" role="note" data-testid="merge-open-findings">
      ${open.length} review finding${open.length === 1 ? " is" : "s are"} still open (neither fixed nor ignored):
      <ul>${open.slice(0, 5).map(([r, i]) => html`<li><span class=${`sev sev-${r.result.findings[i].severity}`}>${r.result.findings[i].severity}</span> ${r.result.findings[i].title}</li>`)}</ul>
      ${open.length > 5 ? html`<span class="hint">and ${open.length - 5} more; </span>` : null}<a href=${`/tasks/${encodeURIComponent(task.id)}/reviews`}>see the reviews</a>
    </div>` : null}
    ${task.merge_after_review ? html`<div class="held" data-testid="merge-after-review-waiting">A merge waits for the running review: it is made if the review finds nothing.
      <button type="button" class="small" data-testid="merge-after-review-cancel" onClick=${cancel}>Withdraw it</button></div>`
      : running ? html`<p class="hint">Snapshot ${latest.snapshot_n} is being reviewed. “Merge after review” merges once that review ends with no findings (and drops the merge otherwise).</p>` : null}
    ${error ? html`<div class="form-error" role="alert" data-testid="merge-after-review-error">${error}</div>` : null}`;
}

function MergeDialog({ task, me, reviews, onClose }) {
  const [title, setTitle] = useState(task.merge_title || task.title);
  const [coauthors, setCoauthors] = useState(null);
  const [unmerged, setUnmerged] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [gitName, setGitName] = useState(me.git_name || "");
  const [gitEmail, setGitEmail] = useState(me.git_email || "");
  // A subtask merges into its parent by default.
  const [target, setTarget] = useState(task.parent_task_id ? "parent" : "main");
  const intoParent = target === "parent";
  const form = useRef(null);
  useModal(form, onClose);
  useEffect(() => {
    api.getCoAuthors(task.id).then(setCoauthors).catch((e) => setError(e.message));
    api.getUnmerged(task.id).then(setUnmerged).catch((e) => setError(e.message));
  }, [task.id]);
  const needsIdentity = !intoParent && (!me.git_name || !me.git_email);
  const latest = latestReview(reviews);
  const canAfterReview = !intoParent && latest && latest.state === "running" && !task.merge_after_review;
  const submit = async (e, afterReview = false) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      if (needsIdentity && gitName.trim() && gitEmail.trim()) {
        const u = await request("PUT", "/api/me", { git_name: gitName.trim(), git_email: gitEmail.trim() }, { quiet: true });
        store.me = { ...store.me, ...u };
      }
      await api.mergeTask(task.id, intoParent ? { target: "parent" } : afterReview ? { merge_title: title, after_review: true } : { merge_title: title });
      onClose();
    } catch (err) {
      setError(err.message);
      setBusy(false);
      // The disabled submit button dropped the focus: give it back to the title.
      const back = form.current && form.current.querySelector("[data-testid=merge-title], [data-testid=merge-confirm]");
      if (back) back.focus();
    }
  };
  return html`<div class="overlay">
    <form ref=${form} class="dialog" role="dialog" aria-modal="true" aria-labelledby="merge-h" data-testid="merge-dialog" onSubmit=${submit}>
      <h2 id="merge-h">Merge “${task.title}”</h2>
      ${task.parent_task_id ? html`<fieldset class="target" data-testid="merge-target"><legend>Merge into</legend>
        <label><input type="radio" name="merge-target" value="parent" data-testid="merge-target-parent" checked=${intoParent} onChange=${() => setTarget("parent")} /> its parent task</label>
        <label><input type="radio" name="merge-target" value="main" data-testid="merge-target-main" checked=${!intoParent} onChange=${() => setTarget("main")} /> the default branch</label>
      </fieldset>` : null}
      ${intoParent
        ? html`<p class="hint">The parent task's agent is asked to merge this subtask's branch (after its running turn, if any); the subtask closes as merged once the parent's branch holds it.</p>`
        : html`<p class="hint">The agent first merges the default branch in and commits; then byre squashes the task into one commit on the default branch, pushes it to origin (if any), and removes the worktree.</p>`}
      ${task.merge_queued_at ? html`<p class="held" data-testid="merge-queued">A merge is held since ${when(task.merge_queued_at)}: it starts when the project's other merge ends.</p>` : null}
      <div class="unmerged" data-testid="merge-unmerged">${unmerged
        ? html`${unmerged.commits} commit${unmerged.commits === 1 ? "" : "s"}, ${unmerged.files} file${unmerged.files === 1 ? "" : "s"} <span class="add">+${unmerged.insertions}</span> <span class="del">−${unmerged.deletions}</span>${unmerged.uncommitted ? `, ${unmerged.uncommitted} uncommitted` : ""}`
        : "…"}</div>
      ${intoParent ? null : html`<label>Commit title <span class="hint">(one line, at most 72 characters)</span>
        <input data-testid="merge-title" value=${title} maxlength="72" onInput=${(e) => setTitle(e.target.value)} autofocus required />
      </label>`}
      ${intoParent ? null : html`<div class="coauthors" data-testid="merge-coauthors">Co-authors: ${coauthors == null ? "…" : coauthors.length === 0 ? html`<span class="hint">none</span>`
        : coauthors.map((c, i) => html`${i ? ", " : ""}<span title=${c.git_email}>${c.git_name || c.login}${c.git_name ? "" : " (no git identity: no trailer)"}</span>`)}</div>`}
      ${needsIdentity ? html`<fieldset class="identity"><legend>Your git identity (the commit's author)</legend>
        <input placeholder="Name" data-testid="merge-git-name" value=${gitName} onInput=${(e) => setGitName(e.target.value)} />
        <input placeholder="email@example.com" data-testid="merge-git-email" value=${gitEmail} onInput=${(e) => setGitEmail(e.target.value)} />
      </fieldset>` : null}
      <${ReviewNotes} task=${task} reviews=${reviews} />
      ${error ? html`<div class="form-error" role="alert" data-testid="merge-error">${error}</div>` : null}
      <div class="actions">
        <button type="button" data-testid="merge-cancel" onClick=${onClose}>Cancel</button>
        ${canAfterReview ? html`<button type="button" data-testid="merge-after-review" disabled=${busy || !title.trim()} onClick=${(e) => submit(e, true)}>Merge after review</button>` : null}
        <button type="submit" class="primary" data-testid="merge-confirm" disabled=${busy || (!intoParent && !title.trim())}>${busy ? "Merging…" : intoParent ? "Merge into parent" : "Merge"}</button>
      </div>
    </form>
  </div>`;
}

function DiscardDialog({ task, onClose, onError }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const box = useRef(null);
  useModal(box, onClose);
  const go = async (summary) => {
    setBusy(true);
    try {
      await api.discardTask(task.id, summary);
      onClose();
    } catch (e) {
      setError(e.message);
      setBusy(false);
      if (box.current) box.current.querySelector("button").focus();
    }
  };
  return html`<div class="overlay">
    <div ref=${box} class="dialog" role="dialog" aria-modal="true" data-testid="discard-dialog">
      <h2>Discard “${task.title}”?</h2>
      <p data-testid="discard-cost">This costs one more agent turn: the agent first writes the task's summary (billed as any turn). Then byre removes the worktree and branch without merging (the last state stays at a snapshot ref). The transcript stays.</p>
      <p class="muted">Without a summary no agent turn runs: byre waits only for a running turn to end.</p>
      ${error ? html`<div class="form-error" role="alert" data-testid="finish-error">${error}</div>` : null}
      <div class="actions"><button type="button" onClick=${onClose} autofocus>Keep it</button>
        <button type="button" class="danger-quiet" data-testid="discard-no-summary" disabled=${busy} onClick=${() => go(false)}>Discard without a summary</button>
        <button type="button" class="danger" data-testid="discard-confirm" disabled=${busy} onClick=${() => go(true)}>Summarise and discard</button></div>
    </div>
  </div>`;
}

/** The finishing actions under a task's title. */
export function FinishBar({ task, state }) {
  const [dialog, setDialog] = useState(null);
  const [error, setError] = useState(null);
  if (task.status !== "active") return null;
  const mergeIn = async () => {
    setError(null);
    try {
      await api.mergeIn(task.id);
    } catch (e) {
      setError(e.message);
    }
  };
  const busy = task.merging || task.discarding || task.merging_into_parent;
  const project = state.projects.get(task.project_id);
  const base = project ? project.default_branch : "the default branch";
  return html`<div class="finish">
    ${task.merging ? html`<span class="tag busy">merging…</span>` : null}
    ${task.discarding ? html`<span class="tag busy">discarding…</span>` : null}
    ${task.merge_queued_at ? html`<span class="tag" data-testid="merge-queued">merge held since ${when(task.merge_queued_at)}</span>` : null}
    ${task.merge_after_review ? html`<span class="tag" data-testid="merge-after-review-tag">merge after review</span>` : null}
    <button type="button" class="primary" data-testid="merge-button" disabled=${busy} onClick=${() => setDialog("merge")}>Merge…</button>
    <button type="button" data-testid="merge-in-button" disabled=${task.merging || task.discarding} title=${`Ask the agent to merge ${base} into this task's branch ${task.branch} (nothing goes to ${base}); costs an agent turn`} onClick=${mergeIn}>Update from ${base}</button>
    <button type="button" class="danger-quiet" data-testid="discard-button" disabled=${task.merging || task.discarding} onClick=${() => setDialog("discard")}>Discard…</button>
    ${error ? html`<div class="form-error" role="alert" data-testid="finish-error">${error}</div>` : null}
    ${dialog === "merge" ? html`<${MergeDialog} task=${task} me=${state.me} reviews=${state.reviews.get(task.id)} onClose=${() => setDialog(null)} />` : null}
    ${dialog === "discard" ? html`<${DiscardDialog} task=${task} onClose=${() => setDialog(null)} />` : null}
  </div>`;
}

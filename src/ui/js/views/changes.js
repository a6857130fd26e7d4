// The changes tab: getTaskChanges as a tree, and the unified diff (getTaskDiff) of the file
// chosen; against the merge-base, since a message's head, a snapshot, or a snapshot's step.
// `?path=` opens that file's diff and `?line=` marks that line of it (a review finding's link).

import { html, useState, useEffect, useMemo, useRef } from "../html.js";
import { api } from "../api.js";
import { navigate } from "../router.js";

const bumpCache = new WeakMap();
function lastChange(tr) {
  if (!tr) return 0;
  const hit = bumpCache.get(tr);
  if (hit && hit.version === tr.version) return hit.seq;
  let seq = 0;
  for (let i = tr.events.length - 1; i >= 0; i--) {
    const k = tr.events[i].kind;
    if (k === "tool.result" || k === "turn.ended" || k === "snapshot.taken") {
      seq = tr.events[i].seq;
      break;
    }
  }
  bumpCache.set(tr, { version: tr.version, seq });
  return seq;
}

const messageCache = new WeakMap();
function messageOptions(tr) {
  const hit = messageCache.get(tr);
  if (hit && hit.version === tr.version) return hit.list;
  const list = [];
  const reviewers = new Set();
  for (const ev of tr.events) {
    if (ev.kind === "session.created" && ev.payload.role === "reviewer") reviewers.add(ev.payload.id);
    if (ev.kind !== "user.message" || !ev.payload.head) continue;
    // byre's own messages (a reviewer's instructions, the merge-in and restart notes) are not
    // points a human picks from.
    if (ev.actor === "byre" || reviewers.has(ev.agent_session_id)) continue;
    const text = (ev.payload.text || "").split("\n")[0].slice(0, 50);
    list.push({ value: `since:${ev.payload.head}`, label: `Since ${ev.actor}'s message “${text}”` });
  }
  messageCache.set(tr, { version: tr.version, list });
  return list;
}

function sinceOptions(state, taskId, snaps) {
  const opts = [{ value: "", label: "All changes (vs the merge-base)" }];
  const tr = state.transcripts.get(taskId);
  if (tr) opts.push(...messageOptions(tr));
  for (const s of snaps) {
    opts.push({ value: `snap:${s.n}`, label: `Snapshot ${s.n}: everything up to it` });
    opts.push({ value: `step:${s.n}`, label: `Snapshot ${s.n}: only what its turn changed` });
  }
  return opts;
}

function paramsOf(choice) {
  if (choice.startsWith("since:")) return { since: choice.slice(6) };
  if (choice.startsWith("snap:")) return { snapshot: choice.slice(5) };
  if (choice.startsWith("step:")) return { snapshot: choice.slice(5), step: true };
  return {};
}

/** Files as a tree of directories: [{ dir, files }] sorted, each file with its change. */
function group(files) {
  const dirs = new Map();
  for (const f of files) {
    const i = f.path.lastIndexOf("/");
    const dir = i < 0 ? "" : f.path.slice(0, i);
    if (!dirs.has(dir)) dirs.set(dir, []);
    dirs.get(dir).push(f);
  }
  return [...dirs.entries()].sort((a, b) => a[0].localeCompare(b[0])).map(([dir, fs]) => ({ dir, files: fs.sort((a, b) => a.path.localeCompare(b.path)) }));
}

const STATUS = { added: "A", modified: "M", deleted: "D", renamed: "R", type_changed: "T" };

/** A unified patch as rows; the new side's `line`, when given, marked and scrolled to. */
export function Diff({ patch, path, line = 0 }) {
  const rows = useMemo(() => parsePatch(patch || ""), [patch]);
  const [all, setAll] = useState(false);
  const box = useRef(null);
  useEffect(() => {
    const hit = line && box.current && box.current.querySelector("tr.hit");
    if (hit) hit.scrollIntoView({ block: "center" });
  }, [rows, line]);
  const LIMIT = 4000;
  const shown = all ? rows : rows.slice(0, LIMIT);
  return html`<div class="diff" data-testid="diff" data-path=${path} ref=${box}>
    ${rows.length === 0 ? html`<div class="hint pad">No textual difference.</div>` : null}
    <table><tbody>
      ${shown.map((r) => (r.kind === "hunk"
        ? html`<tr class="hunk"><td colspan="3">${r.text}</td></tr>`
        : r.kind === "meta" ? html`<tr class="meta"><td colspan="3">${r.text}</td></tr>`
          : html`<tr class=${`${r.kind}${line && r.new === line ? " hit" : ""}`} data-testid=${`diff-${r.kind}`}><td class="ln">${r.old ?? ""}</td><td class="ln">${r.new ?? ""}</td><td class="code">${r.text}</td></tr>`))}
    </tbody></table>
    ${rows.length > LIMIT && !all ? html`<button type="button" class="link" onClick=${() => setAll(true)}>Show all ${rows.length} lines</button>` : null}
  </div>`;
}

export function parsePatch(patch) {
  const out = [];
  let o = 0;
  let n = 0;
  for (const line of patch.split("\n")) {
    if (line.startsWith("@@")) {
      const m = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
      if (m) {
        o = +m[1];
        n = +m[2];
      }
      out.push({ kind: "hunk", text: line });
    } else if (line.startsWith("diff --git") || line.startsWith("index ") || line.startsWith("--- ") || line.startsWith("+++ ") || line.startsWith("new file") || line.startsWith("deleted file") || line.startsWith("similarity") || line.startsWith("rename ") || line.startsWith("old mode") || line.startsWith("new mode") || line.startsWith("Binary")) {
      if (!line.startsWith("diff --git") && !line.startsWith("index ")) out.push({ kind: "meta", text: line });
    } else if (line.startsWith("+")) {
      out.push({ kind: "add", new: n++, text: line.slice(1) });
    } else if (line.startsWith("-")) {
      out.push({ kind: "del", old: o++, text: line.slice(1) });
    } else if (line.startsWith(" ")) {
      out.push({ kind: "ctx", old: o++, new: n++, text: line.slice(1) });
    } else if (line.startsWith("\\")) {
      out.push({ kind: "meta", text: line });
    }
  }
  return out;
}

/** The button forking the chosen snapshot `n` (forkSnapshot); on success the page goes to the
 * fork, whose session waits for its first message. The server's refusal is shown as is. */
function ForkButton({ task, n }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  useEffect(() => setError(null), [task.id, n]);
  const fork = () => {
    setBusy(true);
    setError(null);
    api.forkSnapshot(task.id, n)
      .then((t) => navigate(`/tasks/${encodeURIComponent(t.id)}`))
      .catch((e) => setError(e.message))
      .finally(() => setBusy(false));
  };
  return html`<button type="button" data-testid="changes-fork" disabled=${busy} onClick=${fork}
      title="A new task from this snapshot, its agent's conversation as it stood then">Fork at snapshot ${n}</button>
    ${error ? html`<span class="form-error" role="alert" data-testid="changes-fork-error">${error}</span>` : null}`;
}

/** The changes tab. */
export function Changes({ task, state }) {
  const q = new URLSearchParams(location.search);
  const initial = q.get("snapshot") ? `${q.get("step") ? "step" : "snap"}:${q.get("snapshot")}` : "";
  const [choice, setChoice] = useState(initial);
  const [snaps, setSnaps] = useState([]);
  const [changes, setChanges] = useState(null);
  const [error, setError] = useState(null);
  const [selected, setSelected] = useState(q.get("path") || null);
  const [line, setLine] = useState(Number(q.get("line")) || 0);
  const [diff, setDiff] = useState(null);
  const [diffError, setDiffError] = useState(null);
  const lastRead = useRef(0);
  const tr = state.transcripts.get(task.id);
  // What changes the worktree: tool results, turn ends, snapshots. Re-read when they come.
  const bump = lastChange(tr);
  const closed = task.status !== "active";

  useEffect(() => {
    api.listSnapshots(task.id).then(setSnaps).catch(() => {});
  }, [task.id, bump]);
  useEffect(() => {
    if (closed && !choice.includes(":")) {
      setChanges(null);
      return undefined;
    }
    // At most one read per 1.5 s while the agent works (a throttle, not a debounce, so a busy
    // turn still shows its changes as it goes).
    let live = true;
    const wait = changes ? Math.max(0, 1500 - (Date.now() - lastRead.current)) : 0;
    const timer = setTimeout(() => {
      lastRead.current = Date.now();
      api.getTaskChanges(task.id, paramsOf(choice)).then((c) => {
        if (!live) return;
        setChanges(c);
        setError(null);
      }).catch((e) => live && setError(e.message));
    }, wait);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [task.id, choice, bump, closed]);
  const file = selected && changes && changes.files.find((f) => f.path === selected);
  useEffect(() => {
    if (!file || !changes) {
      setDiff(null);
      return;
    }
    let live = true;
    setDiffError(null);
    api.getTaskDiff(task.id, { base: changes.base, tree: changes.tree, path: file.path, old_path: file.old_path })
      .then((d) => live && setDiff(d)).catch((e) => live && setDiffError(e.message));
    return () => { live = false; };
  }, [selected, changes && changes.tree, changes && changes.base]);

  const options = sinceOptions(state, task.id, snaps);
  const groups = changes ? group(changes.files) : [];
  const totals = changes ? changes.files.reduce((a, f) => [a[0] + f.additions, a[1] + f.deletions], [0, 0]) : [0, 0];
  return html`<div class="pane-body changes">
    <div class="changes-bar">
      <select data-testid="changes-since" value=${choice} onChange=${(e) => { setChoice(e.target.value); setSelected(null); setLine(0); }}>
        ${options.map((o) => html`<option value=${o.value}>${o.label}</option>`)}
      </select>
      ${choice.includes(":") && !closed ? html`<${ForkButton} task=${task} n=${choice.split(":")[1]} />` : null}
      ${changes ? html`<span class="stat"><span class="add">+${totals[0]}</span> <span class="del">−${totals[1]}</span> in ${changes.files.length} file${changes.files.length === 1 ? "" : "s"}</span>` : null}
    </div>
    ${closed && !choice.includes(":") ? html`<p class="hint pad">The task is ${task.status}: its worktree is gone. Pick a snapshot above to see its changes.</p>` : null}
    ${error ? html`<div class="form-error" role="alert" data-testid="changes-error">${error}</div>` : null}
    ${changes && changes.files.length === 0 ? html`<p class="hint pad" data-testid="changes-empty">No changes.</p>` : null}
    ${changes && changes.files.length ? html`<div class="changes-tree" data-testid="changes-tree">
      ${groups.map((g) => html`<div class="cdir">${g.dir ? html`<div class="dname">${g.dir}/</div>` : null}
        ${g.files.map((f) => html`<button type="button" class=${`cfile ${f.path === selected ? "on" : ""}`} data-testid="changes-file" data-path=${f.path} data-status=${f.status}
            onClick=${() => { setSelected(f.path === selected ? null : f.path); setLine(0); }}>
          <span class=${`st ${f.status}`} title=${f.status}>${STATUS[f.status] || "?"}</span>
          <span class="fname">${g.dir ? f.path.slice(g.dir.length + 1) : f.path}${f.old_path ? html` <span class="hint">← ${f.old_path}</span>` : null}</span>
          ${f.binary ? html`<span class="hint">binary</span>` : html`<span class="stat"><span class="add">+${f.additions}</span> <span class="del">−${f.deletions}</span></span>`}
        </button>`)}
      </div>`)}
    </div>` : null}
    ${diffError ? html`<div class="form-error" role="alert">${diffError}</div>` : null}
    ${selected && changes && !file ? html`<p class="hint pad" data-testid="changes-not-changed"><code>${selected}</code> is not among these changes.</p>` : null}
    ${file && diff ? html`<${Diff} patch=${diff.patch} path=${file.path} line=${line} />` : null}
  </div>`;
}

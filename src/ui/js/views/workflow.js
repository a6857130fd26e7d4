// The workflow tab of a stage task (getWorkflowRun): the run's stages as a graph (one column
// per depth, an arrow from each stage to the stages that come after it, each box coloured by
// its state), then each stage's detail: what it waits on, every attempt (the first task and
// its forks) with the attempts it started from, its output (Markdown, the transcript's safe
// renderer) and the commit it finished at. The run is read again whenever one of its tasks
// changes or a workflow event arrives (js/store.js bumps `workflowVersion`); nothing here is
// folded by hand.

import { html, useState, useEffect, useRef } from "../html.js";
import { api } from "../api.js";
import { renderMarkdown } from "../markdown.js";
import { short } from "../util.js";

/** What each stage state means, in words (WorkflowRunStage.state, StageAttempt.state). */
export const STAGE_WORDS = {
  waiting: "waiting",
  running: "running",
  idle: "idle",
  finished: "finished",
  merged: "merged",
  discarded: "discarded",
  cleaned_up: "cleaned up",
};

const W = 168; // a stage box, in SVG units (px at 1:1)
const H = 52;
const GX = 56; // gaps between columns and rows
const GY = 20;

/**
 * Lays the stages out: a stage's column is one more than the deepest of its after stages
 * (0 with none), its row its place among that column's stages in definition order.
 * Returns `{ nodes: Map(name -> {x, y, stage}), width, height }`.
 */
export function layout(stages) {
  const byName = new Map(stages.map((s) => [s.name, s]));
  const depth = new Map();
  const depthOf = (s, seen = new Set()) => {
    if (depth.has(s.name)) return depth.get(s.name);
    if (seen.has(s.name)) return 0; // a cycle: putWorkflow refuses them, so never here
    seen.add(s.name);
    let d = 0;
    for (const a of s.after || []) {
      const p = byName.get(a);
      if (p) d = Math.max(d, depthOf(p, seen) + 1);
    }
    depth.set(s.name, d);
    return d;
  };
  const rows = [];
  const nodes = new Map();
  for (const s of stages) {
    const d = depthOf(s);
    rows[d] = (rows[d] || 0) + 1;
    nodes.set(s.name, { x: d * (W + GX), y: (rows[d] - 1) * (H + GY), stage: s });
  }
  const cols = rows.length;
  const maxRows = Math.max(1, ...rows.map((n) => n || 0));
  return { nodes, width: cols * W + (cols - 1) * GX, height: maxRows * H + (maxRows - 1) * GY };
}

function Graph({ run, selected, onSelect }) {
  const { nodes, width, height } = layout(run.stages);
  const edges = [];
  for (const s of run.stages) {
    const to = nodes.get(s.name);
    for (const a of s.after) {
      const from = nodes.get(a);
      if (!from) continue;
      const x1 = from.x + W, y1 = from.y + H / 2, x2 = to.x, y2 = to.y + H / 2;
      const mid = (x1 + x2) / 2;
      const waiting = s.waiting_on.includes(a);
      edges.push(html`<path class=${`wf-edge ${waiting ? "waiting" : "done"}`} d=${`M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2 - 6},${y2}`} marker-end="url(#wf-arrow)" data-testid="workflow-edge" data-from=${a} data-to=${s.name} />`);
    }
  }
  const pad = 8;
  return html`<div class="wf-graph-wrap">
    <svg class="wf-graph" data-testid="workflow-graph" width=${width + 2 * pad} height=${height + 2 * pad}
      viewBox=${`${-pad} ${-pad} ${width + 2 * pad} ${height + 2 * pad}`} role="img" aria-label=${`stages of ${run.name}`}>
      <defs><marker id="wf-arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="8" markerHeight="8" orient="auto"><path d="M0,0 L8,4 L0,8 z" class="wf-arrow" /></marker></defs>
      ${edges}
      ${run.stages.map((s) => {
        const n = nodes.get(s.name);
        const label = s.name.length > 20 ? s.name.slice(0, 19) + "…" : s.name;
        const tries = s.attempts.length;
        return html`<g class=${`wf-node st-${s.state} ${selected === s.name ? "on" : ""}`} transform=${`translate(${n.x},${n.y})`}
            data-testid="workflow-node" data-stage=${s.name} data-state=${s.state} tabindex="0" role="button"
            onClick=${() => onSelect(s.name)} onKeyDown=${(e) => (e.key === "Enter" || e.key === " ") && onSelect(s.name)}>
          <title>${s.name}: ${STAGE_WORDS[s.state] || s.state}${s.waiting_on.length ? ` (waits on ${s.waiting_on.join(", ")})` : ""}</title>
          <rect width=${W} height=${H} rx="8" />
          <text x="12" y="21" class="wf-name">${label}</text>
          <text x="12" y="39" class="wf-state">${STAGE_WORDS[s.state] || s.state}${tries > 1 ? ` · ${tries} attempts` : ""}</text>
        </g>`;
      })}
    </svg>
  </div>`;
}

function Attempt({ a, taskId, stageOf }) {
  const here = a.task_id === taskId;
  return html`<li class=${`wf-attempt st-${a.state} ${here ? "here" : ""}`} data-testid="workflow-attempt" data-task-id=${a.task_id} data-state=${a.state}>
    <div class="wf-attempt-head">
      <a href=${`/tasks/${a.task_id}/workflow`} title=${a.title}>${a.title}</a>${here ? html` <span class="hint">(this task)</span>` : null}
      <span class=${`badge st-${a.state}`} data-testid="workflow-attempt-state">${STAGE_WORDS[a.state] || a.state}${a.discarding ? " · discarding" : ""}</span>
    </div>
    ${a.forked_from ? html`<div class="hint">a fork of <a href=${`/tasks/${a.forked_from}/workflow`}>${stageOf(a.forked_from)}</a></div>` : null}
    ${a.inputs.length ? html`<div class="hint" data-testid="workflow-inputs">started from ${a.inputs.map((i, k) => html`${k ? ", " : ""}<a href=${`/tasks/${i.task_id}/workflow`}>${i.stage}</a>`)}</div>` : null}
    ${a.discarded_by ? html`<div class="hint">discarded by ${a.discarded_by}</div>` : null}
    ${a.output != null
      ? html`<details class="wf-output" open=${here}>
          <summary>output${a.commit ? html` at <code data-testid="workflow-commit">${short(a.commit)}</code>` : null}</summary>
          <div class="md" data-testid="workflow-output" dangerouslySetInnerHTML=${{ __html: renderMarkdown(a.output, a.task_id) }}></div>
        </details>`
      : null}
  </li>`;
}

function StageDetail({ s, taskId, stageOf, refEl }) {
  return html`<section class=${`wf-stage st-${s.state}`} data-testid="workflow-stage" data-stage=${s.name} data-state=${s.state} ref=${refEl}>
    <h3>${s.name} <span class=${`badge st-${s.state}`} data-testid="workflow-stage-state">${STAGE_WORDS[s.state] || s.state}</span></h3>
    <p class="hint">${s.after.length ? html`after ${s.after.join(", ")}` : "starts from the brief"}${s.waiting_on.length ? html` · <span data-testid="workflow-waiting-on">waits on ${s.waiting_on.join(", ")}</span>` : null}</p>
    ${s.attempts.length
      ? html`<ul class="wf-attempts">${s.attempts.map((a) => html`<${Attempt} key=${a.task_id} a=${a} taskId=${taskId} stageOf=${stageOf} />`)}</ul>`
      : html`<p class="hint">No task yet: it starts once every stage it comes after has finished.</p>`}
  </section>`;
}

/** The run's events and task changes that should re-read it (see the file's head). */
function runVersion(state, task) {
  return `${state.workflowVersion || 0}/${state.tasksVersion}`;
}

/** The workflow tab for a stage task. */
export function WorkflowTab({ task, state }) {
  const [run, setRun] = useState(null);
  const [frozen, setFrozen] = useState(null);
  const [error, setError] = useState(null);
  const [selected, setSelected] = useState(task.workflow_stage || null);
  const refs = useRef(new Map());
  const version = runVersion(state, task);
  useEffect(() => {
    let live = true;
    const t = setTimeout(() => {
      api.getWorkflowRun(task.id).then((r) => live && (setRun(r), setError(null))).catch((e) => live && setError(e.message));
    }, run ? 150 : 0);
    return () => { live = false; clearTimeout(t); };
  }, [task.id, version]);
  const showFrozen = () => {
    if (frozen) return setFrozen(null);
    api.getTaskWorkflow(task.id).then(setFrozen).catch((e) => setError(e.message));
  };
  if (!task.workflow) return html`<div class="pane-body hint">This task is not part of a workflow run.</div>`;
  if (!run) return html`<div class="pane-body">${error ? html`<div class="form-error" role="alert">${error}</div>` : html`<p class="hint">Reading the run…</p>`}</div>`;
  const stageOf = (id) => {
    for (const s of run.stages) for (const a of s.attempts) if (a.task_id === id) return `${s.name} (${a.title})`;
    return id;
  };
  const select = (name) => {
    setSelected(name);
    const el = refs.current.get(name);
    if (el && el.scrollIntoView) el.scrollIntoView({ block: "nearest", behavior: "smooth" });
  };
  return html`<div class="pane-body workflow-tab" data-testid="workflow-run" data-run=${run.run} data-finished=${run.finished ? "true" : "false"}>
    <div class="wf-head">
      <h3>${run.name} <span class=${`badge ${run.finished ? "st-merged" : "st-running"}`} data-testid="workflow-run-state">${run.finished ? "finished" : "running"}</span></h3>
      <button type="button" class="link small" data-testid="workflow-definition-toggle" onClick=${showFrozen}>${frozen ? "hide" : "show"} the definition this run froze</button>
    </div>
    <div class="md wf-brief" data-testid="workflow-brief" dangerouslySetInnerHTML=${{ __html: renderMarkdown(run.brief, task.id) }}></div>
    ${frozen ? html`<pre class="wf-yaml" data-testid="workflow-definition">${frozen.definition}</pre>` : null}
    ${error ? html`<div class="form-error" role="alert">${error}</div>` : null}
    <${Graph} run=${run} selected=${selected} onSelect=${select} />
    ${run.finished ? html`<p class="hint">The final stage finished: byre cleaned up the run's other tasks. The final stage's task waits for you to merge it.</p>` : null}
    ${run.stages.map((s) => html`<${StageDetail} key=${s.name} s=${s} taskId=${task.id} stageOf=${stageOf} refEl=${(el) => refs.current.set(s.name, el)} />`)}
  </div>`;
}

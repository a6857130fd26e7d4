// getStatus as an operator's page: agents, zombies, protocol errors, rate limits, clients.
// Read when shown and when the log moves (at most every 2 s), never on a timer.

import { html, useState, useEffect, useRef } from "../html.js";
import { api, shownHere } from "../api.js";
import { when, ago, pretty } from "../util.js";

export function StatusPage({ state }) {
  const [status, setStatus] = useState(null);
  const [error, setError] = useState(null);
  const last = useRef(0);
  const load = () => {
    last.current = Date.now();
    api.getStatus().then((s) => { setStatus(s); setError(null); }).catch((e) => setError(shownHere(e)));
  };
  useEffect(() => {
    const wait = Math.max(0, 2000 - (Date.now() - last.current));
    const t = setTimeout(load, status ? wait : 0);
    return () => clearTimeout(t);
  }, [state.lastSeq]);
  const s = status;
  const titles = useTaskTitles(state, s ? s.agent_processes.map((a) => a.task_id) : []);
  return html`<div class="page status-page" data-testid="status-page">
    <div class="page-head"><h1>Status</h1><button type="button" data-testid="status-refresh" onClick=${load}>Refresh</button></div>
    ${error ? html`<div class="form-error" role="alert">${error}</div>` : null}
    ${!s ? html`<p class="hint">Loading…</p>` : html`
      <dl class="kv wide">
        <dt>started</dt><dd>${when(s.started_at)} (${ago(s.started_at)})</dd>
        <dt>log</dt><dd><span data-testid="status-last-seq">${s.last_event_seq}</span> events, ${(s.db_bytes / 1048576).toFixed(1)} MiB</dd>
        <dt>projects</dt><dd>${s.projects}, ${s.active_tasks} active tasks</dd>
        <dt>event streams</dt><dd>${s.sse_clients}</dd>
      </dl>
      <h2>Agents <span class="hint">${s.live_agents} live · ${s.running_turns.length} turns running · stuck after ${s.stuck_after_seconds} s</span></h2>
      <table class="grid" data-testid="status-agents"><thead><tr><th>task</th><th>session</th><th>vendor</th><th>pid</th><th>state</th><th>health</th><th>last output</th></tr></thead><tbody>
        ${s.agent_processes.length === 0 ? html`<tr><td colspan="7" class="hint">No agent processes.</td></tr>` : s.agent_processes.map((a) => html`<tr class=${`h-${a.health}`}>
          <td><a href=${`/tasks/${a.task_id}`}>${titles.get(a.task_id) || a.task_id.slice(0, 8)}</a></td><td><code>${a.session_id.slice(0, 8)}</code></td>
          <td>${a.vendor}</td><td>${a.pid}</td><td>${a.state}</td><td><span class=${`badge h-${a.health}`}>${a.health}</span></td><td title=${when(a.last_event_at)}>${ago(a.last_event_at)}</td></tr>`)}
      </tbody></table>
      <h2>Zombies</h2>
      <div data-testid="status-zombies">${s.zombies.length === 0 ? html`<p class="hint">None.</p>` : html`<ul>${s.zombies.map((z) => html`<li><strong>${z.kind}</strong>: ${z.detail}</li>`)}</ul>`}</div>
      <h2>Protocol errors</h2>
      <div data-testid="status-protocol-errors">
        <p>${Object.keys(s.protocol_errors.counts).length === 0 ? html`<span class="hint">None since start.</span>` : Object.entries(s.protocol_errors.counts).map(([v, n]) => html`<span class="tag">${v}: ${n}</span> `)}</p>
        ${s.protocol_errors.recent.map((e) => html`<details><summary>${e.vendor} · ${ago(e.at)} · ${e.reason}</summary><pre>${e.raw}</pre></details>`)}
      </div>
      <h2>Rate limits</h2>
      <div data-testid="status-rate-limits">${Object.keys(s.rate_limits).length === 0 ? html`<p class="hint">No vendor has reported one.</p>` : Object.entries(s.rate_limits).map(([v, r]) => html`<details open><summary>${v}</summary><pre>${pretty(r)}</pre></details>`)}</div>
      <h2>Your clients</h2>
      <table class="grid" data-testid="status-clients"><thead><tr><th>login</th><th>host</th><th>build</th><th>connected</th><th>last action</th></tr></thead><tbody>
        ${s.clients.map((c) => html`<tr><td>${c.login}</td><td>${c.host || html`<span class="hint">browser</span>`}</td><td><code>${(c.commit || "").slice(0, 10)}</code></td><td>${ago(c.connected_at)}</td><td>${c.last_action_at ? ago(c.last_action_at) : ""}</td></tr>`)}
      </tbody></table>`}
  </div>`;
}

/**
 * The titles of tasks by id: the page's own tasks, and those of projects it has not read
 * (the status page opened by itself), read once each with getTask.
 */
function useTaskTitles(state, ids) {
  const [read, setRead] = useState(() => new Map());
  const asked = useRef(new Set());
  const key = ids.join(",");
  useEffect(() => {
    for (const id of ids) {
      if (state.tasks.has(id) || asked.current.has(id)) continue;
      asked.current.add(id);
      api.getTask(id).then((t) => setRead((m) => new Map(m).set(id, t.title))).catch(() => {});
    }
  }, [key]);
  const titles = new Map(read);
  for (const id of ids) {
    const t = state.tasks.get(id);
    if (t) titles.set(id, t.title);
  }
  return titles;
}

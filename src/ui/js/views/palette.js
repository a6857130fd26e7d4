// The command palette: ⌘K / Ctrl-K anywhere (or the search button of the sidebar or the
// phone's top bar) opens it. As the user types, projects and tasks the page holds are
// matched at once by name and title; then `searchAll` (debounced, a stale answer dropped)
// adds the server's matches: projects, tasks, and transcript items and review findings with
// a snippet. Arrows move, Enter opens, Esc closes. A transcript item opens its task at that
// item (`/tasks/{id}?seq=N`); a lead item opens the lead. Snippets are text nodes, the
// matched words in <mark>: nothing of them is ever parsed as HTML.

import { html, useState, useEffect, useRef } from "../html.js";
import { api } from "../api.js";
import { navigate } from "../router.js";

const OPEN_EVENT = "byre:palette";
/** Opens the palette (the search buttons call it). */
export function openPalette() {
  window.dispatchEvent(new Event(OPEN_EVENT));
}

/** How long typing must pause before the server is asked, in ms. */
const DEBOUNCE_MS = 120;
/** Most local matches of each group. */
const LOCAL_MAX = 6;

const KIND_LABEL = { "user.message": "message", "agent.text": "agent", "review.done": "review" };

function localMatches(state, text) {
  const t = text.trim().toLowerCase();
  if (!t) return { projects: [], tasks: [] };
  const projects = [];
  for (const p of state.projects.values()) {
    if (p.name.toLowerCase().includes(t)) projects.push({ project_id: p.id, name: p.name });
    if (projects.length >= LOCAL_MAX) break;
  }
  const tasks = [];
  for (const k of state.tasks.values()) {
    if (k.title.toLowerCase().includes(t) || k.branch.toLowerCase().includes(t)) {
      const p = state.projects.get(k.project_id);
      tasks.push({ task_id: k.id, project_id: k.project_id, project_name: p ? p.name : "", title: k.title, branch: k.branch, status: k.status });
    }
    if (tasks.length >= LOCAL_MAX) break;
  }
  return { projects, tasks };
}

/** The rows shown: local matches first, then the server's not already listed. */
function rowsOf(local, found) {
  const rows = [];
  const seen = new Set();
  const add = (key, row) => {
    if (seen.has(key)) return;
    seen.add(key);
    rows.push(row);
  };
  for (const p of [...local.projects, ...(found ? found.projects : [])]) add(`p${p.project_id}`, { kind: "project", key: `p${p.project_id}`, p });
  for (const t of [...local.tasks, ...(found ? found.tasks : [])]) add(`t${t.task_id}`, { kind: "task", key: `t${t.task_id}`, t });
  for (const i of found ? found.items : []) add(`i${i.seq}`, { kind: "item", key: `i${i.seq}`, i });
  return rows;
}

function hrefOf(row) {
  if (row.kind === "project") return `/projects/${row.p.project_id}`;
  if (row.kind === "task") return `/tasks/${row.t.task_id}`;
  if (row.i.lead) return "/lead";
  return `/tasks/${row.i.task_id}?seq=${row.i.seq}`;
}

function Snippet({ parts }) {
  return html`<span class="snippet" data-testid="palette-snippet">${parts.map((p) => (p.hit ? html`<mark>${p.text}</mark>` : p.text))}</span>`;
}

function Row({ row, selected, onPick, onHover }) {
  const common = {
    class: `palette-row ${selected ? "sel" : ""}`,
    role: "option",
    "aria-selected": selected,
    "data-testid": "palette-item",
    "data-kind": row.kind,
    onMouseDown: (e) => {
      e.preventDefault();
      onPick(row);
    },
    onMouseMove: onHover,
  };
  if (row.kind === "project") {
    return html`<li ...${common} data-project-id=${row.p.project_id}><span class="pk">project</span><span class="pt">${row.p.name}</span></li>`;
  }
  if (row.kind === "task") {
    const t = row.t;
    return html`<li ...${common} data-task-id=${t.task_id}><span class="pk">task</span><span class="pt">${t.title}</span>
      <span class="pm">${t.project_name}${t.status !== "active" ? ` · ${t.status}` : ""}</span></li>`;
  }
  const i = row.i;
  return html`<li ...${common} data-task-id=${i.task_id || ""} data-seq=${i.seq}><span class="pk">${KIND_LABEL[i.kind] || i.kind}</span>
    <span class="pt">${i.lead ? "Your lead" : i.task_title}</span><${Snippet} parts=${i.snippet} /></li>`;
}

/** The palette, closed until ⌘K / Ctrl-K or a search button opens it. */
export function Palette({ state }) {
  const [open, setOpen] = useState(false);
  const [text, setText] = useState("");
  const [found, setFound] = useState(null);
  const [error, setError] = useState(null);
  const [sel, setSel] = useState(0);
  const asked = useRef(0);
  const input = useRef(null);

  useEffect(() => {
    const onKey = (e) => {
      if ((e.metaKey || e.ctrlKey) && !e.altKey && !e.shiftKey && e.key.toLowerCase() === "k") {
        e.preventDefault();
        setOpen((o) => !o);
      }
    };
    const onOpen = () => setOpen(true);
    document.addEventListener("keydown", onKey);
    window.addEventListener(OPEN_EVENT, onOpen);
    return () => {
      document.removeEventListener("keydown", onKey);
      window.removeEventListener(OPEN_EVENT, onOpen);
    };
  }, []);

  useEffect(() => {
    if (open && input.current) input.current.focus();
    if (!open) {
      asked.current++;
      setText("");
      setFound(null);
      setError(null);
      setSel(0);
    }
  }, [open]);

  useEffect(() => {
    const q = text.trim();
    const n = ++asked.current;
    if (!q) {
      setFound(null);
      setError(null);
      return undefined;
    }
    const timer = setTimeout(() => {
      api.searchAll({ q, limit: 8 }).then((r) => {
        if (n !== asked.current) return;
        setFound({ ...r, q });
        setError(null);
      }).catch((e) => {
        if (n !== asked.current) return;
        setFound(null);
        setError(e.message);
      });
    }, DEBOUNCE_MS);
    return () => clearTimeout(timer);
  }, [text]);

  if (!open) return null;
  const current = found && found.q === text.trim() ? found : null;
  const rows = rowsOf(localMatches(state, text), current);
  const at = Math.min(sel, Math.max(0, rows.length - 1));
  const pick = (row) => {
    setOpen(false);
    navigate(hrefOf(row));
  };
  const onKey = (e) => {
    if (e.key === "ArrowDown") setSel(Math.min(rows.length - 1, at + 1));
    else if (e.key === "ArrowUp") setSel(Math.max(0, at - 1));
    else if (e.key === "Enter") {
      if (rows[at]) pick(rows[at]);
    } else if (e.key === "Escape") setOpen(false);
    else return;
    e.preventDefault();
  };
  const pending = text.trim() && !current && !error;
  return html`<div class="palette-backdrop" onMouseDown=${(e) => e.target === e.currentTarget && setOpen(false)}>
    <div class="palette" role="dialog" aria-label="Search" data-testid="palette">
      <input ref=${input} type="search" class="palette-input" data-testid="palette-input" placeholder="Search projects, tasks and transcripts…"
        aria-controls="palette-list" autocomplete="off" spellcheck="false"
        value=${text} onInput=${(e) => { setText(e.target.value); setSel(0); }} onKeyDown=${onKey} />
      ${error ? html`<div class="palette-note error" data-testid="palette-error">${error}</div>` : null}
      <ul id="palette-list" class="palette-list" role="listbox" data-testid="palette-results">
        ${rows.map((row, idx) => html`<${Row} key=${row.key} row=${row} selected=${idx === at} onPick=${pick} onHover=${() => idx !== at && setSel(idx)} />`)}
      </ul>
      ${!text.trim() ? html`<div class="palette-note">Words of a task's title, branch or transcript, or a review's findings. <kbd>↑</kbd><kbd>↓</kbd> move · <kbd>Enter</kbd> open · <kbd>Esc</kbd> close</div>`
        : pending ? html`<div class="palette-note" data-testid="palette-searching">Searching…</div>`
        : rows.length === 0 && !error ? html`<div class="palette-note" data-testid="palette-empty">Nothing found.</div>`
        : current && !current.complete ? html`<div class="palette-note">The index is catching up with the log; some results may be missing.</div>` : null}
    </div>
  </div>`;
}

/** The search button of the sidebar and the phone's top bar. */
export function SearchButton() {
  const mac = /Mac|iPhone|iPad/.test(navigator.platform || "");
  return html`<button type="button" class="search-button" data-testid="search-button" title=${`Search (${mac ? "⌘" : "Ctrl-"}K)`} aria-label="Search" onClick=${openPalette}>
    <span aria-hidden="true">⌕</span> <span class="search-label">Search</span> <kbd>${mac ? "⌘K" : "Ctrl K"}</kbd>
  </button>`;
}

// Edits as diffs: a tool call that changes files (Claude Code's Edit, MultiEdit and Write;
// Codex's apply_patch) drawn as the change it asks for, per file: the path, then its removed
// and added lines, as the changes tab draws a diff. Edit's old and new strings are compared
// line by line with jsdiff (`vendor/jsdiff/`); Codex sends a unified diff per file, drawn as
// it is. Tool names: an MCP tool `mcp__<server>__<tool>` reads "<server> · <tool>", so byre's
// own tools read "byre · ask_human".

import { html, useMemo, useState } from "../html.js";
import { diffLines } from "../../vendor/jsdiff/diff/line.js";
import { parsePatch } from "./changes.js";

/** A tool's name as shown: `mcp__byre__ask_human` → "byre · ask_human"; others as they are. */
export function toolLabel(name) {
  const parts = String(name || "").split("__");
  if (parts[0] === "mcp" && parts.length >= 3 && parts[1]) return `${parts[1]} · ${parts.slice(2).join("__")}`;
  return name || "";
}

/** `text`'s lines (a last newline ends the last line; it opens no empty one). */
function lines(text) {
  const all = String(text ?? "").split("\n");
  if (all.length > 1 && all[all.length - 1] === "") all.pop();
  return all;
}

/** `text` ending with a newline, so that its last line compares equal to a whole line. */
const ended = (text) => {
  const t = String(text ?? "");
  return t === "" || t.endsWith("\n") ? t : `${t}\n`;
};

/** Rows of `old` → `new` compared line by line (no line numbers: an Edit names no place). */
function compare(oldText, newText) {
  const rows = [];
  for (const part of diffLines(ended(oldText), ended(newText))) {
    const kind = part.added ? "add" : part.removed ? "del" : "ctx";
    for (const text of lines(part.value)) rows.push({ kind, text });
  }
  return rows;
}

/** Every line of `text` as `kind` ("add" or "del"), numbered from 1 on its side. */
function whole(text, kind) {
  return lines(text).map((t, i) => (kind === "add" ? { kind, new: i + 1, text: t } : { kind, old: i + 1, text: t }));
}

/**
 * The files a call changes, `[{ path, what, rows }]`, or null when the tool edits no file
 * (or its input is not what the vendor sends). `worktree` (with its last `/`) is cut from
 * paths.
 */
export function editsOf(name, input, worktree) {
  if (!input || typeof input !== "object") return null;
  const rel = (p) => (typeof p === "string" && worktree ? p.split(worktree).join("") : String(p || ""));
  switch (name) {
    case "Edit":
      if (typeof input.old_string !== "string" || typeof input.new_string !== "string") return null;
      return [{ path: rel(input.file_path), what: input.replace_all ? "edit (every occurrence)" : "edit", rows: compare(input.old_string, input.new_string) }];
    case "MultiEdit": {
      if (!Array.isArray(input.edits)) return null;
      const rows = [];
      input.edits.forEach((e, i) => {
        rows.push({ kind: "hunk", text: `edit ${i + 1} of ${input.edits.length}${e && e.replace_all ? " (every occurrence)" : ""}` });
        rows.push(...compare(e && e.old_string, e && e.new_string));
      });
      return [{ path: rel(input.file_path), what: "edits", rows }];
    }
    case "Write":
      if (typeof input.content !== "string") return null;
      return [{ path: rel(input.file_path), what: "write", rows: whole(input.content, "add") }];
    case "apply_patch":
      if (!Array.isArray(input.changes)) return null;
      return input.changes.map((c) => {
        const kind = (c && c.kind && c.kind.type) || "update";
        const diff = String((c && c.diff) || "");
        // An added or deleted file may come as its content rather than as a patch.
        const patch = /^(@@|--- |\+\+\+ )/m.test(diff);
        const rows = patch || kind === "update" ? parsePatch(diff) : whole(diff, kind === "delete" ? "del" : "add");
        const moved = c && c.kind && c.kind.move_path ? ` → ${rel(c.kind.move_path)}` : "";
        return { path: `${rel(c && c.path)}${moved}`, what: kind, rows };
      });
    default:
      return null;
  }
}

/** "+3 −1" for rows. */
export function counts(files) {
  let add = 0;
  let del = 0;
  for (const f of files) for (const r of f.rows) if (r.kind === "add") add++; else if (r.kind === "del") del++;
  return `+${add} −${del}`;
}

const SHOWN = 80;

/** One file's change: its path, what the tool did, the rows (the first 80, then "show all"). */
function FileDiff({ file }) {
  const [all, setAll] = useState(false);
  const rows = all ? file.rows : file.rows.slice(0, SHOWN);
  return html`<div class="tool-diff diff" data-testid="tool-diff" data-path=${file.path}>
    <div class="tool-diff-head"><code>${file.path}</code> <span class="hint">${file.what} · ${counts([file])}</span></div>
    ${file.rows.length === 0 ? html`<div class="hint pad">No lines.</div>` : html`<table><tbody>
      ${rows.map((r) => (r.kind === "hunk" || r.kind === "meta"
        ? html`<tr class=${r.kind}><td colspan="3">${r.text}</td></tr>`
        : html`<tr class=${r.kind} data-testid=${`tool-diff-${r.kind}`}><td class="ln">${r.old ?? ""}</td><td class="ln">${r.new ?? ""}</td><td class="code"><span class="sign">${r.kind === "add" ? "+" : r.kind === "del" ? "−" : " "}</span>${r.text}</td></tr>`))}
    </tbody></table>`}
    ${file.rows.length > SHOWN && !all ? html`<button type="button" class="link" onClick=${() => setAll(true)}>Show all ${file.rows.length} lines</button>` : null}
  </div>`;
}

/** The files of an edit call, each as a diff. */
export function ToolDiff({ files }) {
  return html`<div class="tool-diffs">${files.map((f, i) => html`<${FileDiff} key=${`${i}:${f.path}`} file=${f} />`)}</div>`;
}

/** The edits of a call, computed once per call (null when it edits no file). */
export function useEdits(name, input, worktree) {
  return useMemo(() => editsOf(name, input, worktree), [name, input, worktree]);
}

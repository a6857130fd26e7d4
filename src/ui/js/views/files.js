// The files tab: the worktree's directories (getTaskDir), a file's text (getTaskFile), images
// through getTaskImage. File contents are untrusted: text nodes, or sanitised Markdown.

import { html, useState, useEffect } from "../html.js";
import { api } from "../api.js";
import { renderMarkdown } from "../markdown.js";

const IMAGE = /\.(png|jpe?g|gif|webp|svg)$/i;

export function Files({ task }) {
  const [dir, setDir] = useState("");
  const [listing, setListing] = useState(null);
  const [file, setFile] = useState(null); // path
  const [content, setContent] = useState(null);
  const [error, setError] = useState(null);
  const [source, setSource] = useState(false);
  const closed = task.status !== "active";
  useEffect(() => {
    if (closed) return;
    setError(null);
    api.getTaskDir(task.id, dir).then(setListing).catch((e) => setError(e.message));
  }, [task.id, dir]);
  useEffect(() => {
    setContent(null);
    if (!file || IMAGE.test(file)) return;
    api.getTaskFile(task.id, file).then(setContent).catch((e) => setError(e.message));
  }, [file]);
  if (closed) return html`<div class="pane-body hint pad">The task is ${task.status}: its worktree is gone.</div>`;
  const crumbs = dir ? dir.split("/") : [];
  const join = (name) => (dir ? `${dir}/${name}` : name);
  return html`<div class="pane-body files">
    <div class="crumbs" data-testid="files-path">
      <button type="button" class="link" onClick=${() => { setDir(""); setFile(null); }}>worktree</button>
      ${crumbs.map((c, i) => html` / <button type="button" class="link" onClick=${() => { setDir(crumbs.slice(0, i + 1).join("/")); setFile(null); }}>${c}</button>`)}
      ${file ? html` / <strong>${file.split("/").pop()}</strong>` : null}
    </div>
    ${error ? html`<div class="form-error" role="alert" data-testid="files-error">${error}</div>` : null}
    ${file ? html`<div class="file-view">
        <div class="file-bar"><button type="button" class="link" onClick=${() => setFile(null)}>‹ back to ${dir || "the worktree"}</button>
          ${/\.md$/i.test(file) && content ? html`<button type="button" class="link" onClick=${() => setSource(!source)}>${source ? "rendered" : "source"}</button>` : null}
          ${content ? html`<span class="hint">${content.size} bytes${content.truncated ? ", shown in part" : ""}</span>` : null}</div>
        ${IMAGE.test(file) ? html`<img class="file-image" data-testid="files-image" src=${api.taskImageUrl(task.id, file)} alt=${file} />`
          : !content ? html`<div class="hint pad">Loading…</div>`
            : content.binary ? html`<div class="hint pad" data-testid="files-content">A binary file (${content.size} bytes).</div>`
              : /\.md$/i.test(file) && !source ? html`<div class="md file-md" data-testid="files-content" dangerouslySetInnerHTML=${{ __html: renderMarkdown(content.text, task.id, true, file.split("/").slice(0, -1).join("/")) }}></div>`
                : html`<pre class="file-text" data-testid="files-content">${content.text}</pre>`}
      </div>`
      : listing ? html`<ul class="dir">
        ${listing.entries.map((e) => html`<li><button type="button" class=${`entry ${e.type} ${e.ignored ? "ignored" : ""}`} data-testid="files-entry" data-name=${e.name} data-type=${e.type}
            onClick=${() => (e.type === "dir" ? setDir(join(e.name)) : e.type === "file" ? setFile(join(e.name)) : null)}>
          <span class="icon">${e.type === "dir" ? "▸" : " "}</span> ${e.name}${e.symlink ? " ↪" : ""}
          ${e.type === "file" ? html`<span class="hint size">${e.size} B</span>` : null}
        </button></li>`)}
        ${listing.truncated ? html`<li class="hint">… more entries not shown</li>` : null}
      </ul>` : html`<div class="hint pad">Loading…</div>`}
  </div>`;
}

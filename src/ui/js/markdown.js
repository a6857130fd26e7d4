// Markdown from agents and repositories, rendered safely: marked, then DOMPurify with byre's
// rules. No script, style, form or frame survives; links only http(s)/mailto (new tab,
// noopener); images only from byre's own /api/ endpoints or data:image/ URLs (a relative
// path becomes the task's getTaskImage URL); everything else is dropped.

import { marked } from "../vendor/marked.esm.js";
import DOMPurify from "../vendor/purify.es.mjs";
import { withKey } from "./api.js";

marked.setOptions({ gfm: true, breaks: false });

let currentTask = null;
let currentBase = "";
const SAFE_LINK = /^(https?:|mailto:)/i;
const SAFE_IMG = /^(\/api\/|data:image\/(png|jpeg|gif|webp);)/i;
const HAS_SCHEME = /^[a-z][a-z0-9+.-]*:/i;

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    const href = node.getAttribute("href") || "";
    if (!SAFE_LINK.test(href.trim())) node.removeAttribute("href");
    else {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer nofollow");
    }
  }
  if (node.tagName === "IMG") {
    let src = (node.getAttribute("src") || "").trim();
    if (currentTask && src && !HAS_SCHEME.test(src) && !src.startsWith("/") && !src.startsWith("//")) {
      src = `/api/tasks/${encodeURIComponent(currentTask)}/image?path=${encodeURIComponent(resolve(currentBase, src))}`;
      node.setAttribute("src", src);
    }
    if (!SAFE_IMG.test(src)) node.removeAttribute("src");
    // byre's own images need the sign-in key in token mode (an <img> sends no header).
    else if (src.startsWith("/api/")) node.setAttribute("src", withKey(src));
    node.removeAttribute("srcset");
    node.setAttribute("loading", "lazy");
  }
});

/**
 * `src` (a relative path, maybe with `./`, `../`, a query or a fragment) resolved against the
 * directory `base` of the worktree, as the Markdown file's own directory would resolve it.
 * `..` never climbs above the worktree (the server refuses such paths anyway).
 */
export function resolve(base, src) {
  const path = src.split(/[?#]/)[0];
  let decoded = path;
  try {
    decoded = decodeURIComponent(path);
  } catch (_) { /* keep it as written */ }
  const out = base ? base.split("/").filter(Boolean) : [];
  for (const seg of decoded.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") out.pop();
    else out.push(seg);
  }
  return out.join("/");
}

const CONFIG = {
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed", "svg", "math", "link", "meta", "base"],
  FORBID_ATTR: ["style", "class", "id", "srcset", "action", "formaction"],
  ALLOW_DATA_ATTR: false,
};

const cache = new Map();
/**
 * Sanitised HTML for Markdown `text`; relative images resolve in task `taskId`'s worktree,
 * against its directory `base` (a repository file's own directory; agent text: the top).
 * Results are cached unless `cache` is false (streaming text, which changes every frame).
 */
export function renderMarkdown(text, taskId = null, cache_ = true, base = "") {
  const key = `${taskId || ""}\u0000${base}\u0000${text}`;
  const hit = cache_ ? cache.get(key) : undefined;
  if (hit !== undefined) return hit;
  currentTask = taskId;
  currentBase = base;
  let out;
  try {
    out = DOMPurify.sanitize(marked.parse(text || "", { async: false }), CONFIG);
  } finally {
    currentTask = null;
    currentBase = "";
  }
  if (!cache_) return out;
  if (cache.size > 2000) cache.delete(cache.keys().next().value);
  cache.set(key, out);
  return out;
}

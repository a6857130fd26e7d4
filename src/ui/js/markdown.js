// Markdown from agents and repositories, rendered safely: marked, then DOMPurify with byre's
// rules. No script, style, form or frame survives; links only http(s)/mailto (new tab,
// noopener); images only from byre's own /api/ endpoints or data:image/ URLs (a relative
// path becomes the task's getTaskImage URL); everything else is dropped.

import { marked } from "../vendor/marked.esm.js";
import DOMPurify from "../vendor/purify.es.mjs";

marked.setOptions({ gfm: true, breaks: false });

let currentTask = null;
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
      src = `/api/tasks/${encodeURIComponent(currentTask)}/image?path=${encodeURIComponent(src)}`;
      node.setAttribute("src", src);
    }
    if (!SAFE_IMG.test(src)) node.removeAttribute("src");
    node.removeAttribute("srcset");
    node.setAttribute("loading", "lazy");
  }
});

const CONFIG = {
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed", "svg", "math", "link", "meta", "base"],
  FORBID_ATTR: ["style", "class", "id", "srcset", "action", "formaction"],
  ALLOW_DATA_ATTR: false,
};

const cache = new Map();
/**
 * Sanitised HTML for Markdown `text`; relative images resolve in task `taskId`. Results are
 * cached unless `cache` is false (streaming text, which changes every frame).
 */
export function renderMarkdown(text, taskId = null, cache_ = true) {
  const key = `${taskId || ""}\u0000${text}`;
  const hit = cache_ ? cache.get(key) : undefined;
  if (hit !== undefined) return hit;
  currentTask = taskId;
  let out;
  try {
    out = DOMPurify.sanitize(marked.parse(text || "", { async: false }), CONFIG);
  } finally {
    currentTask = null;
  }
  if (!cache_) return out;
  if (cache.size > 2000) cache.delete(cache.keys().next().value);
  cache.set(key, out);
  return out;
}

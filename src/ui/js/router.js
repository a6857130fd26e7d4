// The client-side routes (history API) and in-app link handling.

/** The current route, parsed from the location. */
export function parseRoute(loc = location) {
  const parts = loc.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  const query = new URLSearchParams(loc.search);
  if (parts[0] === "projects" && parts[1]) return { name: parts[2] === "new" ? "new-task" : "project", projectId: parts[1], query };
  if (parts[0] === "tasks" && parts[1]) return { name: "task", taskId: parts[1], tab: parts[2] || null, query };
  if (parts[0] === "inbox") return { name: "inbox", query };
  if (parts[0] === "status") return { name: "status", query };
  if (parts[0] === "workflows") return { name: "workflows", query };
  if (parts[0] === "lead") return { name: "lead", query };
  return { name: "projects", query };
}

const routeListeners = new Set();
const setRouteState = (r) => routeListeners.forEach((fn) => fn(r));
/** Calls `fn(route)` on every navigation. */
export function onRoute(fn) {
  routeListeners.add(fn);
  return () => routeListeners.delete(fn);
}
/** Goes to `path` inside the app (pushState), or replaces the entry. */
export function navigate(path, { replace = false } = {}) {
  if (path === location.pathname + location.search) return;
  if (replace) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  setRouteState(parseRoute());
}

window.addEventListener("popstate", () => setRouteState(parseRoute()));
window.addEventListener("byre:navigate", (e) => navigate(e.detail));

// In-app links: any same-origin <a href="/…"> without a target.
document.addEventListener("click", (e) => {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = e.target.closest && e.target.closest("a[href]");
  if (!a || a.target || a.hasAttribute("download")) return;
  const href = a.getAttribute("href");
  if (!href.startsWith("/") || href.startsWith("//") || href.startsWith("/api/") || href.startsWith("/signin") || href.startsWith("/signout")) return;
  e.preventDefault();
  navigate(href);
});


// Keys anywhere (not while typing): g then p / i / s / w goes to projects / inbox / status /
// workflows.
let pendingG = 0;
document.addEventListener("keydown", (e) => {
  if (e.defaultPrevented || e.metaKey || e.ctrlKey || e.altKey) return;
  if (e.target.closest && e.target.closest("input, textarea, select, [contenteditable]")) return;
  if (e.key === "g") {
    pendingG = Date.now();
    return;
  }
  if (Date.now() - pendingG > 1500) return;
  pendingG = 0;
  const to = { p: "/", i: "/inbox", s: "/status", w: "/workflows" }[e.key];
  if (to) {
    e.preventDefault();
    navigate(to);
  }
});

// Every REST call of the page. Each carries `X-Byre-CSRF`: in token mode the sign-in key the
// sign-in page stored (the session cookie alone signs nothing: every port of this host is sent
// it, while localStorage is this origin's alone; docs/security.md), elsewhere `1`. URLs the
// page hands to what cannot send headers (EventSource, WebSocket, <img>, links) carry the key
// as `signin_key` (`withKey`). A 401 sends the browser to /signin; any other failure throws an
// ApiError holding the server's `message` as is.

/** Where the sign-in page keeps the sign-in key (the same name in `/signin/signin.js`). */
const SIGNIN_KEY = "byre.signin_key";

/** The sign-in key of token mode's sign-in, or null (local and tailscale modes). */
export function signinKey() {
  try {
    return localStorage.getItem(SIGNIN_KEY);
  } catch (_) {
    return null;
  }
}

/** `url` (byre's own, a path) with the sign-in key as its `signin_key` parameter, if any. */
export function withKey(url) {
  const key = signinKey();
  if (!key || /[?&]signin_key=/.test(url)) return url;
  return `${url}${url.includes("?") ? "&" : "?"}signin_key=${encodeURIComponent(key)}`;
}

/** Ends token mode's sign-in (the server forgets the session; the key is dropped here). */
export async function signOut() {
  try {
    await fetch("/auth/signout", { method: "POST", headers: { "X-Byre-CSRF": signinKey() || "1" }, credentials: "same-origin" });
  } finally {
    try {
      localStorage.removeItem(SIGNIN_KEY);
    } catch (_) { /* storage refused: nothing kept */ }
  }
}

/** A refused or failed request: `status` and the server's `message`. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

const listeners = new Set();
/**
 * Calls `fn(error)` for every failed request (the page's error toast) that no view showed
 * itself: a view that shows the error where it happened marks it with `shownHere` in its
 * `catch`, which runs before the toast is told (a task later), so the message shows once.
 */
export function onApiError(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

/** Tells the toast about `err` a task later, unless a view has shown it by then. */
function announce(err) {
  setTimeout(() => {
    if (!err.shown) listeners.forEach((fn) => fn(err));
  }, 0);
}

/** Marks `err` as shown by the caller (no toast for it); its message. */
export function shownHere(err) {
  if (err && typeof err === "object") err.shown = true;
  return err && err.message;
}

/** One request; resolves to the parsed JSON (or null for 204 / empty bodies). */
export async function request(method, path, body, { raw = false, quiet = false } = {}) {
  const headers = { Accept: "application/json", "X-Byre-CSRF": signinKey() || "1" };
  let payload;
  if (body instanceof Blob) {
    payload = body;
    headers["Content-Type"] = body.type || "application/octet-stream";
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    headers["Content-Type"] = "application/json";
  }
  let res;
  try {
    res = await fetch(path, { method, headers, body: payload, credentials: "same-origin" });
  } catch (e) {
    const err = new ApiError(0, `byre cannot be reached (${e.message})`);
    if (!quiet) announce(err);
    throw err;
  }
  if (res.status === 401 && !location.pathname.startsWith("/signin")) {
    const back = location.pathname + location.search;
    location.assign("/signin?next=" + encodeURIComponent(back));
    throw new ApiError(401, "signed out");
  }
  if (!res.ok) {
    let message = `${res.status} ${res.statusText}`;
    try {
      const j = await res.json();
      if (j && typeof j.message === "string") message = j.message;
    } catch (_) { /* not JSON */ }
    const err = new ApiError(res.status, message);
    if (!quiet) announce(err);
    throw err;
  }
  if (raw) return res;
  if (res.status === 204) return null;
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

const q = (params) => {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") s.set(k, String(v));
  const t = s.toString();
  return t ? "?" + t : "";
};
const enc = encodeURIComponent;

/** The contract's operations the page uses, by operationId. */
export const api = {
  getMe: () => request("GET", "/api/me"),
  updateNotificationPrefs: (prefs) => request("PUT", "/api/me/notifications", prefs),
  getFocus: () => request("GET", "/api/me/focus"),
  setFocus: (focus) => request("PUT", "/api/me/focus", focus, { quiet: true }),
  setPaneFocus: (pf) => request("PUT", "/api/me/pane-focus", pf, { quiet: true }),
  getSummaryReads: () => request("GET", "/api/me/summary-reads"),
  markSummaryRead: (taskId, seq) => request("PUT", `/api/tasks/${enc(taskId)}/summary-read`, { seq }, { quiet: true }),
  listProjects: () => request("GET", "/api/projects"),
  createProject: (body) => request("POST", "/api/projects", body, { quiet: true }),
  getProject: (projectId) => request("GET", `/api/projects/${enc(projectId)}`),
  listTasks: (projectId) => request("GET", `/api/projects/${enc(projectId)}/tasks`),
  createTask: (projectId, body) => request("POST", `/api/projects/${enc(projectId)}/tasks`, body, { quiet: true }),
  getTask: (taskId) => request("GET", `/api/tasks/${enc(taskId)}`),
  listTaskEvents: (taskId, params) => request("GET", `/api/tasks/${enc(taskId)}/events${q(params)}`),
  listSessions: (taskId) => request("GET", `/api/tasks/${enc(taskId)}/sessions`),
  createSession: (taskId, body) => request("POST", `/api/tasks/${enc(taskId)}/sessions`, body, { quiet: true }),
  sendMessage: (sessionId, body) => request("POST", `/api/sessions/${enc(sessionId)}/messages`, body, { quiet: true }),
  interruptSession: (sessionId) => request("POST", `/api/sessions/${enc(sessionId)}/interrupt`, undefined, { quiet: true }),
  compactSession: (sessionId, body) => request("POST", `/api/sessions/${enc(sessionId)}/compact`, body, { quiet: true }),
  withdrawMessage: (taskId, inputId) => request("DELETE", `/api/tasks/${enc(taskId)}/queue/${enc(inputId)}`, undefined, { quiet: true }),
  uploadBlob: (blob) => request("POST", "/api/blobs", blob, { quiet: true }),
  listInbox: (params = {}) => request("GET", `/api/inbox${q(params)}`),
  respondInbox: (responses) => request("POST", "/api/inbox/responses", { responses }, { quiet: true }),
  getTaskChanges: (taskId, params) => request("GET", `/api/tasks/${enc(taskId)}/changes${q(params)}`, undefined, { quiet: true }),
  getTaskDiff: (taskId, params) => request("GET", `/api/tasks/${enc(taskId)}/diff${q(params)}`, undefined, { quiet: true }),
  getTaskDir: (taskId, path) => request("GET", `/api/tasks/${enc(taskId)}/dir${q({ path })}`, undefined, { quiet: true }),
  getTaskFile: (taskId, path) => request("GET", `/api/tasks/${enc(taskId)}/file${q({ path })}`, undefined, { quiet: true }),
  taskImageUrl: (taskId, path) => withKey(`/api/tasks/${enc(taskId)}/image${q({ path })}`),
  blobUrl: (blobId) => withKey(`/api/blobs/${enc(blobId)}`),
  listSnapshots: (taskId) => request("GET", `/api/tasks/${enc(taskId)}/snapshots`),
  forkSnapshot: (taskId, n) => request("POST", `/api/tasks/${enc(taskId)}/snapshots/${enc(n)}/fork`, undefined, { quiet: true }),
  getUnmerged: (taskId) => request("GET", `/api/tasks/${enc(taskId)}/unmerged`, undefined, { quiet: true }),
  getCoAuthors: (taskId) => request("GET", `/api/tasks/${enc(taskId)}/co-authors`, undefined, { quiet: true }),
  mergeTask: (taskId, body) => request("POST", `/api/tasks/${enc(taskId)}/merge`, body, { quiet: true }),
  mergeIn: (taskId) => request("POST", `/api/tasks/${enc(taskId)}/merge-in`, undefined, { quiet: true }),
  // `summary: false` (byre's extension): no summary turn.
  discardTask: (taskId, summary = true) => request("POST", `/api/tasks/${enc(taskId)}/discard`, summary ? undefined : { summary: false }, { quiet: true }),
  listReviews: (taskId) => request("GET", `/api/tasks/${enc(taskId)}/reviews`),
  setFindingState: (reviewId, index, findingState) => request("PUT", `/api/reviews/${enc(reviewId)}/findings/${index}`, { state: findingState }, { quiet: true }),
  stopReview: (reviewId) => request("POST", `/api/reviews/${enc(reviewId)}/stop`, undefined, { quiet: true }),
  cancelMergeAfterReview: (taskId) => request("DELETE", `/api/tasks/${enc(taskId)}/merge-after-review`, undefined, { quiet: true }),
  getTodo: (projectId) => request("GET", `/api/projects/${enc(projectId)}/todo`, undefined, { quiet: true }),
  startTodoItem: (projectId, body) => request("POST", `/api/projects/${enc(projectId)}/todo/tasks`, body, { quiet: true }),
  listWorkflows: () => request("GET", "/api/workflows"),
  /** The workflow's file as YAML text. */
  getWorkflow: async (name) => (await request("GET", `/api/workflows/${enc(name)}`, undefined, { raw: true, quiet: true })).text(),
  putWorkflow: (name, yaml) => request("PUT", `/api/workflows/${enc(name)}`, new Blob([yaml], { type: "application/yaml" }), { quiet: true }),
  deleteWorkflow: (name) => request("DELETE", `/api/workflows/${enc(name)}`, undefined, { quiet: true }),
  getTaskWorkflow: (taskId) => request("GET", `/api/tasks/${enc(taskId)}/workflow`, undefined, { quiet: true }),
  getWorkflowRun: (taskId) => request("GET", `/api/tasks/${enc(taskId)}/workflow/run`, undefined, { quiet: true }),
  messageLead: (body) => request("POST", "/api/me/lead/messages", body, { quiet: true }),
  listLeadSessions: () => request("GET", "/api/me/lead/sessions", undefined, { quiet: true }),
  listLeadEvents: (params) => request("GET", `/api/me/lead/events${q(params)}`, undefined, { quiet: true }),
  listLeadNotes: () => request("GET", "/api/me/lead/notes", undefined, { quiet: true }),
  deleteLeadNote: (noteId) => request("DELETE", `/api/me/lead/notes/${enc(noteId)}`, undefined, { quiet: true }),
  listPreviews: (taskId) => request("GET", `/api/tasks/${enc(taskId)}/previews`, undefined, { quiet: true }),
  getStatus: () => request("GET", "/api/admin/status"),
};

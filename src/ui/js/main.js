// Boot: the store's first load and stream, the router (history API), the layout.

import { html, render, useState, useEffect } from "./html.js";
import { state, subscribe, boot, setFocusHandler, viewing } from "./store.js";
import { onApiError } from "./api.js";
import { Layout } from "./views/layout.js";
import { parseRoute, navigate, onRoute } from "./router.js";

// Another window of this user moved the right pane: follow it.
setFocusHandler((focus) => {
  if (!focus.task_id) return;
  const r = parseRoute();
  if (r.name === "task" && r.taskId === focus.task_id && (r.tab || null) === (focus.tab || null)) return;
  navigate(`/tasks/${focus.task_id}${focus.tab ? `/${focus.tab}` : ""}`);
});

function App() {
  const [route, setRoute] = useState(parseRoute());
  const [, setVersion] = useState(0);
  const [error, setError] = useState(null);
  const [bootError, setBootError] = useState(null);
  viewing.taskId = route.name === "task" ? route.taskId : null;
  useEffect(() => subscribe((v) => setVersion(v)), []);
  useEffect(() => onRoute(setRoute), []);
  useEffect(() => {
    const mq = window.matchMedia("(max-width: 760px)");
    const again = () => setVersion((v) => v + 1);
    mq.addEventListener("change", again);
    return () => mq.removeEventListener("change", again);
  }, []);
  useEffect(() => onApiError((e) => {
    setError(e.message);
    setTimeout(() => setError((cur) => (cur === e.message ? null : cur)), 6000);
  }), []);
  useEffect(() => {
    const r = parseRoute();
    boot({ projectId: r.projectId, taskId: r.taskId }).catch((e) => setBootError(e.message));
  }, []);
  if (bootError && !state.me) {
    return html`<div class="boot-error"><h1>byre</h1><p>The page could not load: ${bootError}</p><button type="button" onClick=${() => location.reload()}>Try again</button></div>`;
  }
  if (!state.me) return html`<div class="booting">byre…</div>`;
  return html`<${Layout} route=${route} state=${state} />
    ${error ? html`<div class="toast" role="alert" data-testid="error-toast">${error}</div>` : null}`;
}

render(html`<${App} />`, document.getElementById("app"));

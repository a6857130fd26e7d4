// The Terminal tab: the task's shell (getTaskTerminal) in xterm.js (vendor/xterm.mjs, loaded
// when the tab first opens). Output arrives as binary messages, the scrollback first; keys go
// out as binary messages (UTF-8), the size as a TerminalSize text message whenever the tab's
// box changes size. A dropped socket reconnects with a growing pause; the screen is reset on
// each connect, so the scrollback the server sends again is drawn once. When the shell exits
// (close code 4000, the status as reason) the tab says so, and Enter or "New shell" opens
// the terminal again, which starts a new shell. Bytes never reach the page's state: the
// terminal's opens and exits arrive as `terminal.*` events like everything else.

import { html, useEffect, useRef, useState } from "../html.js";
import { withKey } from "../api.js";
import { TermKeys, withCtrl } from "./termkeys.js";

const encoder = new TextEncoder();

// xterm.js 6 styles its screen (cell sizes, colours, the scrollbar) through <style> elements,
// which the page's Content-Security-Policy (`style-src 'self'`) refuses, each refusal a
// console error. The vendored copy makes them <template>s (vendor/refresh.sh), inert and
// never shown; their text is mirrored into constructed style sheets, which that policy
// allows, as it changes. Returns the function that stops it and drops the sheets.
function mirrorStyles(root) {
  const sheets = new Map(); // <style> element -> [CSSStyleSheet, text]
  const mine = new Set();
  const sync = () => {
    for (const el of root.querySelectorAll("template")) {
      let entry = sheets.get(el);
      if (!entry) {
        entry = [new CSSStyleSheet(), null];
        sheets.set(el, entry);
        mine.add(entry[0]);
      }
      if (entry[1] !== el.textContent) {
        entry[0].replaceSync(el.textContent);
        entry[1] = el.textContent;
      }
    }
    for (const [el, [sheet]] of sheets) {
      if (!el.isConnected) {
        sheets.delete(el);
        mine.delete(sheet);
      }
    }
    const others = document.adoptedStyleSheets.filter((s) => !s.byreTerminal);
    const ours = [...mine].map((s) => Object.assign(s, { byreTerminal: true }));
    document.adoptedStyleSheets = [...others, ...ours];
  };
  const observer = new MutationObserver(sync);
  observer.observe(root, { childList: true, subtree: true, characterData: true });
  sync();
  return () => {
    observer.disconnect();
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => !mine.has(s));
  };
}

/** The terminal of `task` (an active task; a closed one has none). */
export function Terminal({ task }) {
  const box = useRef(null);
  const [status, setStatus] = useState("connecting");
  const [again, setAgain] = useState(null);
  const [ctrl, setCtrl] = useState(false);
  // The open terminal and its sender, and the sticky Ctrl, for the phone's key bar.
  const io = useRef({ term: null, send: null, ctrl: false });
  io.current.ctrl = ctrl;
  const active = task.status === "active";

  useEffect(() => {
    if (!active) return undefined;
    let term = null;
    let fit = null;
    let ws = null;
    let disposed = false;
    let retry = null;
    let pause = 500;
    let ended = false;
    let observer = null;
    let unmirror = null;

    const send = (data) => {
      if (ws && ws.readyState === WebSocket.OPEN) ws.send(data);
    };
    const connect = () => {
      if (disposed) return;
      ended = false;
      setStatus("connecting");
      setAgain(null);
      const proto = location.protocol === "https:" ? "wss:" : "ws:";
      const url = `${proto}//${location.host}${withKey(`/api/tasks/${encodeURIComponent(task.id)}/terminal?cols=${term.cols}&rows=${term.rows}`)}`;
      const socket = new WebSocket(url);
      socket.binaryType = "arraybuffer";
      ws = socket;
      socket.onopen = () => {
        if (ws !== socket) return;
        pause = 500;
        term.reset();
        setStatus("connected");
      };
      socket.onmessage = (e) => {
        if (ws === socket && typeof e.data !== "string") term.write(new Uint8Array(e.data));
      };
      socket.onclose = (e) => {
        if (disposed || ws !== socket) return;
        ws = null;
        if (e.code === 4000) {
          ended = true;
          setStatus(`exited (${e.reason})`);
          term.write(`\r\n\x1b[2m[the shell exited with status ${e.reason}; press Enter for a new one]\x1b[0m\r\n`);
          setAgain(() => connect);
          return;
        }
        setStatus("reconnecting");
        retry = setTimeout(connect, pause);
        pause = Math.min(pause * 2, 10000);
      };
    };

    (async () => {
      const [{ Terminal: XTerm }, { FitAddon }] = await Promise.all([
        import("/vendor/xterm.mjs"),
        import("/vendor/addon-fit.mjs"),
      ]);
      if (disposed) return;
      term = new XTerm({ cursorBlink: true, fontSize: 13, scrollback: 5000 });
      fit = new FitAddon();
      term.loadAddon(fit);
      unmirror = mirrorStyles(box.current);
      term.open(box.current);
      fit.fit();
      io.current.term = term;
      io.current.send = (d) => send(encoder.encode(d));
      term.onData((d) => {
        if (ended) {
          if (d === "\r") connect();
          return;
        }
        if (io.current.ctrl) {
          d = withCtrl(d);
          setCtrl(false);
        }
        send(encoder.encode(d));
      });
      term.onBinary((d) => send(Uint8Array.from(d, (c) => c.charCodeAt(0))));
      term.onResize(({ cols, rows }) => send(JSON.stringify({ cols, rows })));
      observer = new ResizeObserver(() => {
        try { fit.fit(); } catch (_) { /* hidden: no size */ }
      });
      observer.observe(box.current);
      term.focus();
      connect();
    })();

    return () => {
      disposed = true;
      clearTimeout(retry);
      if (observer) observer.disconnect();
      if (ws) ws.close();
      if (term) term.dispose();
      if (unmirror) unmirror();
      io.current.term = null;
      io.current.send = null;
    };
  }, [task.id, active]);

  if (!active) {
    return html`<div class="pane-body"><p class="hint">This task is ${task.status}: it has no terminal.</p></div>`;
  }
  const onKey = (seq) => {
    const { term, send } = io.current;
    if (!term || !send) return;
    send(seq(term.modes.applicationCursorKeysMode));
    setCtrl(false);
    term.focus();
  };
  return html`<div class="pane-body terminal-tab">
    <div class="terminal-bar">
      <span class="hint" data-testid="terminal-status">${status}</span>
      ${again ? html`<button type="button" data-testid="terminal-new" onClick=${() => again()}>New shell</button>` : null}
    </div>
    <${TermKeys} ctrl=${ctrl} onCtrl=${setCtrl} onKey=${onKey} />
    <div class="terminal-box" data-testid="terminal" ref=${box}></div>
  </div>`;
}

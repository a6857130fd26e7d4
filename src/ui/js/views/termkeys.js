// The keys a phone's keyboard lacks, above the Terminal tab's screen: Esc, Tab, Ctrl and the
// arrows (shown on narrow screens only, by the style sheet). Ctrl is a sticky modifier: tapped,
// it applies to the next key typed, then lets go. The buttons never take the focus from the
// terminal, so the phone's keyboard stays up.

import { html } from "../html.js";

/** The keys, each with the bytes it sends (arrows as the terminal's cursor mode wants). */
const KEYS = [
  { label: "Esc", seq: () => "\x1b" },
  { label: "Tab", seq: () => "\t" },
  { label: "←", title: "Left", seq: (app) => (app ? "\x1bOD" : "\x1b[D") },
  { label: "↑", title: "Up", seq: (app) => (app ? "\x1bOA" : "\x1b[A") },
  { label: "↓", title: "Down", seq: (app) => (app ? "\x1bOB" : "\x1b[B") },
  { label: "→", title: "Right", seq: (app) => (app ? "\x1bOC" : "\x1b[C") },
];

/** `data` as typed with Ctrl held: a letter or one of @ [ \ ] ^ _ becomes its control code. */
export function withCtrl(data) {
  if (data.length !== 1) return data;
  const c = data.toUpperCase().charCodeAt(0);
  if (c >= 64 && c <= 95) return String.fromCharCode(c - 64);
  if (data === " ") return "\0";
  return data;
}

/**
 * The bar. `onKey(app => bytes)` sends a key (given whether the terminal is in application
 * cursor mode); `ctrl` and `onCtrl` are the sticky Ctrl's state.
 */
export function TermKeys({ onKey, ctrl, onCtrl }) {
  const keep = (e) => e.preventDefault(); // the terminal keeps the focus
  return html`<div class="term-keys" data-testid="terminal-keys" role="toolbar" aria-label="Terminal keys">
    <button type="button" data-testid="terminal-key-ctrl" aria-pressed=${ctrl} onPointerDown=${keep} onMouseDown=${keep} onClick=${() => onCtrl(!ctrl)}>Ctrl</button>
    ${KEYS.map((k) => html`<button type="button" data-testid=${`terminal-key-${(k.title || k.label).toLowerCase()}`} title=${k.title || k.label}
      onPointerDown=${keep} onMouseDown=${keep} onClick=${() => onKey(k.seq)}>${k.label}</button>`)}
  </div>`;
}

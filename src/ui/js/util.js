// Small helpers shared by the views.

/** "3 min ago"-style time for an RFC 3339 string; the exact time is in the title. */
export function ago(iso) {
  if (!iso) return "";
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (s < 45) return "just now";
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  if (s < 86400 * 30) return `${Math.round(s / 86400)} d ago`;
  return new Date(iso).toLocaleDateString();
}

/** Local date and time, for titles. */
export function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}

/** Short commit id. */
export const short = (sha) => (sha || "").slice(0, 8);

/** The UI's 12-colour task palette, indexed by Task.color. */
export const PALETTE = [
  "#d1495b", "#e07a1f", "#c9a227", "#6a994e", "#2a9d8f", "#1d7fb8",
  "#4f5fd1", "#8e5bd1", "#c2549d", "#8a6a4f", "#5c7a7a", "#7c8b2b",
];
export const taskColor = (t) => PALETTE[((t && t.color) || 0) % PALETTE.length];

/** Human words for Task.state. */
export const STATE_LABEL = {
  running: "running", idle: "idle", review_pending: "review pending", reviewing: "reviewing",
  merging: "merging", discarding: "discarding", merged: "merged", discarded: "discarded",
  no_agent: "no agent",
};

/** Tokens as "12.3k". */
export function tokens(n) {
  if (!n) return "0";
  return n >= 1000 ? `${(n / 1000).toFixed(n >= 10000 ? 0 : 1)}k` : String(n);
}

/** Milliseconds as "1.2 s" / "3 min". */
export function duration(ms) {
  if (ms == null) return "";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 60000)} min`;
}

/** JSON for display. */
export function pretty(v) {
  if (typeof v === "string") return v;
  try {
    return JSON.stringify(v, null, 2);
  } catch (_) {
    return String(v);
  }
}

/** Whether the window is phone-sized (one column). */
export const isPhone = () => window.matchMedia("(max-width: 760px)").matches;

// A windowed list for long transcripts: only the items within the viewport and a margin are
// in the DOM; the rest are two spacers whose heights come from measured (or estimated) item
// heights. It sticks to the bottom while the reader is there, keeps the first visible item
// in place when items are added above (a page of earlier events) or change height, and
// asks for more when scrolled near the top.

import { html, useRef, useState, useLayoutEffect, useEffect } from "./html.js";

const lowerBound = (arr, n, x) => {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (arr[mid + 1] <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
};

/**
 * Brings every list on the page back to its bottom and keeps it there as new items arrive
 * (the composer calls it after the user sends, so their message and the reply are in view
 * even when they had scrolled up to read).
 */
export function stickToBottom() {
  window.dispatchEvent(new Event("byre:vlist-bottom"));
}

/**
 * props: items, itemKey(item) → string, renderItem(item) → vnode, estimate (px),
 * onNearTop(auto) (auto: to fill the view, not because the reader scrolled), testid, header
 * and footer (vnodes before and after the items).
 */
export function VList({ items, itemKey, renderItem, estimate = 72, onNearTop, testid, footer, header }) {
  const ref = useRef(null);
  const inner = useRef(null);
  const heights = useRef(new Map());
  const [, setTick] = useState(0);
  const [view, setView] = useState({ top: 0, height: 900 });
  const stick = useRef(true);
  const anchor = useRef(null);
  const n = items.length;
  const offsets = new Float64Array(n + 1);
  for (let i = 0; i < n; i++) {
    const h = heights.current.get(itemKey(items[i]));
    offsets[i + 1] = offsets[i] + (h === undefined ? estimate : h);
  }
  const total = offsets[n];
  const overscan = Math.max(600, view.height);
  const top = stick.current ? Math.max(0, total - view.height) : view.top;
  let start = lowerBound(offsets, n, top - overscan);
  let end = Math.min(n, lowerBound(offsets, n, top + view.height + overscan) + 1);
  if (start > end) start = end;
  const shown = items.slice(start, end);

  const measure = () => {
    const box = inner.current;
    if (!box) return false;
    let changedAny = false;
    for (const el of box.children) {
      const key = el.dataset && el.dataset.vkey;
      if (key === undefined) continue;
      const h = el.getBoundingClientRect().height;
      if (heights.current.get(key) !== h) {
        heights.current.set(key, h);
        changedAny = true;
      }
    }
    return changedAny;
  };

  useLayoutEffect(() => {
    const el = ref.current;
    if (!el) return;
    if (measure()) {
      setTick((t) => t + 1);
      return;
    }
    if (onNearTop && (total < view.height + 400 || el.scrollTop < 400)) onNearTop(true);
    if (stick.current) {
      el.scrollTop = el.scrollHeight;
    } else if (anchor.current) {
      const idx = items.findIndex((it) => itemKey(it) === anchor.current.key);
      if (idx >= 0) {
        const want = offsets[idx] + anchor.current.delta;
        if (Math.abs(el.scrollTop - want) > 1) el.scrollTop = want;
      }
    }
  });

  useEffect(() => {
    const el = ref.current;
    if (!el || typeof ResizeObserver === "undefined") return undefined;
    const ro = new ResizeObserver(() => {
      if (measure()) setTick((t) => t + 1);
      setView((v) => (v.height === el.clientHeight ? v : { ...v, height: el.clientHeight }));
    });
    ro.observe(el);
    if (inner.current) ro.observe(inner.current);
    const bottom = () => {
      stick.current = true;
      setTick((t) => t + 1);
    };
    window.addEventListener("byre:vlist-bottom", bottom);
    return () => {
      ro.disconnect();
      window.removeEventListener("byre:vlist-bottom", bottom);
    };
  }, []);

  const onScroll = () => {
    const el = ref.current;
    const t = el.scrollTop;
    stick.current = el.scrollHeight - t - el.clientHeight < 32;
    const idx = Math.min(n - 1, lowerBound(offsets, n, t));
    anchor.current = idx >= 0 && n > 0 ? { key: itemKey(items[idx]), delta: t - offsets[idx] } : null;
    setView({ top: t, height: el.clientHeight });
    if (t < 400 && onNearTop) onNearTop(false);
  };

  return html`<div class="vlist" ref=${ref} onScroll=${onScroll} data-testid=${testid} tabindex="0">
    ${header}
    <div class="vspace" style=${{ height: `${offsets[start]}px` }}></div>
    <div ref=${inner}>
      ${shown.map((it) => html`<div key=${itemKey(it)} data-vkey=${itemKey(it)} class="vitem">${renderItem(it)}</div>`)}
    </div>
    <div class="vspace" style=${{ height: `${total - offsets[end]}px` }}></div>
    ${footer}
  </div>`;
}

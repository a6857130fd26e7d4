// Preact, its hooks and htm, re-exported so views import one module.
import { h, render, Fragment, createContext, Component } from "../vendor/preact.module.js";
import {
  useState, useEffect, useLayoutEffect, useRef, useMemo, useCallback, useReducer, useContext,
} from "../vendor/hooks.module.js";
import htm from "../vendor/htm.module.js";

/** `html\`<div>…</div>\``: htm bound to Preact's `h`. */
export const html = htm.bind(h);
export {
  h, render, Fragment, createContext,
  useState, useEffect, useLayoutEffect, useRef, useMemo, useCallback, useReducer, useContext,
};

/** `memo(Fn)`: re-renders only when a prop changed (shallow, by identity). */
export function memo(Fn) {
  class Memo extends Component {
    shouldComponentUpdate(next) {
      const a = this.props;
      for (const k in next) if (next[k] !== a[k]) return true;
      for (const k in a) if (!(k in next)) return true;
      return false;
    }
    render(props) {
      return h(Fn, props);
    }
  }
  Memo.displayName = `memo(${Fn.name})`;
  return Memo;
}

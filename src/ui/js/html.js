// Preact, its hooks and htm, re-exported so views import one module.
import { h, render, Fragment, createContext } from "../vendor/preact.module.js";
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

// The sign-in page: trades the access token for byre's session cookie and a sign-in key
// (POST /auth/signin, docs/operating.md "Signing in from a browser"), keeps the key in
// localStorage (this origin's alone: the cookie reaches every port of the host, the key does
// not), then goes where the visitor was headed. Already signed in (a key that still works),
// it goes on at once.

/** Where the key is kept (the same name in `/js/api.js`, which sends it). */
const SIGNIN_KEY = "byre.signin_key";

/**
 * Where to go after signing in: `next` when it resolves to a page of this server, else `/`.
 * The browser's own URL parser decides (it drops tabs and newlines and reads `//host`, `/\host`
 * and `/%09/host` as another site), and the answer is the absolute URL it resolved to, so it
 * is always byre's own origin.
 */
function destination() {
  const next = new URLSearchParams(location.search).get("next") || "/";
  let url;
  try {
    url = new URL(next, location.origin);
  } catch {
    return "/";
  }
  if (url.origin !== location.origin || !next.startsWith("/")) return "/";
  // The whole URL, not its path: dot segments resolve `/.//evil.example` to the path
  // `//evil.example`, which read again as a relative URL is another site.
  return url.href;
}

/** The stored sign-in key, or null. */
function storedKey() {
  try {
    return localStorage.getItem(SIGNIN_KEY);
  } catch {
    return null;
  }
}

// A page load cannot show the key, so the server always sends this page: go on when the key
// kept here still signs in.
(async () => {
  const key = storedKey();
  if (!key) return;
  try {
    const res = await fetch("/api/me", { headers: { "X-Byre-CSRF": key }, credentials: "same-origin" });
    if (res.ok) location.replace(destination());
  } catch {
    // byre unreachable: the form stays
  }
})();

const form = document.getElementById("signin");
const input = document.getElementById("token");
const error = document.getElementById("error");
const button = form.querySelector("button");

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  error.hidden = true;
  button.disabled = true;
  try {
    const res = await fetch("/auth/signin", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Byre-CSRF": "1" },
      body: JSON.stringify({ token: input.value.trim() }),
      credentials: "same-origin",
    });
    if (res.ok) {
      const { signin_key: key } = await res.json();
      try {
        localStorage.setItem(SIGNIN_KEY, key);
      } catch {
        error.textContent = "this browser refuses to store the sign-in (site data blocked): allow it for this site";
        error.hidden = false;
        button.disabled = false;
        return;
      }
      location.replace(destination());
      return;
    }
    let message = `sign-in failed (${res.status})`;
    try {
      message = (await res.json()).message || message;
    } catch {
      // not JSON: keep the status
    }
    error.textContent = message;
  } catch (e) {
    error.textContent = `cannot reach byre: ${e.message}`;
  }
  error.hidden = false;
  button.disabled = false;
  input.select();
});

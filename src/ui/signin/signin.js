// The sign-in page: trades the access token for byre's session cookie (POST /auth/signin,
// README.md "Authentication"), then goes where the visitor was headed.

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

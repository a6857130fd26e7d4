// The sign-in page: trades the access token for byre's session cookie (POST /auth/signin,
// README.md "Authentication"), then goes where the visitor was headed.

/** Where to go after signing in: `next` when it is a path on this server, else `/`. */
function destination() {
  const next = new URLSearchParams(location.search).get("next") || "/";
  // Only a local path: "/x", never "//host" or "/\host", which browsers read as another site.
  return /^\/(?![/\\])/.test(next) ? next : "/";
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

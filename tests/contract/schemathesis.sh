#!/usr/bin/env bash
# Runs schemathesis with every check against a fresh byre, through the contract byre serves
# at /api/openapi.yaml (schema/byre.openapi.yaml as built in), and fails on any finding: a
# status, header, content type or body the contract does not give, a body it calls valid
# refused, one it calls invalid accepted, a 5xx. docs/contract.md says what it runs and why.
#
# Usage: tests/contract/schemathesis.sh [extra `st run` options]
# Environment:
#   BYRE_BIN           the byre binary to test (default: `cargo build --locked`, target/debug/byre)
#   BYRE_ST_EXAMPLES   examples per operation in the fuzzing phase (default 30)
#   BYRE_ST_SEED       the generation seed (default: a fixed one, so CI runs are repeatable;
#                      `random` for a new one each run)
#   BYRE_ST_VENV       where schemathesis is installed (default target/st-venv)
#   BYRE_ST_REPORT     a directory for st's JUnit report and the server's log (default: none kept)
# Needs python3 with venv and pip, git, and the network once (pip install).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

# The schemathesis release the contract is checked with. A newer one may add checks: raise it
# on purpose, run this script, and fix what it finds.
st_version=4.32.5
venv=${BYRE_ST_VENV:-$root/target/st-venv}
examples=${BYRE_ST_EXAMPLES:-30}
seed=${BYRE_ST_SEED:-28}

say() { printf 'schemathesis.sh: %s\n' "$*" >&2; }

# 1. schemathesis, into a venv of its own (kept between runs; remade when the pin changes).
if [ "$("$venv/bin/st" --version 2>/dev/null || true)" != "st, version $st_version" ]; then
  say "installing schemathesis $st_version into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$st_version"
fi

# 2. byre.
if [ -z "${BYRE_BIN:-}" ]; then
  cargo build --locked --quiet -p byre --bin byre
  BYRE_BIN=${CARGO_TARGET_DIR:-$root/target}/debug/byre
fi

# 3. A temp data dir and a repository made from fixtures/repos/basic (as tests/api's make_repo).
tmp=$(mktemp -d "${TMPDIR:-/tmp}/byre-st.XXXXXX")
byre_pid=
cleanup() {
  if [ -n "$byre_pid" ]; then
    kill -TERM "$byre_pid" 2>/dev/null || true
    wait "$byre_pid" 2>/dev/null || true
  fi
  if [ -n "${BYRE_ST_REPORT:-}" ]; then
    mkdir -p "$BYRE_ST_REPORT"
    cp "$tmp/byre.log" "$BYRE_ST_REPORT/" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/data" "$tmp/repo"
cp -R fixtures/repos/basic/. "$tmp/repo/"
git -C "$tmp/repo" init --quiet --initial-branch=main
git -C "$tmp/repo" add --all
git -C "$tmp/repo" -c user.name=Fixture -c user.email=fixture@example.com \
  commit --quiet -m "Initial commit"

# 4. byre on a free loopback port (port 0; the listening line says which), local mode (no
# auth). No agent CLI is found (the program names lead nowhere), so an operation that would
# start an agent never runs a real one; reviews are off for the same reason.
fifo=$tmp/stdout
mkfifo "$fifo"
BYRE_CLAUDE_BIN=$tmp/no-claude BYRE_CODEX_BIN=$tmp/no-codex \
  "$BYRE_BIN" serve --listen 127.0.0.1:0 --data "$tmp/data" --login st --reviews false \
  >"$fifo" 2>"$tmp/byre.log" &
byre_pid=$!
exec 3<"$fifo"
url=
while IFS= read -r -u 3 line; do
  case $line in
    "byre listening on "*) url=${line#byre listening on }; url=${url%% *}; break ;;
  esac
done
if [ -z "$url" ]; then
  say "byre did not start:"
  cat "$tmp/byre.log" >&2
  exit 1
fi
# Keep draining byre's stdout so it never blocks on a full pipe.
cat <&3 >/dev/null &
exec 3<&-
say "byre $url (pid $byre_pid)"

# 5. A project on the repository and a task in it, so the operations on ids have one to hit.
post() {
  python3 - "$url$1" "$2" <<'EOF'
import json, sys, urllib.request
req = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method="POST",
                             headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req) as r:
    print(json.load(r)["id"])
EOF
}
project_id=$(post /api/projects "{\"name\": \"basic\", \"repo_path\": \"$tmp/repo\"}")
task_id=$(post "/api/projects/$project_id/tasks" '{"title": "contract"}')
say "project $project_id, task $task_id"

# 6. st with every check, configured by tests/contract/schemathesis.toml.
# st is a non-browser client: it says so on its body-less POSTs, as docs/edge.md asks of curl.
export BYRE_ST_PROJECT_ID=$project_id BYRE_ST_TASK_ID=$task_id
export BYRE_ST_HOOKS=$root/tests/contract/hooks.py
report=()
if [ -n "${BYRE_ST_REPORT:-}" ]; then
  report=(--report junit --report-dir "$BYRE_ST_REPORT")
fi
seed_option=()
if [ "$seed" != random ]; then
  seed_option=(--seed "$seed")
fi
status=0
"$venv/bin/st" --config-file tests/contract/schemathesis.toml run "$url/api/openapi.yaml" \
  --checks all \
  --max-examples "$examples" \
  "${seed_option[@]}" \
  --workers 2 \
  --no-color \
  --header 'X-Byre-CSRF: 1' \
  "${report[@]}" \
  "$@" || status=$?
if [ "$status" -ne 0 ]; then
  say "schemathesis found the contract and byre disagreeing (exit $status); byre's log:"
  tail -n 40 "$tmp/byre.log" >&2
fi
exit "$status"

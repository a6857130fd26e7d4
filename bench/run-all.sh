#!/usr/bin/env bash
# Runs every benchmark of bench/README.md in release mode and saves the output in
# bench/results/<UTC date>.txt. The machine is shared: each bench waits (up to 10 minutes) until
# no rustc has run for 10 s; a bench that starts while one runs prints a NOTE line.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p byre-bench
# A private copy, so that a concurrent build cannot replace the binary mid-run.
BIN=$(mktemp /tmp/byre-bench.XXXXXX)
cp target/release/byre-bench "$BIN"
trap 'rm -f "$BIN"' EXIT
mkdir -p bench/results
OUT=bench/results/$(date -u +%Y-%m-%dT%H%MZ).txt

wait_idle() {
    local quiet=0 waited=0
    while [ "$quiet" -lt 10 ] && [ "$waited" -lt 600 ]; do
        if pgrep -x rustc >/dev/null; then quiet=0; else quiet=$((quiet + 1)); fi
        sleep 1
        waited=$((waited + 1))
    done
}

run() {
    wait_idle
    echo "== byre-bench $* ($(date -u +%H:%M:%SZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
    "$BIN" "$@"
    echo
}

{
    echo "# $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src projections || echo ' + uncommitted changes in src/ or projections/')"
    echo "# $(nproc) cores, $(uname -r)"
    run plain-redb --producers 1 --seconds 10
    run append --producers 1 --seconds 10
    run plain-redb --producers 8 --seconds 10
    run append --producers 8 --seconds 10
    run rebuild --events 1000000 --runs 5
    run fanout --clients 1000 --rate 100 --seconds 20
} 2>&1 | tee "$OUT"
echo "saved $OUT"

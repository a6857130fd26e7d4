#!/usr/bin/env bash
# Runs every benchmark of bench/README.md in release mode and saves the output in
# bench/results/<UTC date>.txt. The machine is shared: each bench waits (up to 10 minutes) for
# 10 idle seconds, and reports how much CPU other processes used while it ran.
set -euo pipefail
cd "$(dirname "$0")/.."
# Priority over other sessions' processes: with the kernel's autogroup scheduling, nice alone only
# ranks the processes of one session. Needs root; skipped otherwise.
{ echo -15 >/proc/self/autogroup; } 2>/dev/null || true
# BYRE_BENCH_BIN: a binary built elsewhere (e.g. from a clean checkout while the work tree does
# not build); by default, build this tree's.
SRC=${BYRE_BENCH_BIN:-}
if [ -z "$SRC" ]; then
    cargo build --release -p byre-bench -p byre
    SRC=target/release/byre-bench
fi
# The `byre` that state-memory starts: the one built with the bench binary.
: "${BYRE_BENCH_BYRE:=$(cd "$(dirname "$SRC")" && pwd)/byre}"
# A private copy, so that a concurrent build cannot replace the binary mid-run.
BIN=$(mktemp /tmp/byre-bench.XXXXXX)
cp "$SRC" "$BIN"
chmod 755 "$BIN"
trap 'rm -f "$BIN"' EXIT
mkdir -p bench/results
OUT=bench/results/$(date -u +%Y-%m-%dT%H%MZ).txt

# Busy CPU ticks of the whole machine (user nice system irq softirq steal).
busy_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }

# Waits (up to BYRE_BENCH_IDLE_WAIT seconds, default 600) until, for 10 s in a row, no rustc
# runs and the machine used less than 20% of a core.
wait_idle() {
    local quiet=0 waited=0 before after limit=${BYRE_BENCH_IDLE_WAIT:-600}
    while [ "$quiet" -lt 10 ] && [ "$waited" -lt "$limit" ]; do
        before=$(busy_ticks)
        sleep 1
        after=$(busy_ticks)
        if pgrep -x rustc >/dev/null || [ $((after - before)) -gt 20 ]; then
            quiet=0
        else
            quiet=$((quiet + 1))
        fi
        waited=$((waited + 1))
    done
    [ "$quiet" -ge 10 ] || echo "NOTE: the machine did not become idle within $limit s"
}

run() {
    wait_idle
    echo "== byre-bench $* ($(date -u +%H:%M:%SZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
    "$BIN" "$@"
    echo
}

{
    if [ -n "${BYRE_BENCH_BIN:-}" ]; then
        echo "# binary: $BYRE_BENCH_BIN (${BYRE_BENCH_REV:-revision not given})"
    else
        echo "# $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src projections || echo ' + uncommitted changes in src/ or projections/')"
    fi
    echo "# $(nproc) cores, $(uname -r)"
    run plain-redb --producers 1 --seconds 10
    run append --producers 1 --seconds 10
    run plain-redb --producers 8 --seconds 10
    run plain-redb --producers 8 --seconds 10 --single-writer
    run append --producers 8 --seconds 10
    run append --producers 8 --seconds 25 --state-events 1000000
    run rebuild --events 1000000 --runs 5
    run startup --events 1000000 --runs 3
    run fanout --clients 1000 --rate 100 --seconds 20
    run fanout --clients 5000 --rate 20 --seconds 20
    run vendor-latency --lines 2000 --rate 200
    run state-memory --events 1000000 --burst 20000 --byre "$BYRE_BENCH_BYRE"
    # ~10 minutes and 3 GiB of disk: only when asked.
    if [ -n "${BYRE_BENCH_LONG:-}" ]; then
        run startup --events 10000000 --runs 1
    fi
    # The pinned Claude Code (BYRE_TEST_CACHE, as the tests install it) against the fake model.
    run agents --sessions 20 --turns 2 --byre "$BYRE_BENCH_BYRE"
    run git-box --files 2000 --rounds 30 --byre "$BYRE_BENCH_BYRE"
} 2>&1 | tee "$OUT"
echo "saved $OUT"

#!/usr/bin/env bash
# Callgrind instructions per call of one `dispatch_overhead` scenario: runs the scenario with two
# iteration counts and prints (total(N2) - total(N1)) / (N2 - N1), which cancels start-up.
#   scripts/instr-per-call.sh SCENARIO [N1 N2]
# Set BIN to measure another build of the example (default target/release/examples/dispatch_overhead;
# build it with `cargo build --release --example dispatch_overhead`).
set -euo pipefail
scenario=${1:?usage: instr-per-call.sh SCENARIO [N1 N2]}
n1=${2:-1000}
n2=${3:-2000}
bin=${BIN:-target/release/examples/dispatch_overhead}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
total() {
    valgrind --tool=callgrind --callgrind-out-file="$dir/out.$1" "$bin" "$scenario" "$1" \
        >/dev/null 2>"$dir/err.$1"
    sed -n 's/^summary: //p' "$dir/out.$1"
}
t1=$(total "$n1")
t2=$(total "$n2")
awk -v s="$scenario" -v t1="$t1" -v t2="$t2" -v n1="$n1" -v n2="$n2" \
    'BEGIN { printf "%s: %.1f instructions per call\n", s, (t2 - t1) / (n2 - n1) }'

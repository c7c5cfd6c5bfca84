#!/usr/bin/env bash
# Where the instructions of one call of a `dispatch_overhead` scenario go, function by function:
# runs the scenario under callgrind with 2N iterations and with N, and prints for each
# function the difference of the two runs divided by N: its own instructions per call (code
# inlined into it from other files included) and its inclusive ones (itself and its callees),
# largest own cost first. Start-up, and set-up done on a scenario's first call (the global
# dispatcher's registration), cancel out; a function called once per K iterations shows a
# 1/K share.
#   scripts/callgrind-functions.sh SCENARIO [N] [LINES]
# Set BIN to profile another build of the example (default target/release/examples/
# dispatch_overhead; build it with `cargo build --release --example dispatch_overhead`).
# To compare two builds, run it once with each BIN and diff the outputs.
set -euo pipefail
scenario=${1:?usage: callgrind-functions.sh SCENARIO [N] [LINES]}
n=${2:-10000}
lines=${3:-40}
bin=${BIN:-target/release/examples/dispatch_overhead}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# "COST<TAB>FUNCTION" per function of a callgrind output: own costs summed over the files the
# function's code comes from; inclusive costs, the largest entry of the function.
by_function() { # FILE inclusive(yes|no)
    callgrind_annotate --auto=no --inclusive="$2" --threshold=100 "$1" 2>/dev/null | awk -v incl="$2" '
        /^ *[0-9,]+ \([ 0-9.%]+\)  / {
            cost = $1; gsub(",", "", cost); cost += 0
            entry = $0
            sub(/^ *[0-9,]+ \([ 0-9.%]+\) +/, "", entry)
            sub(/ \[[^]]*\]$/, "", entry)
            if (entry == "PROGRAM TOTALS") next
            fn = substr(entry, index(entry, ":") + 1)
            if (incl == "yes") { if (cost > total[fn]) total[fn] = cost }
            else total[fn] += cost
        }
        END { for (fn in total) printf "%d\t%s\n", total[fn], fn }' | sort -t $'\t' -k2
}

profile() { # ITERATIONS
    valgrind --tool=callgrind --callgrind-out-file="$dir/out.$1" "$bin" "$scenario" "$1" \
        >/dev/null 2>"$dir/err.$1"
    by_function "$dir/out.$1" no >"$dir/self.$1"
    by_function "$dir/out.$1" yes >"$dir/incl.$1"
}

base=$n
n=$((2 * base))
profile "$n"
profile "$base"
# Per call: (cost with 2N iterations - cost with N) / N, for self and inclusive.
per_call() { # KIND
    join -t $'\t' -1 2 -2 2 -a 1 -e 0 -o 0,1.1,2.1 "$dir/$1.$n" "$dir/$1.$base" |
        awk -F'\t' -v n="$base" '{ printf "%s\t%.1f\n", $1, ($2 - $3) / n }' | sort -t $'\t' -k1,1
}
per_call self >"$dir/self"
per_call incl >"$dir/incl"
total=$(($(sed -n 's/^summary: //p' "$dir/out.$n") - $(sed -n 's/^summary: //p' "$dir/out.$base")))
awk -v t="$total" -v n="$base" -v s="$scenario" \
    'BEGIN { printf "%s: %.1f instructions per call\n%8s %8s  %s\n", s, t / n, "self", "incl", "function" }'
join -t $'\t' -a 1 -e 0 -o 0,1.2,2.2 "$dir/self" "$dir/incl" |
    awk -F'\t' '$2 >= 1 || $2 <= -1 { printf "%8.1f %8.1f  %s\n", $2, $3, $1 }' |
    sort -rn | head -n "$lines"

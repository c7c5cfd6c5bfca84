#!/usr/bin/env bash
# The dispatch speed guard run by CI: counts callgrind instructions per call of each scenario in
# scripts/dispatch-budget.txt (release build of examples/dispatch_overhead, the two-iteration-count
# method of scripts/instr-per-call.sh) and fails when one exceeds its budget.
#   scripts/dispatch-budget.sh            build the example, measure, compare
#   NO_BUILD=1 scripts/dispatch-budget.sh use the binary already built (BIN, as instr-per-call.sh)
# A budget is the figure measured when it was set plus about 10%: a change that makes a call
# dearer than that must say why in the commit that raises the budget.
set -euo pipefail
cd "$(dirname "$0")/.."
budgets=${BUDGETS:-scripts/dispatch-budget.txt}
if [[ -z "${NO_BUILD:-}" ]]; then
    cargo build --release --example dispatch_overhead
fi
command -v valgrind >/dev/null || { echo "dispatch-budget: valgrind is not installed" >&2; exit 1; }
failed=0
while read -r scenario budget _; do
    [[ -z "$scenario" || "$scenario" == \#* ]] && continue
    line=$(scripts/instr-per-call.sh "$scenario")
    per_call=$(sed -n 's/^[^:]*: \([0-9.]*\) instructions per call$/\1/p' <<<"$line")
    if [[ -z "$per_call" ]]; then
        echo "dispatch-budget: could not measure $scenario: $line" >&2
        exit 1
    fi
    if awk -v x="$per_call" -v b="$budget" 'BEGIN { exit !(x <= b) }'; then
        printf '%-26s %8s instructions per call (budget %s): ok\n' "$scenario" "$per_call" "$budget"
    else
        printf '%-26s %8s instructions per call (budget %s): OVER BUDGET\n' "$scenario" "$per_call" "$budget"
        failed=1
    fi
done <"$budgets"
if ((failed)); then
    echo "dispatch-budget: a dispatch scenario exceeds its budget (scripts/dispatch-budget.txt)" >&2
    exit 1
fi

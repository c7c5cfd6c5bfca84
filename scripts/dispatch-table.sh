#!/usr/bin/env bash
# Prints the README's dispatch table: callgrind instructions per call of each
# examples/dispatch_overhead scenario (scripts/instr-per-call.sh), beside libtorch 2.15's figures
# for the same calls (measured with the same method on the development machine, fixed here).
#   scripts/dispatch-table.sh            build the example (release), measure, print
#   NO_BUILD=1 scripts/dispatch-table.sh use the binary already built
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${NO_BUILD:-}" ]]; then
    cargo build --release --example dispatch_overhead >&2
fi
# scenario|description|libtorch
rows=(
    "call|typed call, CPU kernel returning its argument|234"
    "call_autograd_keys|Autograd kernel that redispatches|355"
    "call_boxed|boxed call, reused stack, arguments pushed with \`push\`|489"
    "boxed_fallback|typed call into a boxed fallback|757"
    "add_1elem|\`ops::add\` of 1-element tensors, whole stack|5297"
    "add_1elem_below_autograd|the same with the Autograd keys excluded|"
    "add_1elem_requires_grad|records the node, generated kernel|10694"
    "meta_add_1elem|\`ops::add\` of 1-element Meta tensors: the structured meta function and the output's allocation|"
    "lazy_add_1elem|\`ops::add\` of 1-element lazy values, called below the functionalization layer as it calls them, captured by a typed kernel: node, metadata from a shape rule, lazy tensor; a \`lazy::sync()\` every 100 captures, as a training step ends, its share included|"
    "lazy_add_1elem_long|the same on \`int64\` tensors, which no shape rule takes: metadata from the Meta kernel|"
    "add_1elem_autocast|inside a CPU autocast region; \`add\` falls through Autocast|"
    "add_1elem_empty_mode|under a dispatch mode that only runs the call|"
    "add_1elem_traced|recorded by \`switchboard::trace\`: node, output metadata, value map|"
    "add_1elem_functionalized|two functional tensors under functionalization: unwrap, \`add\` on the values, wrap|"
)
echo "| scenario | Switchboard | libtorch |"
echo "|---|---|---|"
for row in "${rows[@]}"; do
    IFS='|' read -r scenario description libtorch <<<"$row"
    line=$(scripts/instr-per-call.sh "$scenario")
    per_call=$(sed -n 's/^[^:]*: \([0-9.]*\) instructions per call$/\1/p' <<<"$line")
    printf '| `%s` (%s) | %.0f | %s |\n' "$scenario" "$description" "$per_call" "$libtorch"
done

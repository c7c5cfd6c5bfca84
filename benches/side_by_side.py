#!/usr/bin/env python3
"""Side-by-side training speed: alternates PyTorch (`benches/pytorch_train_step.py`) and
Switchboard (`examples/compute_bench`) runs of the same workloads and prints the README's table.

    cargo build --release -p switchboard-cli --example compute_bench
    python3 benches/side_by_side.py --python VENV/bin/python [--rounds 5] [--steps 50] \
        [--threads 2] [--readme]

Each round runs both sides once (the order alternates between rounds); a side's figure is the
median over rounds of its per-run median step time (and the minimum of its per-run minima).
The load average before and after is printed with the table: the figures mean something only
on an otherwise idle machine. With `--readme`, the table also replaces the one between the
README's `side_by_side.py` markers. Run by hand, not by CI (it needs PyTorch).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHES = ["mlp_train_step", "cnn_train_step"]


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return {r["bench"]: r for r in map(json.loads, filter(None, out.splitlines()))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--python", required=True, help="a Python with torch and numpy")
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/examples/compute_bench"))
    ap.add_argument("--readme", action="store_true", help="write the table into README.md")
    ap.add_argument("benches", nargs="*", default=BENCHES)
    a = ap.parse_args()
    common = [str(a.steps), str(a.threads), *a.benches]
    sides = {
        "pytorch": [a.python, os.path.join(ROOT, "benches/pytorch_train_step.py"), *common],
        "switchboard": [a.bin, *common],
    }
    load_before = os.getloadavg()
    runs = {s: [] for s in sides}
    version = ""
    for r in range(a.rounds):
        order = list(sides) if r % 2 == 0 else list(sides)[::-1]
        for side in order:
            res = run(sides[side])
            runs[side].append(res)
            if side == "pytorch":
                version = next(iter(res.values()))["impl"].split()[-1]
            print(f"round {r + 1} {side}: " + ", ".join(
                f"{b} {res[b]['ms_per_step_median']:.3f} ms" for b in a.benches), file=sys.stderr)
    load_after = os.getloadavg()

    def figures(side, bench):
        meds = [x[bench]["ms_per_step_median"] for x in runs[side]]
        mins = [x[bench]["ms_per_step_min"] for x in runs[side]]
        return statistics.median(meds), min(mins)

    lines = [
        f"{cpu_model()}, {os.cpu_count()} cores; {a.threads} threads, {a.steps} steps per run, "
        f"{a.rounds} alternated runs per side; load average {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after.",
        "",
        f"| workload | PyTorch {version} (median / min) | Switchboard (median / min) | ratio |",
        "|---|---|---|---|",
    ]
    for b in a.benches:
        (pm, pn), (sm, sn) = figures("pytorch", b), figures("switchboard", b)
        lines.append(f"| `{b}` | {pm:.2f} / {pn:.2f} ms | {sm:.2f} / {sn:.2f} ms | {sm / pm:.2f}× |")
    table = "\n".join(lines)
    print(table)
    if a.readme:
        write_readme(table)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


BEGIN, END = "<!-- side_by_side.py: begin -->", "<!-- side_by_side.py: end -->"


def write_readme(table):
    path = os.path.join(ROOT, "README.md")
    with open(path) as f:
        text = f.read()
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        sys.exit(f"README.md has no {BEGIN} ... {END} block")
    text = pattern.sub(lambda _: f"{BEGIN}\n{table}\n{END}", text)
    with open(path, "w") as f:
        f.write(text)

if __name__ == "__main__":
    main()

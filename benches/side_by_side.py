#!/usr/bin/env python3
"""Side-by-side training speed: alternates PyTorch (`benches/pytorch_train_step.py`) and
Switchboard (`examples/compute_bench`) runs of the same workloads and prints the README's table.

    cargo build --release -p switchboard-cli --example compute_bench
    python3 benches/side_by_side.py --python VENV/bin/python [--rounds 5] [--steps 50] \
        [--threads 1,2] [--readme] [BENCH...]

For each thread count (`--threads`, a comma-separated list, both 1 and 2 by default), each
round runs both sides once (the order alternates between rounds); a side's figure is the
median over rounds of its per-run median step time (and the minimum of its per-run minima).
One table per thread count; the load average before and after each is printed with it: the
figures mean something only on an otherwise idle machine. Both sides use glibc's malloc with
the same settings (`switchboard_tensor::tune_allocator`'s, which `pytorch_train_step.py`
applies too). With `--readme`, the tables also replace the text between the README's
`side_by_side.py` markers. Run by hand, not by CI (it needs PyTorch).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHES = ["mlp_train_step", "cnn_train_step", "resnet_train_step", "transformer_train_step"]


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return {r["bench"]: r for r in map(json.loads, filter(None, out.splitlines()))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--threads", type=thread_counts, default=[1, 2],
                    help="comma-separated thread counts, one table each (default 1,2)")
    ap.add_argument("--python", required=True, help="a Python with torch and numpy")
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/examples/compute_bench"))
    ap.add_argument("--readme", action="store_true", help="write the tables into README.md")
    ap.add_argument("benches", nargs="*", default=BENCHES)
    a = ap.parse_args()
    tables = [side_by_side(a, threads) for threads in a.threads]
    text = "\n\n".join(tables)
    print(text)
    if a.readme:
        write_readme(text)


def thread_counts(text):
    try:
        counts = [int(t) for t in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected thread counts like 1,2, got {text!r}")
    if not counts or any(c < 1 for c in counts):
        raise argparse.ArgumentTypeError(f"thread counts must be positive, got {text!r}")
    return counts


def side_by_side(a, threads):
    """The table of `a.benches` on `threads` threads, from `a.rounds` alternated runs."""
    common = [str(a.steps), str(threads), *a.benches]
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
            print(f"{threads} threads, round {r + 1} {side}: " + ", ".join(
                f"{b} {res[b]['ms_per_step_median']:.3f} ms" for b in a.benches), file=sys.stderr)
    load_after = os.getloadavg()

    def figures(side, bench):
        meds = [x[bench]["ms_per_step_median"] for x in runs[side]]
        mins = [x[bench]["ms_per_step_min"] for x in runs[side]]
        return statistics.median(meds), min(mins)

    lines = [
        f"{cpu_model()}, {os.cpu_count()} cores; **{threads} thread{'s' if threads > 1 else ''}**, "
        f"{a.steps} steps per run, {a.rounds} alternated runs per side, the same glibc malloc "
        f"settings on both sides; load average {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after.",
        "",
        f"| workload | PyTorch {version} (median / min) | Switchboard (median / min) | ratio |",
        "|---|---|---|---|",
    ]
    for b in a.benches:
        (pm, pn), (sm, sn) = figures("pytorch", b), figures("switchboard", b)
        lines.append(f"| `{b}` | {pm:.2f} / {pn:.2f} ms | {sm:.2f} / {sn:.2f} ms | {sm / pm:.2f}× |")
    return "\n".join(lines)


def cpu_model():
    """The CPU's model and its widest vector instructions: the GEMM kernels of both sides
    choose their code by them at run time, so the ratios depend on them."""
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown CPU":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    if "avx512f" in flags:
        return f"{model} (AVX-512)"
    if "avx2" in flags:
        return f"{model} (AVX2, no AVX-512)"
    return model


BEGIN, END = "<!-- side_by_side.py: begin -->", "<!-- side_by_side.py: end -->"


def write_readme(tables):
    path = os.path.join(ROOT, "README.md")
    with open(path) as f:
        readme = f.read()
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(readme):
        sys.exit(f"README.md has no {BEGIN} ... {END} block")
    readme = pattern.sub(lambda _: f"{BEGIN}\n{tables}\n{END}", readme)
    with open(path, "w") as f:
        f.write(readme)


if __name__ == "__main__":
    main()

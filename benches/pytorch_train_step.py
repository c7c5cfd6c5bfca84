#!/usr/bin/env python3
"""The PyTorch side of `compute_bench`: the same training steps, the same JSON lines.

Run by hand, not by CI, from a virtual environment outside the repository:

    python3 -m venv VENV && VENV/bin/pip install torch numpy    # VENV: outside the checkout
    VENV/bin/python benches/pytorch_train_step.py [STEPS [THREADS [BENCH...]]]

Workloads (one JSON object per line, as `cargo run --release --example compute_bench`):
- mlp_train_step: MLP 784-512-512-10 (ReLU), batch 128, cross_entropy, SGD(lr=0.01, momentum=0.9);
- cnn_train_step: PyTorch's MNIST example network without its dropouts (conv 1->32 3x3, ReLU,
  conv 32->64 3x3, ReLU, max_pool2d(2), flatten, linear 9216->128, ReLU, linear 128->10,
  log_softmax + nll_loss), batch 64 of 1x28x28 inputs uniform in [0, 1), SGD(lr=0.01, momentum=0.9).
One step is forward + loss + backward + optimizer step + zero_grad (grads set to none), eager mode.
"""

import json
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn


def mlp():
    return nn.Sequential(
        nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
    )


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


WORKLOADS = {
    "mlp_train_step": dict(
        model=mlp, input=(128, 784), loss=F.cross_entropy,
        desc="MLP 784-512-512-10 ReLU", loss_name="cross_entropy",
    ),
    "cnn_train_step": dict(
        model=Cnn, input=(64, 1, 28, 28), loss=F.nll_loss,
        desc="MNIST CNN conv32-conv64-maxpool-fc128-fc10 (no dropout)",
        loss_name="log_softmax + nll_loss",
    ),
}


def run(bench, steps, threads):
    w = WORKLOADS[bench]
    torch.manual_seed(0)
    model = w["model"]()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(*w["input"])
    y = torch.randint(0, 10, (w["input"][0],))

    def step():
        loss = w["loss"](model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    first_loss = step()
    for _ in range(4):
        step()
    times = []
    last_loss = first_loss
    for _ in range(steps):
        t = time.perf_counter()
        last_loss = step()
        times.append((time.perf_counter() - t) * 1e3)
    mean = sum(times) / len(times)
    times.sort()
    print(json.dumps({
        "bench": bench,
        "impl": "pytorch " + torch.__version__,
        "model": w["desc"],
        "batch": w["input"][0],
        "loss": w["loss_name"],
        "optimizer": "SGD(lr=0.01, momentum=0.9)",
        "threads": threads,
        "steps": steps,
        "ms_per_step": round(mean, 3),
        "ms_per_step_median": round(times[len(times) // 2], 3),
        "ms_per_step_min": round(times[0], 3),
        "first_loss": first_loss,
        "last_loss": last_loss,
    }), flush=True)


def per_sample_grads(steps, threads):
    """The per-sample gradients of the MLP's cross-entropy at batch 64: torch.func's
    vmap(grad(loss)) against a loop of 64 single-sample grad calls (compute_bench's
    `per_sample_grads`)."""
    from torch.func import functional_call, grad, vmap

    torch.manual_seed(0)
    model = mlp()
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = torch.rand(64, 784)
    y = torch.randint(0, 10, (64,))

    def loss(p, sample, target):
        out = functional_call(model, p, (sample.unsqueeze(0),))
        return F.cross_entropy(out, target.unsqueeze(0))

    per_sample = vmap(grad(loss), in_dims=(None, 0, 0))
    single = grad(loss)

    def vmapped():
        per_sample(params, x, y)

    def looped():
        for b in range(64):
            single(params, x[b], y[b])

    def timed(f, n):
        f()
        times = []
        for _ in range(n):
            t = time.perf_counter()
            f()
            times.append((time.perf_counter() - t) * 1e3)
        times.sort()
        return times

    v = timed(vmapped, max(steps, 1))
    loop = timed(looped, max(steps // 5, 3))
    print(json.dumps({
        "bench": "per_sample_grads",
        "impl": "pytorch " + torch.__version__,
        "model": "MLP 784-512-512-10 (ReLU), cross-entropy per sample",
        "batch": 64,
        "threads": threads,
        "steps": len(v),
        "ms_per_step_median": round(v[len(v) // 2], 3),
        "ms_per_step_min": round(v[0], 3),
        "loop_ms_median": round(loop[len(loop) // 2], 3),
        "loop_steps": len(loop),
        "speedup_vs_loop": round(loop[len(loop) // 2] / v[len(v) // 2], 3),
    }), flush=True)


def main():
    args = sys.argv[1:]
    steps = int(args[0]) if args else 50
    threads = int(args[1]) if len(args) > 1 else 2
    benches = args[2:] or [*WORKLOADS, "per_sample_grads"]
    torch.set_num_threads(threads)
    for bench in benches:
        if bench == "per_sample_grads":
            per_sample_grads(steps, threads)
            continue
        if bench not in WORKLOADS:
            sys.exit(f"unknown bench {bench}; one of {', '.join(WORKLOADS)}, per_sample_grads")
        run(bench, steps, threads)


if __name__ == "__main__":
    main()

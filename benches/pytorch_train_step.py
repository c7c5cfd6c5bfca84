#!/usr/bin/env python3
"""The PyTorch side of `compute_bench`: the same training steps, the same JSON lines.

Run by hand, not by CI, from a virtual environment outside the repository:

    python3 -m venv VENV && VENV/bin/pip install torch numpy    # VENV: outside the checkout
    VENV/bin/python benches/pytorch_train_step.py [STEPS [THREADS [BENCH...]]]

Workloads (one JSON object per line, as `cargo run --release --example compute_bench`):
- mlp_train_step: MLP 784-512-512-10 (ReLU), batch 128, cross_entropy, SGD(lr=0.01, momentum=0.9);
- cnn_train_step: PyTorch's MNIST example network without its dropouts (conv 1->32 3x3, ReLU,
  conv 32->64 3x3, ReLU, max_pool2d(2), flatten, linear 9216->128, ReLU, linear 128->10,
  log_softmax + nll_loss), batch 64 of 1x28x28 inputs uniform in [0, 1), SGD(lr=0.01, momentum=0.9);
- resnet_train_step: a small ResNet in training mode (stem conv3x3 3->16 without bias + BatchNorm2d
  + ReLU; three stages of two basic blocks conv3x3-BN-ReLU-conv3x3-BN + shortcut, ReLU, of widths
  16, 32, 64, the first block of stages 2 and 3 with stride 2 and a 1x1 conv + BN projection
  shortcut; adaptive average pooling to 1x1, linear 64->10), batch 32 of 3x32x32 inputs,
  cross_entropy, SGD(lr=0.1, momentum=0.9, weight_decay=5e-4);
- transformer_train_step: a decoder-only transformer (token and learned position embeddings of
  width 256, 2 pre-norm blocks: LayerNorm, one linear 256->768 for q, k, v, causal
  scaled_dot_product_attention over 4 heads, linear 256->256, residual; LayerNorm, linear
  256->1024, GELU, linear 1024->256, residual; final LayerNorm, untied head 256->512), batch 16 of
  128 tokens of a vocabulary of 512, cross_entropy over every position, AdamW(lr=3e-4,
  weight_decay=0.01), no dropout.
One step is forward + loss + backward + optimizer step + zero_grad (grads set to none), eager mode.
With COMPUTE_BENCH_PROFILE=1, also torch.profiler's time per operator (stderr), to compare with
compute_bench's profile.
"""

import json
import os
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


def conv3x3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 3, stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1 = conv3x3(cin, cout, stride), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = conv3x3(cout, cout), nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return F.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, widths=(16, 32, 64), blocks=2, classes=10):
        super().__init__()
        self.conv1, self.bn1 = conv3x3(3, widths[0]), nn.BatchNorm2d(widths[0])
        layers, cin = [], widths[0]
        for stage, width in enumerate(widths):
            for i in range(blocks):
                layers.append(BasicBlock(cin, width, 2 if stage > 0 and i == 0 else 1))
                cin = width
        self.layers = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.layers(F.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class DecoderBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.qkv, self.out = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        n, l, e = x.shape
        qkv = self.qkv(self.ln1(x)).view(n, l, 3, self.heads, e // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(n, l, e))
        return x + self.mlp(self.ln2(x))


class DecoderLm(nn.Module):
    def __init__(self, vocab=512, max_len=128, d=256, heads=4, layers=2):
        super().__init__()
        self.tok_emb, self.pos_emb = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.blocks = nn.Sequential(*[DecoderBlock(d, heads) for _ in range(layers)])
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1])
        x = self.tok_emb(tokens) + self.pos_emb(positions)
        return self.head(self.ln_f(self.blocks(x)))


def lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def sgd(params):
    return torch.optim.SGD(params, lr=0.01, momentum=0.9)


WORKLOADS = {
    "mlp_train_step": dict(
        model=mlp, input=(128, 784), loss=F.cross_entropy,
        desc="MLP 784-512-512-10 ReLU", loss_name="cross_entropy",
        optimizer=sgd, optimizer_name="SGD(lr=0.01, momentum=0.9)",
    ),
    "cnn_train_step": dict(
        model=Cnn, input=(64, 1, 28, 28), loss=F.nll_loss,
        desc="MNIST CNN conv32-conv64-maxpool-fc128-fc10 (no dropout)",
        loss_name="log_softmax + nll_loss",
        optimizer=sgd, optimizer_name="SGD(lr=0.01, momentum=0.9)",
    ),
    "resnet_train_step": dict(
        model=ResNet, input=(32, 3, 32, 32), loss=F.cross_entropy,
        desc="ResNet stem16 + 3 stages x 2 basic blocks (16, 32, 64), batch norm, avgpool, fc10",
        loss_name="cross_entropy",
        optimizer=lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=5e-4),
        optimizer_name="SGD(lr=0.1, momentum=0.9, weight_decay=5e-4)",
    ),
    "transformer_train_step": dict(
        model=DecoderLm, tokens=(16, 128), vocab=512, loss=lm_loss,
        desc="decoder-only transformer vocab 512, d_model 256, 2 pre-norm blocks, 4 causal heads, "
        "GELU MLP 1024",
        loss_name="cross_entropy over every position",
        optimizer=lambda p: torch.optim.AdamW(p, lr=3e-4, weight_decay=0.01),
        optimizer_name="AdamW(lr=3e-4, weight_decay=0.01)",
    ),
}


def run(bench, steps, threads):
    w = WORKLOADS[bench]
    torch.manual_seed(0)
    model = w["model"]()
    model.train()
    opt = w["optimizer"](model.parameters())
    if "tokens" in w:
        x = torch.randint(0, w["vocab"], w["tokens"])
        y = torch.randint(0, w["vocab"], w["tokens"])
    else:
        x = torch.rand(*w["input"])
        y = torch.randint(0, 10, (w["input"][0],))

    phases = {"forward": [], "backward": [], "optimizer": []}

    def step():
        t0 = time.perf_counter()
        loss = w["loss"](model(x), y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        for name, ms in zip(phases, (t1 - t0, t2 - t1, t3 - t2)):
            phases[name].append(ms * 1e3)
        return loss.item()

    first_loss = step()
    for _ in range(4):
        step()
    for v in phases.values():
        v.clear()
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
        "batch": (w.get("tokens") or w["input"])[0],
        "loss": w["loss_name"],
        "optimizer": w["optimizer_name"],
        "threads": threads,
        "steps": steps,
        "ms_per_step": round(mean, 3),
        "ms_per_step_median": round(times[len(times) // 2], 3),
        "ms_per_step_min": round(times[0], 3),
        "first_loss": first_loss,
        "last_loss": last_loss,
        "phases_ms_median": {k: round(sorted(v)[len(v) // 2], 3) for k, v in phases.items()},
    }), flush=True)
    if profile_wanted():
        profile(bench, step)


def profile_wanted():
    return os.environ.get("COMPUTE_BENCH_PROFILE", "").lower() in ("1", "true", "yes", "on")


def profile(bench, step, steps=5):
    """With COMPUTE_BENCH_PROFILE=1 (as compute_bench): torch.profiler's time per operator over
    `steps` more steps, per step, on stderr (self CPU time, and CPU time with its children)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    rows = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    print(f"{bench}: ms per step by operator (self / total):", file=sys.stderr)
    for e in rows[:40]:
        print(f"  {e.self_cpu_time_total / 1e3 / steps:>8.3f} / {e.cpu_time_total / 1e3 / steps:>8.3f}"
              f" ms {e.count // steps:>5} calls  {e.key}", file=sys.stderr)


def per_sample_grads(steps, threads):
    """The per-sample gradients of the MLP's cross-entropy at batch 64: torch.func's
    vmap(grad(loss)) against a loop of 64 single-sample grad calls whose results are stacked, as
    the tutorial's compute_sample_grads (compute_bench's
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
        # The tutorial's compute_sample_grads: keep each sample's gradients, stack them.
        grads = [single(params, x[b], y[b]) for b in range(64)]
        {k: torch.stack([g[k] for g in grads]) for k in params}

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


def tune_allocator():
    """glibc's malloc with the settings compute_bench uses (switchboard_tensor::tune_allocator:
    mmap threshold 32 MiB, no mmap for chunks, one arena, trim threshold 1 GiB, top pad 64 MiB), so that
    both sides allocate alike: freed buffers stay in the heap instead of being unmapped every
    step.
    PyTorch's CPU allocator takes its buffers from malloc (posix_memalign)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        m_trim_threshold, m_top_pad, m_mmap_threshold, m_mmap_max = -1, -2, -3, -4
        m_arena_max = -8
        libc.mallopt(m_mmap_threshold, 32 << 20)
        libc.mallopt(m_mmap_max, 0)
        libc.mallopt(m_arena_max, 1)
        libc.mallopt(m_trim_threshold, 1 << 30)
        libc.mallopt(m_top_pad, 64 << 20)
    except (OSError, AttributeError):
        pass  # not glibc: compute_bench's tune_allocator is a no-op there too


def main():
    tune_allocator()
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

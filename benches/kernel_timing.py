"""What the kernel timing scripts share (the PyTorch twins of the cpu crate's timing examples,
`crates/cpu/examples/timing`): deterministic inputs and the best of repeated calls."""
import time

import torch


def values(*sizes):
    """A float32 tensor of `sizes` with the values of the Rust examples' `values`."""
    n = 1
    for s in sizes:
        n *= s
    i = torch.arange(n, dtype=torch.int64)
    return (((i * 7919) % 2000).float() / 1000.0 - 1.0).reshape(sizes)


def best(reps, f):
    """The best time of `reps` calls of `f`, in milliseconds."""
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e3)
    return min(times)

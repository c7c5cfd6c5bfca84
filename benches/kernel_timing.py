"""What the kernel timing scripts share (the PyTorch twins of the cpu crate's timing examples,
`crates/cpu/examples/timing`): deterministic inputs and the best of repeated calls."""
import time

import numpy as np
import torch


def values(*sizes):
    """A float32 tensor of `sizes` with the values of the Rust examples' `values`."""
    n = 1
    for s in sizes:
        n *= s
    i = torch.arange(n, dtype=torch.int64)
    return (((i * 7919) % 2000).float() / 1000.0 - 1.0).reshape(sizes)


def noise(*sizes):
    """A float32 tensor of `sizes` with the values of the Rust examples' `noise`: values in
    [-1, 1) in no predictable order (a hash of the index)."""
    n = 1
    for s in sizes:
        n *= s
    with np.errstate(over="ignore"):
        h = (np.arange(n, dtype=np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
        h = (h ^ (h >> np.uint64(31))) * np.uint64(0xBF58476D1CE4E5B9)
    v = (h >> np.uint64(40)).astype(np.float32) / np.float32(1 << 23) - np.float32(1.0)
    return torch.from_numpy(v).reshape(sizes)


def best(reps, f):
    """The best time of `reps` calls of `f`, in milliseconds."""
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e3)
    return min(times)

"""PyTorch's side of `crates/cpu/examples/elementwise_shapes.rs`: `relu`, `threshold_backward`
and `add` on the ResNet's activation shapes at batch 32, best of REPS calls in milliseconds.

    python benches/elementwise_shapes.py [REPS [THREADS]]
"""
import sys

import torch

from kernel_timing import best, noise

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 50
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
torch.set_num_threads(threads)
aten = torch.ops.aten

for sizes in [(32, 16, 32, 32), (32, 32, 16, 16), (32, 64, 8, 8)]:
    x = noise(*sizes)
    g = -x
    relu_ms = best(reps, lambda: aten.relu(x))
    backward_ms = best(reps, lambda: aten.threshold_backward(g, x, 0))
    add_ms = best(reps, lambda: aten.add(x, g))
    name = str(list(sizes))
    print(f"{name:<18} relu {relu_ms:7.3f} ms   threshold_backward {backward_ms:7.3f} ms   "
          f"add {add_ms:7.3f} ms")

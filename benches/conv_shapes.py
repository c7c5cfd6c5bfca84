"""PyTorch's side of `crates/cpu/examples/conv_shapes.rs`: the ResNet's convolutions at batch
32, forward and backward (input and weight gradients), best of REPS runs in milliseconds.

    python benches/conv_shapes.py [REPS [THREADS]]
"""
import sys

import torch

from kernel_timing import best, values

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
torch.set_num_threads(threads)
aten = torch.ops.aten

CASES = [
    ("stem 3->16 3x3", 3, 16, 32, 3, 1, 1, 1),
    ("stage1 16->16 3x3", 16, 16, 32, 3, 1, 1, 4),
    ("stage2 16->32 3x3 s2", 16, 32, 32, 3, 2, 1, 1),
    ("stage2 16->32 1x1 s2", 16, 32, 32, 1, 2, 0, 1),
    ("stage2 32->32 3x3", 32, 32, 16, 3, 1, 1, 3),
    ("stage3 32->64 3x3 s2", 32, 64, 16, 3, 2, 1, 1),
    ("stage3 32->64 1x1 s2", 32, 64, 16, 1, 2, 0, 1),
    ("stage3 64->64 3x3", 64, 64, 8, 3, 1, 1, 3),
]

total_fwd = total_bwd = 0.0
for name, c_in, c_out, size, kernel, stride, padding, count in CASES:
    x = values(32, c_in, size, size)
    w = values(c_out, c_in, kernel, kernel)
    args = ([stride], [padding], [1], False, [0], 1)

    def conv():
        return aten.convolution(x, w, None, *args)

    go = values(*conv().shape)
    mask = [c_in != 3, True, False]
    fwd = best(reps, conv)
    bwd = best(reps, lambda: aten.convolution_backward(go, x, w, None, *args, mask))
    gx = best(reps, lambda: aten.convolution_backward(go, x, w, None, *args, [mask[0], False, False]))
    gw = best(reps, lambda: aten.convolution_backward(go, x, w, None, *args, [False, True, False]))
    total_fwd += fwd * count
    total_bwd += bwd * count
    print(f"{name:<22} x{count}  forward {fwd:>7.3f} ms  backward {bwd:>7.3f} ms (input {gx:.3f}, weight {gw:.3f})")
print(f"per step: forward {total_fwd:.3f} ms, backward {total_bwd:.3f} ms")

"""PyTorch's side of `crates/cpu/examples/transformer_kernels.rs`: the same kernels at the
same shapes, best of REPS runs in milliseconds (of those whose name contains FILTER).

    python benches/transformer_kernels.py [REPS [THREADS [FILTER]]]
"""
import sys

import torch

from kernel_timing import best, values

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
name_filter = sys.argv[3] if len(sys.argv) > 3 else ""
torch.set_num_threads(threads)
ROWS = 16 * 128


def time_it(name, f):
    if name_filter in name:
        print(f"{name:<40} {best(reps, f):8.3f} ms")


aten = torch.ops.aten
logits = values(ROWS, 512)
logp = aten._log_softmax(logits, 1, False)
grad = values(ROWS, 512)
time_it("_log_softmax [2048, 512]", lambda: aten._log_softmax(logits, 1, False))
time_it(
    "_log_softmax_backward_data [2048, 512]",
    lambda: aten._log_softmax_backward_data(grad, logp, 1, torch.float32),
)
x, w, b, dy = values(ROWS, 256), values(256), values(256), values(ROWS, 256)
_, mean, rstd = aten.native_layer_norm(x, [256], w, b, 1e-5)
time_it("native_layer_norm [2048, 256]", lambda: aten.native_layer_norm(x, [256], w, b, 1e-5))
time_it(
    "native_layer_norm_backward [2048, 256]",
    lambda: aten.native_layer_norm_backward(dy, x, [256], mean, rstd, w, b, [True, True, True]),
)
for n in [256, 512, 768, 1024]:
    g = values(ROWS, n)
    time_it(f"sum.dim_IntList dim 0 [2048, {n}]", lambda: aten.sum.dim_IntList(g, [0]))
grads = [values(16, 128, 4, 64).permute(0, 2, 1, 3) for _ in range(3)]
time_it("cat 3 x [16, 4, 128, 64] (BLHE) dim 0", lambda: aten.cat(grads, 0))
stacked = values(3, 16, 4, 128, 64).permute(1, 3, 0, 2, 4)
time_it("clone [16, 128, 3, 4, 64] permuted", lambda: aten.clone(stacked, memory_format=torch.contiguous_format))

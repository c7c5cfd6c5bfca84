#!/usr/bin/env python3
"""Runs every sample of the operator-sample registry through PyTorch and reports where
Switchboard's CPU kernels differ: errors, result dtypes, sizes, strides, values.

    cargo run -p switchboard-opinfo --example dump_samples > samples.jsonl
    VENV/bin/python scripts/opinfo_vs_pytorch.py samples.jsonl

(VENV: a virtual environment with torch and numpy, outside the checkout.)

Strides are compared on dimensions of size > 1 (PyTorch's own significant strides); values
with float tolerances (NaN equal to NaN); random operators by metadata only. A sample
Switchboard refuses runs in a child process (PyTorch crashes on some). Exit status 1 when
anything differs that EXPLAINED does not list with its reason.
"""
import json
import math
import os
import sys

import torch

DTYPES = {
    "uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "float16": torch.float16, "float32": torch.float32,
    "float64": torch.float64, "bool": torch.bool, "bfloat16": torch.bfloat16,
    "complex64": torch.complex64, "complex128": torch.complex128,
}
FORMATS = {
    "Contiguous": torch.contiguous_format, "Preserve": torch.preserve_format,
    "ChannelsLast": torch.channels_last, "ChannelsLast3d": torch.channels_last_3d,
}


def number(v):
    return float(v) if isinstance(v, str) else v


def make_tensor(a):
    base = torch.tensor([number(v) for v in a["base"]], dtype=torch.float64)
    dtype = DTYPES[a["dtype"]]
    if dtype.is_complex:
        # Complex values come as interleaved real and imaginary parts.
        base = torch.view_as_complex(base.reshape(a["base_shape"] + [2]))
    base = base.reshape(a["base_shape"]).to(dtype)
    layout = a["layout"]
    if layout == "contiguous":
        return base
    if layout == "transposed":
        return base.permute(*reversed(range(base.dim())))
    if layout == "strided":
        return base[..., ::2]
    return base.expand(a["shape"])


def make(a):
    k = a["kind"]
    if k == "tensor":
        return make_tensor(a)
    if k == "tensors":
        return [make(i) for i in a["items"]]
    if k == "none":
        return None
    if k == "dtype":
        return DTYPES[a["value"]]
    if k == "device":
        return torch.device(a["value"])
    if k == "memory_format":
        return FORMATS[a["value"]]
    if k == "generator":
        return torch.Generator().manual_seed(a["value"])
    if k == "layout":
        return torch.strided
    if k == "float":
        return number(a["value"])
    return a["value"]


def flatten(out):
    if isinstance(out, (tuple, list)):
        r = []
        for o in out:
            r.extend(flatten(o))
        return r
    return [out]


def same_values(t, want):
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t.resolve_conj())
    got = t.to(torch.float64).reshape(-1).tolist()
    want = [number(v) for v in want]
    if len(got) != len(want):
        return False
    floating = t.dtype.is_floating_point
    tol = 1e-2 if t.dtype in (torch.float16, torch.bfloat16) else 1e-5
    for g, w in zip(got, want):
        if math.isnan(g) and math.isnan(w):
            continue
        if g == w:
            continue
        if not floating or abs(g - w) > tol + 10 * tol * abs(w):
            return False
    return True


def compare(rec):
    name = rec["op"]
    base, _, overload = name.partition(".")
    packet = getattr(torch.ops.aten, base)
    op = getattr(packet, overload or "default")
    args, kwargs = [], {}
    for a in rec["args"]:
        v = make(a)
        if a["kwarg_only"]:
            kwargs[a["name"]] = v
        else:
            args.append(v)
    torch.manual_seed(0)
    ours = rec["result"]
    try:
        theirs = flatten(op(*args, **kwargs))
    except Exception as e:  # noqa: BLE001 -- any PyTorch error is a result to compare
        msg = str(e).splitlines()[0]
        if ours["ok"]:
            return [f"PyTorch fails ({msg}), Switchboard runs"]
        if ours["error"].splitlines()[0] != msg:
            return [f"errors differ: PyTorch `{msg}`, Switchboard `{ours['error'].splitlines()[0]}`"]
        return []
    if not ours["ok"]:
        return [f"Switchboard fails ({ours['error'].splitlines()[0]}), PyTorch runs"]
    problems = []
    mine = []
    for o in ours["outputs"]:
        mine.extend(o["items"] if o["kind"] == "tensors" else [o])
    if len(mine) != len(theirs):
        return [f"{len(mine)} outputs, PyTorch {len(theirs)}"]
    for i, (m, t) in enumerate(zip(mine, theirs)):
        if m["kind"] != "tensor":
            if not isinstance(t, torch.Tensor) and m.get("value") != t:
                problems.append(f"output {i}: {m.get('value')}, PyTorch {t}")
            continue
        if t is None and m["sizes"] == [0]:
            # An output the output_mask does not ask for: PyTorch's undefined tensor is an
            # empty placeholder in Switchboard.
            continue
        if not isinstance(t, torch.Tensor):
            problems.append(f"output {i}: a tensor, PyTorch {type(t).__name__}")
            continue
        if m["dtype"] != str(t.dtype).replace("torch.", ""):
            problems.append(f"output {i}: dtype {m['dtype']}, PyTorch {t.dtype}")
        if list(t.shape) != m["sizes"]:
            problems.append(f"output {i}: sizes {m['sizes']}, PyTorch {list(t.shape)}")
            continue
        if t.numel() > 1 and any(
            s > 1 and a != b for s, a, b in zip(t.shape, m["strides"], t.stride())
        ):
            problems.append(f"output {i}: strides {m['strides']}, PyTorch {list(t.stride())}")
        if m["values"] is not None and not rec["random"] and not same_values(t, m["values"]):
            problems.append(f"output {i}: values differ")
    return problems


def guarded_compare(rec):
    try:
        return compare(rec)
    except Exception as e:  # noqa: BLE001 -- a sample the script cannot express
        return [f"not run: {e}"]


def isolated_compare(rec):
    """Compares a sample Switchboard refuses in a child process: PyTorch checks less than
    Switchboard in places and may crash on such input (a null running_mean in eval mode)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        with os.fdopen(write, "w") as out:
            json.dump(guarded_compare(rec), out)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as inp:
        text = inp.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        CRASHES.append(
            f"{rec['op']} sample {rec['sample']}: PyTorch crashes (signal {os.WTERMSIG(status)}); "
            f"Switchboard raises `{rec['result']['error'].splitlines()[0]}`"
        )
        return []
    return json.loads(text)


CRASHES = []

# Differences that are deliberate, each with its reason: printed, not counted.
EXPLAINED = {
    ("gelu_backward", 4): "PyTorch's oneDNN path fails on this layout (a PyTorch defect)",
    ("_scaled_dot_product_flash_attention_for_cpu", 3): "PyTorch's kernel reads a key whose "
    "last dimension is strided as if it were contiguous (values of 1e22 where its math path and "
    "contiguous copies give Switchboard's, to 6e-8: a PyTorch defect)",
    ("native_batch_norm", 10): "PyTorch reads past a weight of the wrong size; Switchboard "
    "raises the check of PyTorch's batch_norm",
    ("_native_batch_norm_legit", 5): "as native_batch_norm: running stats of the wrong size",
    ("_native_batch_norm_legit_functional", 4): "as native_batch_norm: running stats of the "
    "wrong size",
    ("_native_batch_norm_legit_no_training", 3): "as native_batch_norm: running stats of the "
    "wrong size",
    ("_adaptive_avg_pool2d", 9): "PyTorch fails allocating the output; Switchboard names the "
    "negative output_size as PyTorch's adaptive_avg_pool2d does",
    ("embedding_bag", 6): "PyTorch calls _embedding_bag_forward_only when the weight needs no "
    "gradient (one more zero in bag_size and max_indices in sum mode with include_last_offset); "
    "Switchboard always calls _embedding_bag, whose results do not depend on requires_grad",
    ("_embedding_bag_backward", 5): "sparse gradients need sparse tensors, which Switchboard "
    "does not have",
    ("_embedding_bag_dense_backward", 3): "PyTorch fails an internal assert; Switchboard raises "
    "the check of PyTorch's embedding_bag",
    ("view.dtype", 17): "a bool view of other bytes is refused (bool storage must hold 0 or 1)",
    ("view.dtype", 18): "a bool view of other bytes is refused (bool storage must hold 0 or 1)",
    ("view_copy.dtype", 17): "as view.dtype",
    ("view_copy.dtype", 18): "as view.dtype",
    ("_fft_r2c", 7): "normalization 3 is outside PyTorch's fft_norm_mode (0, 1, 2)",
    ("_fft_r2c", 8): "repeated dims: refused with the message of PyTorch's torch.fft functions",
}


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "samples.jsonl"
    total = bad = 0
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            total += 1
            if rec["result"]["ok"]:
                problems = guarded_compare(rec)
            else:
                problems = isolated_compare(rec)
            why = EXPLAINED.get((rec["op"], rec["sample"]))
            for p in problems:
                note = f" (explained: {why})" if why else ""
                print(f"{rec['op']} sample {rec['sample']}: {p}{note}")
            bad += bool(problems) and why is None
    for c in CRASHES:
        print(f"note: {c}")
    print(f"{total} samples, {bad} differ", file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    # One intra-op thread: no OpenMP pool exists when a sample is forked off.
    torch.set_num_threads(1)
    main()

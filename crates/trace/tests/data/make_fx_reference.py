"""Records the operators PyTorch's make_fx traces for the programs of
crates/trace/tests/pytorch_ops.rs, into make_fx_reference.txt.

The programs of SINGLE are traced as `single(fn)`: `fn(x)`, then backward of its sum.

Run (VENV: a virtual environment with torch): VENV/bin/python crates/trace/tests/data/make_fx_reference.py > crates/trace/tests/data/make_fx_reference.txt

Each program is traced with `make_fx(f)(*inputs)` (tracing_mode="real", no decomposition
table: the operators that run), and the operators of its `call_function` nodes are printed
in execution order, one per line, as `aten::NAME` or `aten::NAME.OVERLOAD` (the `default`
overload printed without it, as Switchboard names operators). `getitem` nodes (Python's
indexing of a multi-output node) are not operators and are left out.
"""
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx


def mlp_step(x, target, w1, b1, w2, b2):
    """linear -> relu -> linear -> cross_entropy, then backward (the joint graph)."""
    h = F.relu(F.linear(x, w1, b1))
    logits = F.linear(h, w2, b2)
    loss = F.cross_entropy(logits, target)
    loss.backward()
    return loss, w1.grad, b1.grad, w2.grad, b2.grad


def cnn_step(x, target, c1w, c1b, c2w, c2b, l1w, l1b, l2w, l2b):
    """PyTorch's MNIST example network without dropout, then backward."""
    h = F.relu(F.conv2d(x, c1w, c1b))
    h = F.relu(F.conv2d(h, c2w, c2b))
    h = F.max_pool2d(h, 2)
    h = torch.flatten(h, 1)
    h = F.relu(F.linear(h, l1w, l1b))
    out = F.log_softmax(F.linear(h, l2w, l2b), dim=1)
    loss = F.nll_loss(out, target)
    loss.backward()
    return loss, c1w.grad, c2w.grad, l1w.grad, l2w.grad


def sgd_momentum_step(p, g, buf):
    """One step of SGD with momentum 0.9 and lr 0.1 on a parameter whose momentum buffer
    exists (torch.optim.SGD's single-tensor path: buf.mul_(momentum).add_(grad);
    p.add_(buf, alpha=-lr))."""
    buf.mul_(0.9).add_(g)
    p.add_(buf, alpha=-0.1)
    return p, buf


def views_and_inplace(x):
    """Views, in-place writes through a view, and reductions."""
    y = x.transpose(0, 1)
    z = y.reshape(-1)
    x.mul_(2)
    y[0].add_(1)
    return (z * 3).sum(0), torch.cat([x, y.t()]).mean()


def mse_tanh_step(x, y, w):
    """tanh(x @ w) with an MSE loss, then backward."""
    loss = F.mse_loss(torch.tanh(x @ w), y)
    loss.backward()
    return loss, w.grad


def programs():
    torch.manual_seed(0)
    req = lambda *s: torch.randn(*s, requires_grad=True)
    yield "mlp_step", mlp_step, (
        torch.randn(8, 64), torch.randint(0, 10, (8,)),
        req(128, 64), req(128), req(10, 128), req(10))
    yield "cnn_step", cnn_step, (
        torch.randn(4, 1, 28, 28), torch.randint(0, 10, (4,)),
        req(32, 1, 3, 3), req(32), req(64, 32, 3, 3), req(64),
        req(128, 9216), req(128), req(10, 128), req(10))
    yield "sgd_momentum_step", sgd_momentum_step, (
        torch.randn(5, 3), torch.randn(5, 3), torch.randn(5, 3))
    yield "views_and_inplace", views_and_inplace, (torch.randn(3, 4),)
    yield "mse_tanh_step", mse_tanh_step, (torch.randn(6, 4), torch.randn(6, 2), req(4, 2))


def single(fn):
    """`fn(x)` and the backward of its sum: one operator's forward and backward calls."""
    def f(x):
        y = fn(x)
        y.sum().backward()
        return y, x.grad
    return f


# One operator (or a small composite) at a time, each on a [3, 4] (or given) input that
# requires grad. Constant tensors are made with factories (`torch.ones`), which trace as
# calls in both libraries.
SINGLE = [
    ("softmax", (3, 4), lambda x: F.softmax(x, 1)),
    ("log_softmax", (3, 4), lambda x: F.log_softmax(x, 1)),
    ("matmul_3d_2d", (2, 3, 4), lambda x: x @ torch.ones(4, 5)),
    ("linear_3d", (2, 3, 4), lambda x: F.linear(x, torch.ones(5, 4), torch.ones(5))),
    ("bmm", (2, 3, 4), lambda x: torch.bmm(x, torch.ones(2, 4, 2))),
    ("mean_dim", (3, 4), lambda x: x.mean(1)),
    ("sum_dim_keepdim", (3, 4), lambda x: x.sum(1, keepdim=True)),
    ("var_dim", (3, 4), lambda x: x.var(1)),
    ("flatten", (3, 4), lambda x: x.flatten()),
    ("squeeze_unsqueeze", (3, 4), lambda x: x.unsqueeze(0).squeeze(0)),
    ("permute_contiguous", (3, 4), lambda x: x.permute(1, 0).contiguous()),
    ("expand", (3, 4), lambda x: x.expand(2, 3, 4)),
    ("narrow", (3, 4), lambda x: x.narrow(1, 1, 2)),
    ("stack", (3, 4), lambda x: torch.stack([x, x * 2])),
    ("gelu", (3, 4), lambda x: F.gelu(x)),
    ("sigmoid", (3, 4), lambda x: torch.sigmoid(x)),
    ("tanh", (3, 4), lambda x: torch.tanh(x)),
    ("silu", (3, 4), lambda x: F.silu(x)),
    ("abs", (3, 4), lambda x: x.abs()),
    ("pow", (3, 4), lambda x: x.pow(2)),
    ("div", (3, 4), lambda x: x / 3),
    ("sub", (3, 4), lambda x: x - x.exp()),
    ("sqrt", (3, 4), lambda x: (x * x + 1).sqrt()),
    ("layer_norm", (3, 4), lambda x: F.layer_norm(x, (4,))),
    ("mse_loss_sum", (3, 4), lambda x: F.mse_loss(x, torch.zeros(3, 4), reduction="sum")),
    ("cross_entropy_probs", (3, 4), lambda x: F.cross_entropy(x, torch.softmax(torch.ones(3, 4), 1))),
    ("conv1d", (1, 3, 5), lambda x: F.conv1d(x, torch.ones(2, 3, 2))),
    ("max_pool2d", (1, 1, 4, 4), lambda x: F.max_pool2d(x, 2)),
    ("dropout_eval", (3, 4), lambda x: F.dropout(x, 0.5, training=False)),
]


def name(target):
    overload = target._overloadname
    base = target._schema.name
    return base if overload == "default" else f"{base}.{overload}"


print(f"# make_fx operator lists, torch {torch.__version__}; produced by make_fx_reference.py")
def single_programs():
    for title, sizes, fn in SINGLE:
        yield f"single:{title}", single(fn), (torch.randn(*sizes, requires_grad=True),)


for title, f, inputs in list(programs()) + list(single_programs()):
    gm = make_fx(f)(*inputs)
    print(f"[{title}]")
    for n in gm.graph.nodes:
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
            print(name(n.target))

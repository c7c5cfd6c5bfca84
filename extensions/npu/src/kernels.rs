//! The backend's native kernels: `add.Tensor`, `mul.Tensor`, `mm`, `relu` and `sum` on float32
//! tensors of one of its devices, computed on its memory directly. Other dtypes, mixed devices
//! and malformed calls go to the CPU fallback, as a real backend's kernels hand unsupported
//! cases to `at::native::cpu_fallback`; the CPU kernel then also gives the error, with its
//! message, for a call that is wrong.

use switchboard::dispatcher::{
    push, DispatchErrorKind, Dispatcher, IValue, PushValues, Result, Stack,
};
use switchboard::ops::cpu_fallback;
use switchboard::tensor::{infer_size, Scalar, ScalarType, Tensor};

use crate::backend::Backend;
use crate::memory::empty_contiguous;

/// The backend of `t`'s device when `t` is a float32 tensor there.
fn float_on_backend(t: &Tensor) -> Option<&'static Backend> {
    if t.dtype() != ScalarType::Float {
        return None;
    }
    Backend::for_device_type(t.device().ty)
}

/// The backend both float32 operands live on, on one device.
fn float_pair(a: &Tensor, b: &Tensor) -> Option<&'static Backend> {
    let backend = float_on_backend(a)?;
    (a.device() == b.device() && b.dtype() == ScalarType::Float).then_some(backend)
}

/// Runs `op` (a qualified name with overload) on CPU copies of `args`, through the same path
/// as the boxed fallback, and returns its one tensor.
fn on_cpu(op: &str, args: impl PushValues) -> Result<Tensor> {
    let handle = Dispatcher::global().find_schema_or_throw(op)?;
    let mut stack = Stack::new();
    push(&mut stack, args);
    // The operands' device decides the backend whose counters see the call.
    let backend = stack.iter().find_map(|v| match v {
        IValue::Tensor(t) => Backend::for_device_type(t.device().ty),
        _ => None,
    });
    if let Some(backend) = backend {
        backend.count_fallback(op);
    }
    cpu_fallback(&handle, &mut stack)?;
    match stack.pop() {
        Some(IValue::Tensor(t)) => Ok(t),
        other => Err(DispatchErrorKind::Kernel(format!(
            "{op}: the CPU kernel returned {other:?} where a tensor was expected"
        ))
        .into()),
    }
}

/// `f` elementwise over `a` and `b` broadcast together, into a new tensor on their device.
fn binary(a: &Tensor, b: &Tensor, f: impl Fn(f32, f32) -> f32) -> Result<Tensor> {
    let shape = infer_size(a.sizes(), b.sizes())?;
    let x = a.broadcast_to(&shape)?.to_vec::<f32>()?;
    let y = b.broadcast_to(&shape)?.to_vec::<f32>()?;
    let out = empty_contiguous(&shape, ScalarType::Float, a.device())?;
    for ((o, x), y) in out.data_mut::<f32>()?.iter_mut().zip(x).zip(y) {
        *o = f(x, y);
    }
    Ok(out)
}

/// `add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor`.
pub(crate) fn add(self_: &Tensor, other: &Tensor, alpha: Scalar) -> Result<Tensor> {
    match float_pair(self_, other) {
        Some(backend) => {
            backend.count_native("aten::add.Tensor");
            let alpha = alpha.to_f64() as f32;
            binary(self_, other, |x, y| x + alpha * y)
        }
        None => on_cpu("aten::add.Tensor", (self_, other, alpha)),
    }
}

/// `mul.Tensor(Tensor self, Tensor other) -> Tensor`.
pub(crate) fn mul(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    match float_pair(self_, other) {
        Some(backend) => {
            backend.count_native("aten::mul.Tensor");
            binary(self_, other, |x, y| x * y)
        }
        None => on_cpu("aten::mul.Tensor", (self_, other)),
    }
}

/// `mm(Tensor self, Tensor mat2) -> Tensor`: a row-major triple loop.
pub(crate) fn mm(self_: &Tensor, mat2: &Tensor) -> Result<Tensor> {
    let shapes_fit = self_.dim() == 2 && mat2.dim() == 2 && self_.sizes()[1] == mat2.sizes()[0];
    let Some(backend) = float_pair(self_, mat2).filter(|_| shapes_fit) else {
        return on_cpu("aten::mm", (self_, mat2));
    };
    backend.count_native("aten::mm");
    let (n, k, m) = (
        self_.sizes()[0] as usize,
        self_.sizes()[1] as usize,
        mat2.sizes()[1] as usize,
    );
    let a = self_.to_vec::<f32>()?;
    let b = mat2.to_vec::<f32>()?;
    let out = empty_contiguous(&[n as i64, m as i64], ScalarType::Float, self_.device())?;
    {
        let mut c = out.data_mut::<f32>()?;
        for (c_row, a_row) in c.chunks_exact_mut(m.max(1)).zip(a.chunks_exact(k.max(1))) {
            for (&a_ip, b_row) in a_row.iter().zip(b.chunks_exact(m.max(1))) {
                for (c, &b) in c_row.iter_mut().zip(b_row) {
                    *c += a_ip * b;
                }
            }
        }
    }
    Ok(out)
}

/// `relu(Tensor self) -> Tensor` (NaN stays NaN, as in PyTorch).
pub(crate) fn relu(self_: &Tensor) -> Result<Tensor> {
    let Some(backend) = float_on_backend(self_) else {
        return on_cpu("aten::relu", (self_,));
    };
    backend.count_native("aten::relu");
    let x = self_.to_vec::<f32>()?;
    let out = empty_contiguous(self_.sizes(), ScalarType::Float, self_.device())?;
    for (o, x) in out.data_mut::<f32>()?.iter_mut().zip(x) {
        *o = if x > 0.0 || x.is_nan() { x } else { 0.0 };
    }
    Ok(out)
}

/// `sum(Tensor self, *, ScalarType? dtype=None) -> Tensor`: accumulated in double precision.
pub(crate) fn sum(self_: &Tensor, dtype: Option<ScalarType>) -> Result<Tensor> {
    let native = float_on_backend(self_).filter(|_| dtype.is_none_or(|d| d == ScalarType::Float));
    let Some(backend) = native else {
        let dtype = dtype.map_or(IValue::None, IValue::ScalarType);
        return on_cpu("aten::sum", (self_, dtype));
    };
    backend.count_native("aten::sum");
    let total: f64 = self_.to_vec::<f32>()?.iter().map(|&x| f64::from(x)).sum();
    let out = empty_contiguous(&[], ScalarType::Float, self_.device())?;
    out.data_mut::<f32>()?[0] = total as f32;
    Ok(out)
}

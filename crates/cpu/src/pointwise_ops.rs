//! The pointwise operators optimizers are written with: `lerp` (Scalar and Tensor weight),
//! `addcmul` and `addcdiv`, with their `out=` and in-place forms. Each runs on the shared
//! iterator (broadcasting, type promotion, any strides); float16 and bfloat16 compute in f32.
//! Their argument checks are the meta functions' (`switchboard_ops::structured`), and they
//! round as PyTorch's kernels do: `lerp` and `addcmul` with one fused multiply-add
//! (Note [Fused multiply-add]), `addcdiv` as `self + (value * tensor1) / tensor2`.

use switchboard_ops::structured;
use switchboard_tensor::{Scalar, Tensor};

use crate::dispatch_dtype::{scalar_in_opmath, Acc, CpuElement, Num};
use crate::error::Result;
use crate::iter::{IterConfig, TensorIter};
use crate::{dispatch_all_types, dispatch_floating_types};

/// PyTorch's `lerp`: `self + weight * (end - self)` for a small weight (`|weight| < 0.5`),
/// `end - (end - self) * (1 - weight)` otherwise (exact at both ends), as the one fused
/// multiply-add its vectorised kernel computes.
#[inline(always)]
fn lerp<N: Num>(start: N, end: N, weight: N) -> N {
    let half = N::from_f64(0.5);
    let small = weight.abs() < half;
    let (coeff, base) = if small {
        (weight, start)
    } else {
        (weight.sub(N::ONE), end)
    };
    coeff.mul_add(end.sub(start), base)
}

fn lerp_scalar_impl(
    self_: &Tensor,
    end: &Tensor,
    weight: Scalar,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    structured::lerp_same_dtypes(self_, end, None)?;
    let iter = IterConfig::new("lerp")
        .maybe_out(out)
        .input(self_)
        .input(end)
        .build()?;
    dispatch_floating_types!(iter.common_dtype(), "lerp_kernel_scalar", T => {
        let w = scalar_in_opmath::<T>(weight)?;
        iter.for_each2_fused(move |s: T, e: T| T::from_acc(lerp(s.to_acc(), e.to_acc(), w)))
    })?;
    iter.finish()
}

/// `lerp.Scalar(Tensor self, Tensor end, Scalar weight)`: `self + weight * (end - self)`.
///
/// ```
/// use switchboard_cpu::lerp_scalar;
/// use switchboard_tensor::{Scalar, Tensor};
/// let a = Tensor::from_vec(vec![0.0f32, 10.0], &[2]).unwrap();
/// let b = Tensor::from_vec(vec![4.0f32, 20.0], &[2]).unwrap();
/// let r = lerp_scalar(&a, &b, Scalar::Float(0.25)).unwrap();
/// assert_eq!(r.to_vec::<f32>().unwrap(), [1.0, 12.5]);
/// ```
pub fn lerp_scalar(self_: &Tensor, end: &Tensor, weight: Scalar) -> Result<Tensor> {
    lerp_scalar_impl(self_, end, weight, None)
}

/// `lerp.Scalar_out(Tensor self, Tensor end, Scalar weight, *, Tensor(a!) out)`.
pub fn lerp_scalar_out(
    self_: &Tensor,
    end: &Tensor,
    weight: Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    lerp_scalar_impl(self_, end, weight, Some(out))
}

/// `lerp_.Scalar(Tensor(a!) self, Tensor end, Scalar weight)`.
pub fn lerp_scalar_(self_: &Tensor, end: &Tensor, weight: Scalar) -> Result<Tensor> {
    lerp_scalar_impl(self_, end, weight, Some(self_))
}

fn lerp_tensor_impl(
    self_: &Tensor,
    end: &Tensor,
    weight: &Tensor,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    structured::lerp_same_dtypes(self_, end, Some(weight))?;
    let iter = IterConfig::new("lerp")
        .maybe_out(out)
        .input(self_)
        .input(end)
        .input(weight)
        .build()?;
    dispatch_floating_types!(iter.common_dtype(), "lerp_kernel_tensor", T => {
        iter.for_each3_fused(|s: T, e: T, w: T| {
            T::from_acc(lerp(s.to_acc(), e.to_acc(), w.to_acc()))
        })
    })?;
    iter.finish()
}

/// `lerp.Tensor(Tensor self, Tensor end, Tensor weight)`: `weight` has `self`'s dtype, or
/// is 0-dimensional.
pub fn lerp_tensor(self_: &Tensor, end: &Tensor, weight: &Tensor) -> Result<Tensor> {
    lerp_tensor_impl(self_, end, weight, None)
}

/// `lerp.Tensor_out(Tensor self, Tensor end, Tensor weight, *, Tensor(a!) out)`.
pub fn lerp_tensor_out(
    self_: &Tensor,
    end: &Tensor,
    weight: &Tensor,
    out: &Tensor,
) -> Result<Tensor> {
    lerp_tensor_impl(self_, end, weight, Some(out))
}

/// `lerp_.Tensor(Tensor(a!) self, Tensor end, Tensor weight)`.
pub fn lerp_tensor_(self_: &Tensor, end: &Tensor, weight: &Tensor) -> Result<Tensor> {
    lerp_tensor_impl(self_, end, weight, Some(self_))
}

fn ternary_iter<'a>(
    op: &'static str,
    self_: &'a Tensor,
    tensor1: &'a Tensor,
    tensor2: &'a Tensor,
    out: Option<&'a Tensor>,
) -> Result<TensorIter> {
    IterConfig::new(op)
        .maybe_out(out)
        .input(self_)
        .input(tensor1)
        .input(tensor2)
        .build()
}

fn addcmul_loop<T: CpuElement>(iter: &TensorIter, value: Scalar) -> Result<()> {
    let v: Acc<T> = scalar_in_opmath::<T>(value)?;
    iter.for_each3_fused(move |s: T, a: T, b: T| {
        T::from_acc(v.mul(a.to_acc()).mul_add(b.to_acc(), s.to_acc()))
    })
}

fn addcmul_impl(
    self_: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    value: Scalar,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let iter = ternary_iter("addcmul", self_, tensor1, tensor2, out)?;
    dispatch_all_types!(iter.common_dtype(), "addcmul_cpu_out", T => {
        addcmul_loop::<T>(&iter, value)
    })?;
    iter.finish()
}

/// `addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1)`:
/// `self + value * tensor1 * tensor2`.
///
/// ```
/// use switchboard_cpu::addcmul;
/// use switchboard_tensor::{Scalar, Tensor};
/// let s = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
/// let a = Tensor::from_vec(vec![3.0f32, 4.0], &[2]).unwrap();
/// let r = addcmul(&s, &a, &a, Scalar::Float(0.5)).unwrap();
/// assert_eq!(r.to_vec::<f32>().unwrap(), [5.5, 10.0]);
/// ```
pub fn addcmul(
    self_: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    value: Scalar,
) -> Result<Tensor> {
    addcmul_impl(self_, tensor1, tensor2, value, None)
}

/// `addcmul.out(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1, Tensor(a!)
/// out)`.
pub fn addcmul_out(
    self_: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    value: Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    addcmul_impl(self_, tensor1, tensor2, value, Some(out))
}

/// `addcmul_(Tensor(a!) self, Tensor tensor1, Tensor tensor2, *, Scalar value=1)`.
pub fn addcmul_(
    self_: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    value: Scalar,
) -> Result<Tensor> {
    addcmul_impl(self_, tensor1, tensor2, value, Some(self_))
}

fn addcdiv_impl(
    self_: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    value: Scalar,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    structured::addcdiv_check(tensor1, tensor2)?;
    let iter = ternary_iter("addcdiv", self_, tensor1, tensor2, out)?;
    // Integer operands were refused: the common dtype is floating.
    dispatch_floating_types!(iter.common_dtype(), "addcdiv_cpu_out", T => {
        let v: Acc<T> = scalar_in_opmath::<T>(value)?;
        iter.for_each3(move |s: T, a: T, b: T| {
            T::from_acc(s.to_acc().add(v.mul(a.to_acc()).div(b.to_acc())))
        })
    })?;
    iter.finish()
}

/// `addcdiv(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1)`:
/// `self + value * tensor1 / tensor2` (not for two integer operands).
///
/// ```
/// use switchboard_cpu::addcdiv;
/// use switchboard_tensor::{Scalar, Tensor};
/// let s = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
/// let a = Tensor::from_vec(vec![3.0f32, 4.0], &[2]).unwrap();
/// let b = Tensor::from_vec(vec![2.0f32, 8.0], &[2]).unwrap();
/// let r = addcdiv(&s, &a, &b, Scalar::Int(2)).unwrap();
/// assert_eq!(r.to_vec::<f32>().unwrap(), [4.0, 3.0]);
/// ```
pub fn addcdiv(
    self_: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    value: Scalar,
) -> Result<Tensor> {
    addcdiv_impl(self_, tensor1, tensor2, value, None)
}

/// `addcdiv.out(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1, Tensor(a!)
/// out)`.
pub fn addcdiv_out(
    self_: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    value: Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    addcdiv_impl(self_, tensor1, tensor2, value, Some(out))
}

/// `addcdiv_(Tensor(a!) self, Tensor tensor1, Tensor tensor2, *, Scalar value=1)`.
pub fn addcdiv_(
    self_: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    value: Scalar,
) -> Result<Tensor> {
    addcdiv_impl(self_, tensor1, tensor2, value, Some(self_))
}

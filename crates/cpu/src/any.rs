//! `any` over all or some dimensions (`any`, `any.dim`, `any.dims` and their `out=` forms),
//! over [`reduce`](crate::reduce): bool results, or uint8 for a uint8 input as in PyTorch.

use std::marker::PhantomData;

use smallvec::SmallVec;
use switchboard_ops::structured::{self, MetaOutput};
use switchboard_tensor::{ScalarType, Tensor};

use crate::dispatch_all_types_and_bool;
use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{check_cpu_or_meta, Result};
use crate::reduce::{reduce_into, reduction_mask, Reducer};
use crate::structured_output::structured_output;

/// Whether any element is non-zero (NaN counts), written as `O` (bool or uint8).
struct AnyR<T, O>(PhantomData<(T, O)>);

impl<T: CpuElement, O: CpuElement> Reducer<T> for AnyR<T, O> {
    type Acc = bool;
    type Out = O;
    fn init(&self) -> bool {
        false
    }
    #[inline]
    fn fold(&self, a: bool, x: T, _: i64) -> bool {
        a || x.to_acc() != <T::Acc as Num>::ZERO
    }
    fn combine(&self, a: bool, b: bool) -> bool {
        a || b
    }
    fn project(&self, a: bool) -> O {
        O::from_acc(<O::Acc as Num>::from_i64(a as i64))
    }
}

/// Reduces `self_` into the output `meta` describes, over `dim` (`None`: every dimension;
/// an empty list: none, as `any.dims` says).
fn any_impl(
    self_: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    meta: MetaOutput,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    check_cpu_or_meta("any", self_.device())?;
    let result = structured_output(meta.clone(), out)?;
    let mask = match dim {
        Some([]) => SmallVec::from_elem(false, self_.dim()),
        _ => reduction_mask(dim, self_.dim())?,
    };
    dispatch_all_types_and_bool!(self_.dtype(), "any_cpu", T => {
        if meta.dtype == ScalarType::Byte {
            reduce_into(self_, &result, &mask, keepdim, &AnyR::<T, u8>(PhantomData))
        } else {
            reduce_into(self_, &result, &mask, keepdim, &AnyR::<T, bool>(PhantomData))
        }
    })?;
    Ok(result)
}

/// `any(Tensor self)`: whether any element is non-zero.
///
/// ```
/// use switchboard_cpu::{any, any_dim};
/// use switchboard_tensor::{ScalarType, Tensor};
/// let t = Tensor::from_vec(vec![0.0f32, 0.0, 0.0, 2.0], &[2, 2]).unwrap();
/// assert_eq!(any(&t).unwrap().to_vec::<bool>().unwrap(), [true]);
/// assert_eq!(any_dim(&t, 1, false).unwrap().to_vec::<bool>().unwrap(), [false, true]);
/// let bytes = Tensor::from_vec(vec![0u8, 3], &[2]).unwrap();
/// assert_eq!(any(&bytes).unwrap().dtype(), ScalarType::Byte);
/// ```
pub fn any(self_: &Tensor) -> Result<Tensor> {
    any_impl(self_, None, false, structured::any(self_, None)?, None)
}

/// `any.all_out(Tensor self, *, Tensor(a!) out)`.
pub fn any_all_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
    any_impl(
        self_,
        None,
        false,
        structured::any(self_, Some(out))?,
        Some(out),
    )
}

/// `any.dim(Tensor self, int dim, bool keepdim=False)`.
pub fn any_dim(self_: &Tensor, dim: i64, keepdim: bool) -> Result<Tensor> {
    let meta = structured::any_dim(self_, dim, keepdim, None)?;
    any_impl(self_, Some(&[dim]), keepdim, meta, None)
}

/// `any.out(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) out)`.
pub fn any_out(self_: &Tensor, dim: i64, keepdim: bool, out: &Tensor) -> Result<Tensor> {
    let meta = structured::any_dim(self_, dim, keepdim, Some(out))?;
    any_impl(self_, Some(&[dim]), keepdim, meta, Some(out))
}

/// `any.dims(Tensor self, int[]? dim=None, bool keepdim=False)`.
pub fn any_dims(self_: &Tensor, dim: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    let meta = structured::any_dims(self_, dim, keepdim, None)?;
    any_impl(self_, dim, keepdim, meta, None)
}

/// `any.dims_out(Tensor self, int[]? dim=None, bool keepdim=False, *, Tensor(a!) out)`.
pub fn any_dims_out(
    self_: &Tensor,
    dim: Option<&[i64]>,
    keepdim: bool,
    out: &Tensor,
) -> Result<Tensor> {
    let meta = structured::any_dims(self_, dim, keepdim, Some(out))?;
    any_impl(self_, dim, keepdim, meta, Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_dims_reduce_nothing_and_nan_counts() {
        let t = Tensor::from_vec(vec![0.0f32, f32::NAN, 0.0, 0.0], &[2, 2]).unwrap();
        let none: &[i64] = &[];
        let same = any_dims(&t, Some(none), false).unwrap();
        assert_eq!(same.sizes(), &[2, 2]);
        assert_eq!(same.to_vec::<bool>().unwrap(), [false, true, false, false]);
        let all = any_dims(&t, None, true).unwrap();
        assert_eq!(
            (all.sizes(), all.to_vec::<bool>().unwrap()),
            (&[1i64, 1][..], vec![true])
        );
        let float_out = Tensor::zeros(&[0], ScalarType::Float).unwrap();
        let e = any_all_out(&t, &float_out).unwrap_err().to_string();
        assert!(
            e.contains("any only supports bool tensor for result, got: Float"),
            "{e}"
        );
    }
}

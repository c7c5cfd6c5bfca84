//! Products over dimensions: `prod` and `prod.dim_int` (+ `prod.int_out`), over
//! [`reduce`](crate::reduce).

use std::marker::PhantomData;

use switchboard_ops::structured;
use switchboard_tensor::{ScalarType, Tensor};

use crate::copy::cast;
use crate::dispatch_all_types_and_bool;
use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{check_cpu_or_meta, Result};
use crate::reduce::{reduce_into, reduction_mask, Reducer};
use crate::structured_output::structured_output;

/// Multiplies in `T` itself, rounding after each product as PyTorch's `prod_kernel_impl`
/// (`binary_kernel_reduce_vec` over `scalar_t`); bool multiplication is `and`.
struct ProdR<T>(PhantomData<T>);

impl<T: CpuElement> Reducer<T> for ProdR<T> {
    type Acc = T;
    type Out = T;
    fn init(&self) -> T {
        T::from_acc(<T::Acc as Num>::ONE)
    }
    #[inline]
    fn fold(&self, a: T, x: T, _: i64) -> T {
        T::from_acc(a.to_acc().mul(x.to_acc()))
    }
    fn combine(&self, a: T, b: T) -> T {
        self.fold(a, b, 0)
    }
    fn project(&self, a: T) -> T {
        a
    }
}

fn prod_impl(
    self_: &Tensor,
    dim: Option<i64>,
    keepdim: bool,
    dtype: Option<ScalarType>,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    check_cpu_or_meta("prod", self_.device())?;
    let meta = match dim {
        Some(d) => structured::prod_dim_int(self_, d, keepdim, dtype, out)?,
        None => structured::prod(self_, dtype)?,
    };
    let result = structured_output(meta.clone(), out)?;
    let dims = dim.map(|d| [d]);
    let mask = reduction_mask(dims.as_ref().map(|d| &d[..]), self_.dim())?;
    let input = cast(self_, meta.dtype)?;
    dispatch_all_types_and_bool!(meta.dtype, "prod_out_cpu", T => {
        reduce_into(&input, &result, &mask, keepdim, &ProdR::<T>(PhantomData))
    })?;
    Ok(result)
}

/// `prod(Tensor self, *, ScalarType? dtype=None)`: the product of all elements (integers and
/// bool multiply to `Long` unless `dtype` says otherwise; an empty tensor's product is 1).
///
/// ```
/// use switchboard_cpu::prod;
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![1i32, 2, 3, 4], &[2, 2]).unwrap();
/// assert_eq!(prod(&t, None).unwrap().to_vec::<i64>().unwrap(), [24]);
/// ```
pub fn prod(self_: &Tensor, dtype: Option<ScalarType>) -> Result<Tensor> {
    if !self_.has_data() {
        // Note [Meta path of unstructured kernels] in structured_output.rs.
        return structured::prod(self_, dtype)?.allocate();
    }
    prod_impl(self_, None, false, dtype, None)
}

/// `prod.out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out)`: `out` must have the
/// functional result's dtype.
pub fn prod_out(self_: &Tensor, dtype: Option<ScalarType>, out: &Tensor) -> Result<Tensor> {
    if !self_.has_data() {
        // Note [Meta path of unstructured kernels] in structured_output.rs.
        return structured::resize_out(out, &structured::prod(self_, dtype)?);
    }
    prod_impl(self_, None, false, dtype, Some(out))
}

/// `prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None)`.
pub fn prod_dim_int(
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
    dtype: Option<ScalarType>,
) -> Result<Tensor> {
    prod_impl(self_, Some(dim), keepdim, dtype, None)
}

/// `prod.int_out(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None,
/// Tensor(a!) out)`.
pub fn prod_int_out(
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
    dtype: Option<ScalarType>,
    out: &Tensor,
) -> Result<Tensor> {
    prod_impl(self_, Some(dim), keepdim, dtype, Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products() {
        let t = Tensor::from_vec(vec![1.0f32, 2.0, 0.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
        let p = prod_dim_int(&t, 1, false, None).unwrap();
        assert_eq!(p.to_vec::<f32>().unwrap(), [0.0, 120.0]);
        let k = prod_dim_int(&t, 0, true, Some(ScalarType::Double)).unwrap();
        assert_eq!((k.sizes(), k.dtype()), (&[1i64, 3][..], ScalarType::Double));
        assert_eq!(k.to_vec::<f64>().unwrap(), [4.0, 10.0, 0.0]);
        let empty = prod(&Tensor::zeros(&[0, 2], ScalarType::Float).unwrap(), None).unwrap();
        assert_eq!(empty.to_vec::<f32>().unwrap(), [1.0]);
        let b = Tensor::from_vec(vec![true, false], &[2]).unwrap();
        assert_eq!(prod(&b, None).unwrap().dtype(), ScalarType::Long);
    }
}

//! Cumulative sums along a dimension: `cumsum`, `cumsum_` and `cumsum.out` (PyTorch's
//! `cumsum_out` impl and `cumsum_cpu_kernel`).

use switchboard_ops::structured;
use switchboard_tensor::{wrap_dim, Access, DimVec, ScalarType, Tensor};

use crate::copy::{cast, copy_into};
use crate::dispatch_all_types;
use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{check_cpu_or_meta, Result};
use crate::index::Positions;
use crate::loops::GRAIN_SIZE;
use crate::structured_output::structured_output;

// Note [Cumulative sum accumulation]
// PyTorch's CPU kernel accumulates each line in `at::acc_type<scalar_t, /*is_cuda=*/false>`:
// double for every floating dtype (float included), int64 for the integers, and rounds each
// prefix sum to the output dtype. So does this one: a float32 cumsum of many terms matches
// PyTorch's to the last bit rather than drifting with float32 rounding.

/// A running sum in the CPU accumulate type of `T` (Note [Cumulative sum accumulation]).
#[derive(Clone, Copy)]
enum Running {
    Float(f64),
    Int(i64),
}

impl Running {
    fn zero<T: CpuElement>() -> Running {
        if <T::Acc as Num>::IS_FLOAT {
            Running::Float(0.0)
        } else {
            Running::Int(0)
        }
    }

    #[inline]
    fn add<T: CpuElement>(self, x: T) -> Running {
        match self {
            Running::Float(s) => Running::Float(s + x.to_acc().to_f64()),
            Running::Int(s) => Running::Int(s.wrapping_add(x.to_acc().to_i64())),
        }
    }

    #[inline]
    fn value<T: CpuElement>(self) -> T {
        match self {
            Running::Float(s) => T::from_acc(<T::Acc as Num>::from_f64(s)),
            Running::Int(s) => T::from_acc(<T::Acc as Num>::from_i64(s)),
        }
    }
}

/// Writes the prefix sums of every line of `input` along `d` into `result` (same shape and
/// dtype; `result` may be `input` itself: each element is read before it is written).
fn cumsum_lines(input: &Tensor, d: usize, result: &Tensor) -> Result<()> {
    let n = input.sizes()[d] as usize;
    let mut lines = DimVec::from_slice(input.sizes());
    lines[d] = 1;
    let pos = Positions::new(&lines, [input.strides(), result.strides()]);
    let (si, so) = (input.strides()[d] as isize, result.strides()[d] as isize);
    let _access = Access::new(&[input], &[result])?;
    let (pi, po) = (input.data_ptr() as usize, result.mut_data_ptr() as usize);
    dispatch_all_types!(result.dtype(), "cumsum_out_cpu", T => {
        pos.par_run(GRAIN_SIZE / n.max(1), |[oi, oo]| {
            let mut acc = Running::zero::<T>();
            for j in 0..n as isize {
                // SAFETY: `_access` holds the borrows; the offsets address elements of one
                // line of tensors of `input`'s shape; threads own whole lines, and an element
                // is read before the same position is written (in place).
                unsafe {
                    acc = acc.add(*(pi as *const T).offset(oi + j * si));
                    *(po as *mut T).offset(oo + j * so) = acc.value::<T>();
                }
            }
        });
        Ok(())
    })
}

fn cumsum_impl(
    self_: &Tensor,
    dim: i64,
    dtype: Option<ScalarType>,
    out: Option<&Tensor>,
    inplace: bool,
) -> Result<Tensor> {
    check_cpu_or_meta("cumsum", self_.device())?;
    // In place, `self` is the output the meta function sees (its dtype, unless `dtype` says
    // otherwise).
    let meta = structured::cumsum(self_, dim, dtype, if inplace { Some(self_) } else { out })?;
    let result = if inplace {
        structured::check_inplace(self_, &meta)?;
        self_.clone()
    } else {
        structured_output(meta.clone(), out)?
    };
    if self_.dim() == 0 {
        copy_into(&result, self_)?;
    } else if self_.numel() == 0 {
        crate::zero_(&result)?;
    } else {
        let d = wrap_dim(dim, self_.dim())?;
        cumsum_lines(&cast(self_, meta.dtype)?, d, &result)?;
    }
    Ok(result)
}

/// `cumsum(Tensor self, int dim, *, ScalarType? dtype=None)`: the sums of the elements up to
/// each position along `dim` (integers and bool sum to `Long` unless `dtype` says otherwise).
///
/// ```
/// use switchboard_cpu::cumsum;
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
/// let c = cumsum(&t, 1, None).unwrap();
/// assert_eq!(c.to_vec::<i64>().unwrap(), [1, 3, 6, 4, 9, 15]);
/// ```
pub fn cumsum(self_: &Tensor, dim: i64, dtype: Option<ScalarType>) -> Result<Tensor> {
    cumsum_impl(self_, dim, dtype, None, false)
}

/// `cumsum_(Tensor(a!) self, int dim, *, ScalarType? dtype=None)`.
pub fn cumsum_(self_: &Tensor, dim: i64, dtype: Option<ScalarType>) -> Result<Tensor> {
    cumsum_impl(self_, dim, dtype, None, true)
}

/// `cumsum.out(Tensor self, int dim, *, ScalarType? dtype=None, Tensor(a!) out)`.
pub fn cumsum_out(
    self_: &Tensor,
    dim: i64,
    dtype: Option<ScalarType>,
    out: &Tensor,
) -> Result<Tensor> {
    cumsum_impl(self_, dim, dtype, Some(out), false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_tensor::RawOps;

    #[test]
    fn float_lines_accumulate_in_double() {
        // 1 + 1e-8 (x1000) stays above 1 with a double accumulator; float32 would lose them.
        let mut v = vec![1.0f32];
        v.extend(std::iter::repeat_n(1e-8f32, 1000));
        let t = Tensor::from_vec(v, &[1001]).unwrap();
        let c = cumsum(&t, 0, None).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(c[1000], (1.0f64 + 1000.0 * 1e-8f32 as f64) as f32);
    }

    #[test]
    fn in_place_and_out_follow_pytorchs_dtype_rules() {
        let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
        let along0 = cumsum(&t.transpose(0, 1).unwrap(), 0, None).unwrap();
        assert_eq!(along0.to_vec::<f32>().unwrap(), [1.0, 3.0, 3.0, 7.0]);
        cumsum_(&t, 1, None).unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 3.0, 3.0, 7.0]);
        let e = cumsum_(&t, 0, Some(ScalarType::Long))
            .unwrap_err()
            .to_string();
        assert!(e.contains("Bad in-place call"), "{e}");
        let ints = Tensor::from_vec(vec![1i32, 2], &[2]).unwrap();
        cumsum_(&ints, 0, None).unwrap();
        assert_eq!(ints.to_vec::<i32>().unwrap(), [1, 3]);
        let bools = Tensor::from_vec(vec![true, true], &[2]).unwrap();
        assert_eq!(
            cumsum(&bools, 0, None).unwrap().to_vec::<i64>().unwrap(),
            [1, 2]
        );
        let e = cumsum_(&bools, 0, None).unwrap_err().to_string();
        assert!(
            e.contains("\"cumsum_out_cpu\" not implemented for 'Bool'"),
            "{e}"
        );
        let out = Tensor::zeros(&[0], ScalarType::Long).unwrap();
        let r = cumsum_out(&t, 0, None, &out).unwrap();
        assert_eq!(r.to_vec::<i64>().unwrap(), [1, 3, 4, 10]);
    }
}

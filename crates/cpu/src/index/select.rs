//! `index_select` and `index_select.out`.

use switchboard_tensor::{wrap_dim, Access, DimVec, Tensor};

use crate::error::{check_cpu_or_meta, invalid, same_device, Result};
use crate::iter::check_internal_overlap;
use crate::shape::check_no_overlap;

use super::common::*;

fn index_select_impl(
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let mut all = vec![self_, index];
    all.extend(out);
    let device = same_device(&all)?;
    check_cpu_or_meta("index_select", device)?;
    let d = wrap_dim(dim, self_.dim())?;
    let n = index.numel();
    if index.dim() > 1 {
        return Err(invalid("index_select(): Index is supposed to be a vector"));
    }
    if self_.dim() == 0 && n != 1 {
        return Err(invalid(format!(
            "index_select(): Index to scalar can have only 1 value, got {n} value(s)"
        )));
    }
    if !is_index_dtype(index) {
        return Err(invalid(
            "index_select(): Expected dtype int32 or int64 for index",
        ));
    }
    let mut sizes = DimVec::from_slice(self_.sizes());
    if self_.dim() > 0 {
        sizes[d] = n;
    }
    let result = match out {
        Some(o) => {
            if o.dtype() != self_.dtype() {
                return Err(invalid(
                    "index_select(): self and result must have the same scalar type",
                ));
            }
            check_internal_overlap(o)?;
            check_no_overlap(o, self_)?;
            check_no_overlap(o, index)?;
            o.resize_output(&sizes)?
        }
        None => Tensor::empty_on(&sizes, self_.dtype(), device)?,
    };
    if !result.has_data() {
        return Ok(result);
    }
    let idx = index_values(index, &result)?;
    let bound = nonempty_size(self_, d);
    if idx.iter().any(|&i| i < 0 || i >= bound) {
        return Err(invalid("index out of range in self"));
    }
    if result.numel() == 0 {
        return Ok(result);
    }
    let (a, b) = (nonempty(&result)?, nonempty(self_)?);
    let (sa, sb) = (a.strides()[d] as isize, b.strides()[d] as isize);
    let off_a: Vec<isize> = (0..idx.len() as isize).map(|i| i * sa).collect();
    let off_b: Vec<isize> = idx.iter().map(|&i| i as isize * sb).collect();
    let _access = Access::new(&[&b], &[&a])?;
    let (pa, pb) = (a.mut_data_ptr() as usize, b.data_ptr() as usize);
    by_element_size!(a.element_size(), E => {
        slice_pairs(&a, &b, d, &off_a, &off_b, true, |n, oa, ob, sa, sb| {
            // SAFETY: `_access` borrows both storages (the output exclusively); the offsets
            // are in-range strided offsets (indices were checked against the size of `dim`);
            // each output element is written by one thread only; the output does not overlap
            // `self` (checked for `out=`, fresh otherwise).
            unsafe {
                let (pa, pb) = ((pa as *mut E).offset(oa), (pb as *const E).offset(ob));
                if sa == 1 && sb == 1 {
                    std::ptr::copy_nonoverlapping(pb, pa, n);
                } else {
                    for k in 0..n as isize {
                        *pa.offset(k * sa) = *pb.offset(k * sb);
                    }
                }
            }
        })
    });
    Ok(result)
}

/// `index_select(Tensor self, int dim, Tensor index) -> Tensor`
///
/// The slices of `self` along `dim` at the (int32 or int64) positions in the vector `index`.
///
/// ```
/// use switchboard_cpu::index_select;
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap();
/// let i = Tensor::from_vec(vec![2i64, 0, 2], &[3]).unwrap();
/// let r = index_select(&t, 0, &i).unwrap();
/// assert_eq!(r.to_vec::<f32>().unwrap(), [5.0, 6.0, 1.0, 2.0, 5.0, 6.0]);
/// ```
pub fn index_select(self_: &Tensor, dim: i64, index: &Tensor) -> Result<Tensor> {
    index_select_impl(self_, dim, index, None)
}

/// `index_select.out(Tensor self, int dim, Tensor index, *, Tensor(a!) out) -> Tensor(a!)`
///
/// Like [`index_select`], into `out` (same dtype as `self`; resized when its shape differs,
/// the returned tensor being the resized `out`).
pub fn index_select_out(self_: &Tensor, dim: i64, index: &Tensor, out: &Tensor) -> Result<Tensor> {
    index_select_impl(self_, dim, index, Some(out))
}

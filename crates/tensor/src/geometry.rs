//! View geometry: resolving `-1` in a requested shape ([`infer_view_size`]) and the strides of
//! a view of a strided tensor ([`compute_view_stride`], PyTorch's `computeStride`).

use crate::builder::check_sizes;
use crate::checked_size::CheckedSize;
use crate::error::{list, Result, TensorError};
use crate::DimVec;

/// Resolves a `-1` in `shape` for a tensor of `numel` elements (`infer_size`).
///
/// ```
/// use switchboard_tensor::infer_view_size;
/// assert_eq!(&infer_view_size(&[2, -1], 6).unwrap()[..], &[2, 3]);
/// assert_eq!(infer_view_size(&[4, -1], 6).unwrap_err().to_string(),
///            "shape '[4, -1]' is invalid for input of size 6");
/// ```
pub fn infer_view_size(shape: &[i64], numel: i64) -> Result<DimVec> {
    let mut res = DimVec::from_slice(shape);
    let mut product = CheckedSize::new(1);
    let mut infer_dim = None;
    for (d, &s) in shape.iter().enumerate() {
        if s == -1 {
            if infer_dim.is_some() {
                return Err(TensorError::invalid("only one dimension can be inferred"));
            }
            infer_dim = Some(d);
        } else if s >= 0 {
            product = product * s;
        } else {
            return Err(TensorError::invalid(format!("invalid shape dimension {s}")));
        }
    }
    // A product that overflows matches no tensor's element count (Note [Checked size
    // arithmetic]).
    let Some(newsize) = product.value() else {
        return Err(TensorError::ShapeNumel {
            shape: shape.to_vec(),
            numel,
        });
    };
    if numel == newsize || (infer_dim.is_some() && newsize > 0 && numel % newsize == 0) {
        if let Some(d) = infer_dim {
            if newsize == 0 {
                return Err(TensorError::invalid(format!(
                    "cannot reshape tensor of 0 elements into shape {} because the \
                     unspecified dimension size -1 can be any value and is ambiguous",
                    list(shape)
                )));
            }
            res[d] = numel / newsize;
        }
        // With zero elements the other sizes can be anything: their product must still fit.
        check_sizes(&res)?;
        return Ok(res);
    }
    Err(TensorError::ShapeNumel {
        shape: shape.to_vec(),
        numel,
    })
}

/// The strides of a view of `old` (sizes/strides) with sizes `new`, or `None` when some
/// dimension of `new` would span two non-contiguous chunks (PyTorch's `computeStride`).
///
/// ```
/// use switchboard_tensor::compute_view_stride;
/// // A transposed (3, 2) tensor can be viewed as (3, 2, 1) but not flattened.
/// assert_eq!(&compute_view_stride(&[3, 2], &[1, 3], &[3, 2, 1]).unwrap()[..], &[1, 3, 3]);
/// assert!(compute_view_stride(&[3, 2], &[1, 3], &[6]).is_none());
/// ```
pub fn compute_view_stride(
    oldshape: &[i64],
    oldstride: &[i64],
    newshape: &[i64],
) -> Option<DimVec> {
    if oldshape.is_empty() {
        return Some(DimVec::from_elem(1, newshape.len()));
    }
    let numel: i64 = oldshape.iter().product();
    if numel == 0 && oldshape == newshape {
        return Some(DimVec::from_slice(oldstride));
    }
    let mut newstride = DimVec::from_elem(0, newshape.len());
    if numel == 0 {
        for d in (0..newshape.len()).rev() {
            newstride[d] = if d == newshape.len() - 1 {
                1
            } else {
                newshape[d + 1].max(1).saturating_mul(newstride[d + 1])
            };
        }
        return Some(newstride);
    }
    let mut view_d = newshape.len() as i64 - 1;
    let mut chunk_base_stride = *oldstride.last()?;
    let mut tensor_numel: i64 = 1;
    let mut view_numel: i64 = 1;
    for tensor_d in (0..oldshape.len()).rev() {
        tensor_numel *= oldshape[tensor_d];
        let chunk_end = tensor_d == 0
            || (oldshape[tensor_d - 1] != 1
                && oldstride[tensor_d - 1] != tensor_numel.saturating_mul(chunk_base_stride));
        if chunk_end {
            while view_d >= 0 && (view_numel < tensor_numel || newshape[view_d as usize] == 1) {
                newstride[view_d as usize] = view_numel.saturating_mul(chunk_base_stride);
                view_numel *= newshape[view_d as usize];
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if tensor_d > 0 {
                chunk_base_stride = oldstride[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    if view_d != -1 {
        return None;
    }
    Some(newstride)
}

//! `repeat` (TensorShape.cpp): a tensor tiled along each dimension.

use switchboard_tensor::{RawOps, Tensor};

use crate::copy::copy_into;
use crate::error::{check_cpu_or_meta, invalid, Result};

/// `repeat(Tensor self, SymInt[] repeats)`: `self` tiled `repeats[i]` times along dimension
/// `i`; extra leading repeats add dimensions. The result is contiguous.
///
/// ```
/// use switchboard_cpu::repeat;
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
/// let r = repeat(&t, &[2, 2]).unwrap();
/// assert_eq!((r.sizes(), r.to_vec::<i64>().unwrap()), (&[2i64, 4][..], vec![1, 2, 1, 2, 1, 2, 1, 2]));
/// ```
pub fn repeat(self_: &Tensor, repeats: &[i64]) -> Result<Tensor> {
    check_cpu_or_meta("repeat", self_.device())?;
    if repeats.len() < self_.dim() {
        return Err(invalid(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions \
             of tensor",
        ));
    }
    let extra = repeats.len() - self_.dim();
    let mut padded = vec![1i64; extra];
    padded.extend_from_slice(self_.sizes());
    let mut target = Vec::with_capacity(repeats.len());
    for (&s, &r) in padded.iter().zip(repeats) {
        target.push(
            s.checked_mul(r)
                .ok_or_else(|| invalid("repeat: the result's size overflows int64"))?,
        );
    }
    if let Some(&neg) = target.iter().find(|&&s| s < 0) {
        return Err(invalid(format!(
            "Trying to create tensor with negative dimension {neg}: {target:?}"
        )));
    }
    let result = Tensor::empty_on(&target, self_.dtype(), self_.device())?;
    if !result.has_data() || result.numel() == 0 {
        return Ok(result);
    }
    // `result` seen as [r0, s0, r1, s1, ...] (PyTorch unfolds it so), filled from `self`
    // broadcast over the repeat dims.
    let x = self_.view(&padded).or_else(|_| self_.reshape(&padded))?;
    let (mut sizes, mut strides, mut src_strides) = (Vec::new(), Vec::new(), Vec::new());
    for (i, (&s, &r)) in padded.iter().zip(repeats).enumerate() {
        let stride = result.strides()[i];
        sizes.extend([r, s]);
        strides.extend([stride * s, stride]);
        src_strides.extend([0, x.strides()[i]]);
    }
    let tiles = result.as_strided(&sizes, &strides, result.storage_offset())?;
    let source = x.as_strided(&sizes, &src_strides, x.storage_offset())?;
    copy_into(&tiles, &source)?;
    Ok(result)
}

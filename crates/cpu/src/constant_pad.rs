//! `constant_pad_nd` (PadNd.cpp): pads the last dimensions with a value; negative pads crop.

use switchboard_tensor::{RawOps, Scalar, Tensor};

use crate::copy::{clone, copy_into};
use crate::error::{check_cpu_or_meta, invalid, Result};
use crate::factory::fill_scalar_;

/// `constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0)`: `pad` holds (before, after)
/// pairs from the last dimension backwards; negative amounts crop `self` first (PyTorch's
/// `narrow` errors when they crop more than there is). The output is a fresh tensor in
/// `self`'s suggested memory format, even when only cropping.
///
/// ```
/// use switchboard_cpu::constant_pad_nd;
/// use switchboard_tensor::{Scalar, Tensor};
/// let t = Tensor::from_vec(vec![1i64, 2, 3], &[1, 3]).unwrap();
/// let p = constant_pad_nd(&t, &[-1, 1], Scalar::Int(9)).unwrap();
/// assert_eq!(p.to_vec::<i64>().unwrap(), [2, 3, 9]);
/// ```
pub fn constant_pad_nd(self_: &Tensor, pad: &[i64], value: Scalar) -> Result<Tensor> {
    check_cpu_or_meta("constant_pad_nd", self_.device())?;
    if !pad.len().is_multiple_of(2) {
        return Err(invalid(format!(
            "Length of pad must be even but instead it equals {}",
            pad.len()
        )));
    }
    let l_inp = self_.dim();
    let l_pad = pad.len() / 2;
    if l_inp < l_pad {
        return Err(invalid(format!(
            "Length of pad should be no more than twice the number of dimensions of the input. \
             Pad length is {}while the input has {}dimensions.",
            pad.len(),
            l_inp
        )));
    }
    let l_diff = l_inp - l_pad;
    // Crop by the negative amounts first.
    let mut input = self_.clone();
    let mut all_non_positive = true;
    for i in l_diff..l_inp {
        let at = 2 * (l_inp - i - 1);
        let (before, after) = (pad[at], pad[at + 1]);
        if before < 0 {
            let size = input.sizes()[i];
            input = input.narrow(i as i64, -before, size + before)?;
        } else if before != 0 {
            all_non_positive = false;
        }
        if after < 0 {
            let size = input.sizes()[i];
            input = input.narrow(i as i64, 0, size + after)?;
        } else if after != 0 {
            all_non_positive = false;
        }
    }
    if all_non_positive {
        return clone(&input, None);
    }
    let mut sizes = self_.sizes()[..l_diff].to_vec();
    for i in 0..l_pad {
        let at = pad.len() - (i + 1) * 2;
        let size = self_.sizes()[l_diff + i];
        let new = size
            .checked_add(pad[at])
            .and_then(|s| s.checked_add(pad[at + 1]))
            .ok_or_else(|| invalid("constant_pad_nd: the padded size overflows int64"))?;
        if new < 0 {
            return Err(invalid(format!(
                "The input size {size}, plus negative padding {} and {} resulted in a negative \
                 output size, which is invalid. Check dimension {} of your input.",
                pad[at],
                pad[at + 1],
                l_diff + i
            )));
        }
        sizes.push(new);
    }
    let format = self_.suggest_memory_format();
    let output = Tensor::empty_with_format(&sizes, self_.dtype(), self_.device(), format)?;
    fill_scalar_(&output, value)?;
    if !output.has_data() {
        return Ok(output);
    }
    // The region the (cropped) input fills.
    let mut region = output.clone();
    for i in l_diff..l_inp {
        let at = 2 * (l_inp - i - 1);
        if pad[at] > 0 {
            let size = region.sizes()[i];
            region = region.narrow(i as i64, pad[at], size - pad[at])?;
        }
        if pad[at + 1] > 0 {
            let size = region.sizes()[i];
            region = region.narrow(i as i64, 0, size - pad[at + 1])?;
        }
    }
    copy_into(&region, &input)?;
    Ok(output)
}

//! `_local_scalar_dense`: the value of a one-element tensor (what `item()` reads).

use switchboard_tensor::{RawOps, Scalar, Tensor};

use crate::error::{invalid, Result};

/// `_local_scalar_dense(Tensor self) -> Scalar`: the element of a one-element tensor (the
/// first one, in memory, of a larger tensor, as PyTorch reads it), as a `Scalar` of its
/// dtype's kind (int, float or bool). Meta tensors hold no value.
///
/// ```
/// use switchboard_tensor::{Scalar, Tensor};
/// let t = Tensor::from_vec(vec![7i64], &[1, 1]).unwrap();
/// assert_eq!(switchboard_cpu::_local_scalar_dense(&t).unwrap(), Scalar::Int(7));
/// ```
pub fn _local_scalar_dense(self_: &Tensor) -> Result<Scalar> {
    if self_.device().is_meta() {
        return Err(invalid("Tensor.item() cannot be called on meta tensors"));
    }
    if self_.numel() == 0 {
        return Err(invalid("_local_scalar_dense: Empty tensor not supported"));
    }
    if self_.numel() > 1 {
        // PyTorch reads the first element without checking the count (`item()` checks).
        return self_.as_strided(&[], &[], self_.storage_offset())?.item();
    }
    self_.item()
}

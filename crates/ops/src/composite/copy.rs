//! `copy`, the functional form of `copy_` (CompositeExplicitAutogradNonFunctional, as in
//! PyTorch): what functionalization turns `self.copy_(src)` into.

use switchboard_dispatcher::Result;
use switchboard_tensor::Tensor;

/// A copy of `self` with its sizes, strides and storage offset (PyTorch's
/// `clone_preserve_strides`): the whole storage is cloned and viewed alike, so a later
/// `copy_` or scatter writes the same positions it would have written in `self`. A `self`
/// with internally overlapping elements cannot be written alike: it is cloned densely.
fn clone_preserve_strides(self_: &Tensor) -> Result<Tensor> {
    let overlapping = self_
        .sizes()
        .iter()
        .zip(self_.strides())
        .any(|(&s, &st)| s > 1 && st == 0);
    if overlapping {
        return crate::clone(self_);
    }
    let storage_numel = (self_.storage().nbytes() / self_.element_size()) as i64;
    let whole = crate::as_strided_with(
        self_,
        &[storage_numel],
        &[1],
        crate::AsStridedOptions {
            storage_offset: Some(0),
        },
    )?;
    crate::as_strided_with(
        &crate::clone(&whole)?,
        self_.sizes(),
        self_.strides(),
        crate::AsStridedOptions {
            storage_offset: Some(self_.storage_offset()),
        },
    )
}

/// `copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor`: a new tensor with
/// `self`'s dtype, device, sizes and strides holding `src` broadcast to it (`copy_`'s
/// broadcasting, casting and errors). A `self` without storage bytes (nothing to keep) gets
/// an uninitialized tensor of its geometry instead of a clone.
pub fn copy(self_: &Tensor, src: &Tensor, non_blocking: bool) -> Result<Tensor> {
    let result = if self_.storage().nbytes() > 0 {
        clone_preserve_strides(self_)?
    } else {
        crate::empty_strided_with(
            self_.sizes(),
            self_.strides(),
            crate::EmptyStridedOptions {
                dtype: Some(self_.dtype()),
                device: Some(self_.device()),
                ..Default::default()
            },
        )?
    };
    crate::copy_with_(
        &result,
        src,
        crate::CopyInplaceOptions::default().non_blocking(non_blocking),
    )
}

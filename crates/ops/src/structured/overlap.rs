//! Memory-overlap checks for written tensors (PyTorch's `assert_no_internal_overlap`,
//! `assert_no_partial_overlap` and `assert_no_overlap`).

use switchboard_tensor::{Device, Tensor, TensorError};

use super::{common_device, Result};

/// The first and one-past-last byte a tensor addresses (empty for no elements).
pub fn byte_range(t: &Tensor) -> (usize, usize) {
    if t.numel() == 0 || !t.has_data() {
        return (0, 0);
    }
    let start = t.data_ptr() as usize;
    let span: i64 = t
        .sizes()
        .iter()
        .zip(t.strides())
        .map(|(&s, &st)| (s - 1) * st)
        .sum();
    (start, start + (span as usize + 1) * t.element_size())
}

/// PyTorch's `assert_no_internal_overlap` for outputs: a written tensor may not have two
/// elements at one address. A tensor without data (Meta, a lazy value's stand-in) has no
/// addresses: PyTorch's meta kernels accept an expanded output, and so functionalization's
/// Meta check of a write into an expanded view passes there too.
pub fn check_internal_overlap(t: &Tensor) -> Result<()> {
    if !t.has_data() {
        return Ok(());
    }
    let overlapping = t
        .sizes()
        .iter()
        .zip(t.strides())
        .any(|(&s, &st)| s > 1 && st == 0);
    if overlapping {
        return Err(TensorError::invalid(
            "unsupported operation: more than one element of the written-to tensor refers to a \
             single memory location. Please clone() the tensor before performing the operation.",
        ));
    }
    Ok(())
}

/// PyTorch's `assert_no_partial_overlap`: an input may be the output itself (in-place) or
/// disjoint from it, not overlap it partially.
pub fn check_no_partial_overlap(out: &Tensor, input: &Tensor) -> Result<()> {
    if !out.is_alias_of(input) || Tensor::ptr_eq(out, input) {
        return Ok(());
    }
    let same = out.storage_offset() == input.storage_offset()
        && out.sizes() == input.sizes()
        && out.strides() == input.strides()
        && out.dtype() == input.dtype();
    if same {
        return Ok(());
    }
    let (a0, a1) = byte_range(out);
    let (b0, b1) = byte_range(input);
    if a0 < b1 && b0 < a1 {
        return Err(TensorError::invalid(
            "unsupported operation: some elements of the input tensor and the written-to tensor \
             refer to a single memory location. Please clone() the tensor before performing the \
             operation.",
        ));
    }
    Ok(())
}

/// PyTorch's `assert_no_overlap(out, input)`: an input may not share any memory with the
/// written tensor (not even all of it). Like PyTorch, only dense tensors are compared.
pub fn check_no_overlap(out: &Tensor, input: &Tensor) -> Result<()> {
    if !out.is_alias_of(input)
        || !out.is_non_overlapping_and_dense()
        || !input.is_non_overlapping_and_dense()
    {
        return Ok(());
    }
    let (a0, a1) = byte_range(out);
    let (b0, b1) = byte_range(input);
    if a0 < b1 && b0 < a1 {
        return Err(TensorError::invalid(
            "unsupported operation: some elements of the input tensor and the written-to tensor \
             refer to a single memory location. Please clone() the tensor before performing the \
             operation.",
        ));
    }
    Ok(())
}

/// The device of an op's result given its tensors (see [`common_device`]).
pub fn result_device(tensors: &[&Tensor]) -> Result<Device> {
    common_device(tensors)
}

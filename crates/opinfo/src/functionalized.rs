//! What a functionalized call keeps of eager's results, for the suites that compare the two
//! (Note [Comparing functionalized calls]).

use switchboard_tensor::Tensor;

use crate::{OpInfo, Unsampled};

// Note [Comparing functionalized calls]
// A functionalized call (inside `functionalize`, or on the functional tensors a lazy device
// hands out) computes each result from values that no operator writes, so it keeps part of
// what eager guarantees, as PyTorch's functionalization does:
// - strides: a view of an input keeps eager's (torchgen's view kernels give the wrapper the
//   geometry of the view operator run on meta tensors); any other result has its value's
//   (`functionalizeFallback` wraps the value as it is), which need not follow an input's
//   layout as eager's does: `neg` of a transposed tensor is contiguous;
// - random draws: the functional form of an in-place random operator draws in the order the
//   in-place one does only over contiguous inputs, so values are compared there only.
// Sizes, dtypes, values otherwise, the inputs afterwards and errors are eager's.

/// The input `out` (an eager result) is a view of, when a functionalized call keeps its
/// strides (Note [Comparing functionalized calls]): a view of more than one element.
pub fn viewed_input(out: &Tensor, inputs: &[Tensor]) -> Option<usize> {
    if out.numel() <= 1 {
        return None;
    }
    inputs.iter().position(|i| out.is_alias_of(i))
}

/// Whether a functionalized call of `info`'s operator on `inputs` draws the values eager
/// draws (Note [Comparing functionalized calls]): always for an operator that is not random.
pub fn same_random_draws(info: &OpInfo, inputs: &[Tensor]) -> bool {
    info.unsampled != Some(Unsampled::Random) || inputs.iter().all(|t| t.is_contiguous())
}

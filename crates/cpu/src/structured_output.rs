//! The outputs a structured kernel computes into (Note [Structured kernels] in
//! switchboard-ops): fresh from its meta function's result, or the given `out=` tensor
//! resized to it.

use switchboard_ops::structured::{self, MetaOutput};
use switchboard_tensor::Tensor;

use crate::copy::copy_into;
use crate::error::Result;

// Note [Meta path of unstructured kernels]
// A structured kernel never sees a tensor without data: the Meta key runs its family's meta
// function (Note [Meta kernels] in switchboard-meta), so the compute helpers the structured
// kernels call (`reduce_into`, the sorting lines) read and write data unconditionally. A
// kernel PyTorch does not mark structured (`max()`, `prod()`, `var.correction`, the
// composites `sum()` / `mean()` and their out= forms) serves the Meta key itself (`CPU, Meta:`
// in the YAML): it returns the output its meta function describes before any compute when
// its input has no data.

/// The output a structured kernel computes into: a fresh one from the meta result, or the
/// given `out` resized to it (torchgen's glue, Note [Structured glue] in switchboard-codegen).
pub(crate) fn structured_output(meta: MetaOutput, out: Option<&Tensor>) -> Result<Tensor> {
    match out {
        Some(o) => structured::resize_out(o, &meta),
        None => meta.allocate(),
    }
}

/// Runs `kernel`, which reads `inputs` and writes a contiguous tensor, into `result`: `result`
/// itself when it is contiguous and shares no memory with `inputs` (always, unless it is an
/// `out=` tensor of other strides or one of the inputs), else a fresh contiguous tensor copied
/// into it afterwards (torchgen's proxy output).
pub(crate) fn compute_contiguous(
    result: &Tensor,
    inputs: &[&Tensor],
    kernel: impl FnOnce(&Tensor) -> Result<()>,
) -> Result<()> {
    if result.is_contiguous() && !inputs.iter().any(|t| result.is_alias_of(t)) {
        return kernel(result);
    }
    let dense = Tensor::empty_on(result.sizes(), result.dtype(), result.device())?;
    kernel(&dense)?;
    copy_into(result, &dense)
}

/// A structured kernel's result, computed into the fresh contiguous tensor `computed`, as the
/// output its meta function describes: `computed` itself when no `out=` was given (`given`,
/// already resized) and it has the meta strides (the usual case), else copied into `given`
/// or into a fresh output in the meta layout (a channels-last pooling).
pub(crate) fn deliver(meta: MetaOutput, given: Option<Tensor>, computed: Tensor) -> Result<Tensor> {
    let result = match given {
        Some(out) => out,
        None if computed.strides() == &meta.strides[..] => return Ok(computed),
        None => meta.allocate()?,
    };
    copy_into(&result, &computed)?;
    Ok(result)
}

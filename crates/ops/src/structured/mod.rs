//! Structured kernels' meta functions (PyTorch's `TORCH_META_FUNC`): for each operator
//! marked `structured: True` in native_functions.yaml (an `out=` overload) and the functional
//! and in-place overloads that name it with `structured_delegate:`, one function here checks
//! the arguments with PyTorch's errors and computes the output's geometry ([`MetaOutput`]:
//! sizes, strides, dtype, device) without touching data. The code generator
//! (switchboard-codegen) writes the glue of each form from the YAML, as torchgen does:
//!
//! - functional: the output is allocated from the meta result ([`MetaOutput::allocate`]);
//! - in-place: the meta result must describe `self` ([`check_inplace`]);
//! - `out=`: `out` is resized to it ([`resize_out`], with PyTorch's warning when a tensor with
//!   elements is resized) after its dtype and device are checked.
//!
//! The Meta backend registers that glue alone; the lazy backend asks the same functions for
//! the metadata of the calls it captures.
//!
//! ```
//! use switchboard_ops::structured;
//! use switchboard_tensor::{Device, Scalar, ScalarType, Tensor};
//! let a = Tensor::empty_on(&[2, 3], ScalarType::Long, Device::META).unwrap();
//! let b = Tensor::empty_on(&[3], ScalarType::Float, Device::META).unwrap();
//! let m = structured::add_tensor(&a, &b, Scalar::Int(1), None).unwrap();
//! assert_eq!((&m.sizes[..], &m.strides[..], m.dtype), (&[2i64, 3][..], &[3i64, 1][..], ScalarType::Float));
//! ```

mod activation;
mod binary_math;
mod bitwise;
mod cat;
mod clamp;
mod cumulative;
mod elementwise;
mod indexing;
mod linear_algebra;
mod loss;
mod loss_nll2d;
mod overlap;
mod padding;
mod pointwise;
mod pooling;
mod pooling3d;
mod pooling_window;
mod reduction;
mod rounding;
mod softmax;
mod sorting;
mod triangular;
mod unary_float;
mod upsample;

pub use activation::*;
pub use binary_math::*;
pub use bitwise::*;
pub use cat::*;
pub use clamp::*;
pub use cumulative::*;
pub use elementwise::{
    broadcast_strides, common_device, reorder_dims, same_device, strides_for_perm, Elementwise,
};
pub use indexing::*;
pub use linear_algebra::*;
pub use loss::*;
pub use loss_nll2d::*;
pub use overlap::{
    byte_range, check_internal_overlap, check_no_overlap, check_no_partial_overlap, result_device,
};
pub use padding::*;
pub use pointwise::*;
pub use pooling::*;
pub use pooling3d::*;
pub use pooling_window::*;
pub use reduction::*;
pub use rounding::*;
pub use softmax::*;
pub use sorting::*;
pub use triangular::*;
pub use unary_float::*;
pub use upsample::*;

use switchboard_tensor::{Device, DimVec, ScalarType, Tensor, TensorError};

/// Shorthand for the meta functions' results (the tensor crate's errors, which every backend
/// converts).
pub type Result<T, E = TensorError> = std::result::Result<T, E>;

// Note [Structured kernels]
// PyTorch splits an operator family (`add.Tensor`, `add_.Tensor`, `add.out`) into one meta
// function, which validates the arguments and says what the output looks like, and one impl,
// which computes into an output it is given; torchgen writes each form's glue from
// native_functions.yaml. Switchboard does the same: the meta functions live here, below every
// backend, so that the Meta backend registers them alone (no data-less run of a CPU kernel)
// and the lazy backend reads an output's metadata from them. A meta function takes the
// functional form's arguments and the output when there is one (`maybe_get_output()`: `self`
// in place, `out` for `out=`), since PyTorch's checks depend on it: an in-place call whose
// broadcast shape is not `self`'s fails ("output with shape [2] doesn't match the broadcast
// shape [3, 2]"), a result dtype that cannot be cast to the output's fails, and a reduction's
// `out=` with no `dtype` argument takes the output's dtype. For a given output, the result
// describes the output's dtype, as `TensorIterator` reports its outputs' original options.

/// What a meta function says about an operator's output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaOutput {
    /// Sizes.
    pub sizes: DimVec,
    /// Strides the output gets when it is allocated (or restrided after a resize).
    pub strides: DimVec,
    /// Element type.
    pub dtype: ScalarType,
    /// Device.
    pub device: Device,
}

impl MetaOutput {
    /// A fresh output with this geometry (uninitialised: zeroed CPU data, or none on meta),
    /// which takes over the sizes and strides.
    #[inline]
    pub fn allocate(self) -> Result<Tensor> {
        Tensor::empty_with_geometry(self.sizes, self.strides, self.dtype, self.device)
    }
}

// Note [Precomputed values]
// Checking a pooling's arguments works out its window geometry (kernel, stride, padding,
// input and output sizes), which the CPU kernel needs too; PyTorch hands such values from the
// meta function to the impl (`precomputed:` in native_functions.yaml). Here such a meta
// function returns `(outputs, values)`: the generated glue keeps the outputs
// ([`MetaResult::into_outputs`]) and the CPU kernel, which runs the meta function itself,
// keeps both. The meta function is written once, with the operator's signature.

/// What a meta function returns: its outputs (one [`MetaOutput`] or an array of them),
/// alone or with the values it computed for the CPU kernel (Note [Precomputed values]).
pub trait MetaResult {
    /// The outputs' geometry.
    type Outputs;
    /// The outputs' geometry, without any precomputed values.
    fn into_outputs(self) -> Self::Outputs;
}

impl MetaResult for MetaOutput {
    type Outputs = MetaOutput;
    #[inline]
    fn into_outputs(self) -> MetaOutput {
        self
    }
}

impl<const N: usize> MetaResult for [MetaOutput; N] {
    type Outputs = [MetaOutput; N];
    #[inline]
    fn into_outputs(self) -> [MetaOutput; N] {
        self
    }
}

impl<O: MetaResult, P> MetaResult for (O, P) {
    type Outputs = O::Outputs;
    #[inline]
    fn into_outputs(self) -> O::Outputs {
        self.0.into_outputs()
    }
}

/// torchgen's `check_inplace`: an in-place call writes `self`, which must be what the meta
/// function describes.
pub fn check_inplace(self_: &Tensor, meta: &MetaOutput) -> Result<()> {
    if meta.dtype != self_.dtype() {
        return Err(TensorError::invalid(format!(
            "Bad in-place call: input tensor dtype {} and output tensor dtype {} should match",
            self_.dtype().type_meta_name(),
            meta.dtype.type_meta_name()
        )));
    }
    if meta.device != self_.device() {
        return Err(TensorError::invalid(format!(
            "Bad in-place call: input tensor device {} and output tensor device {} should match",
            self_.device(),
            meta.device
        )));
    }
    if meta.sizes[..] != *self_.sizes() {
        return Err(TensorError::invalid(format!(
            "Bad in-place call: input tensor size {:?} and output tensor size {:?} should match",
            self_.sizes(),
            &meta.sizes[..]
        )));
    }
    Ok(())
}

/// torchgen's `resize_out`: `out` must have the meta result's dtype and device; it is resized
/// to its sizes (`at::native::resize_output`, which warns when `out` had elements) and, when
/// it was resized, given its strides. Returns the resized `out` (Note [Functional resize] in
/// switchboard-tensor).
pub fn resize_out(out: &Tensor, meta: &MetaOutput) -> Result<Tensor> {
    if meta.dtype != out.dtype() {
        return Err(TensorError::invalid(format!(
            "Expected out tensor to have dtype {}, but got {} instead",
            meta.dtype.type_meta_name(),
            out.dtype().type_meta_name()
        )));
    }
    if meta.device != out.device() {
        return Err(TensorError::invalid(format!(
            "Expected out tensor to have device {}, but got {} instead",
            meta.device,
            out.device()
        )));
    }
    if out.sizes() == &meta.sizes[..] {
        return Ok(out.clone());
    }
    let resized = out.resize_output(&meta.sizes)?;
    if resized.strides() == &meta.strides[..] {
        return Ok(resized);
    }
    resized.to_builder().strides(&meta.strides).build()
}

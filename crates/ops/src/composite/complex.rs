//! The complex views (`view_as_real`, `view_as_complex`: CompositeExplicitAutograd, the tensor
//! crate's primitives, Note [Complex views] in switchboard-tensor), `real` / `imag` and
//! `conj_physical` (CompositeImplicitAutograd, as in PyTorch).

use switchboard_dispatcher::Result;
use switchboard_tensor::{RawOps, Tensor};

use super::error;

/// `view_as_real(Tensor(a) self) -> Tensor(a)`.
pub fn view_as_real(self_: &Tensor) -> Result<Tensor> {
    Ok(RawOps::view_as_real(self_)?)
}

/// `view_as_complex(Tensor(a) self) -> Tensor(a)`.
pub fn view_as_complex(self_: &Tensor) -> Result<Tensor> {
    Ok(RawOps::view_as_complex(self_)?)
}

/// `real(Tensor(a) self) -> Tensor(a)`: the real parts of a complex tensor as a view, a real
/// tensor itself.
pub fn real(self_: &Tensor) -> Result<Tensor> {
    if !self_.dtype().is_complex() {
        return Ok(self_.clone());
    }
    crate::select(&crate::view_as_real(self_)?, -1, 0)
}

/// `imag(Tensor(a) self) -> Tensor(a)`: the imaginary parts of a complex tensor as a view.
pub fn imag(self_: &Tensor) -> Result<Tensor> {
    if !self_.dtype().is_complex() {
        return Err(error(
            "imag is not implemented for tensors with non-complex dtypes.",
        ));
    }
    crate::select(&crate::view_as_real(self_)?, -1, 1)
}

/// `conj_physical(Tensor self) -> Tensor`: a real tensor itself, else `_conj_physical`. (PyTorch's
/// `conj` is a lazy conjugate bit, which Switchboard does not have: the FFT composites
/// conjugate physically, as PyTorch's do where they call `conj_physical`.)
pub fn conj_physical(self_: &Tensor) -> Result<Tensor> {
    if !self_.dtype().is_complex() {
        return Ok(self_.clone());
    }
    crate::_conj_physical(self_)
}

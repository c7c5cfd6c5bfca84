//! `_conj_physical`: the complex conjugate, materialised (PyTorch's `conj` sets a lazy
//! conjugate bit instead, which Switchboard does not have).

use switchboard_tensor::{ComplexElement, Tensor};

use crate::copy::empty_like_layout;
use crate::dispatch_complex_types;
use crate::error::{check_cpu_or_meta, Result};
use crate::iter::IterConfig;

/// `_conj_physical(Tensor self) -> Tensor`: a real tensor copied, a complex one with its
/// imaginary parts negated.
pub fn _conj_physical(self_: &Tensor) -> Result<Tensor> {
    check_cpu_or_meta("_conj_physical", self_.device())?;
    let out = empty_like_layout(self_, self_.dtype(), self_.device())?;
    if !self_.has_data() {
        return Ok(out);
    }
    if !self_.dtype().is_complex() {
        crate::copy::copy_into(&out, self_)?;
        return Ok(out);
    }
    let iter = IterConfig::new("conj_physical")
        .out(&out)
        .input(self_)
        .build()?;
    dispatch_complex_types!(self_.dtype(), "conj_cpu", C => {
        iter.for_each1(|z: C| C::from_parts(z.re(), -z.im()))
    })?;
    Ok(out)
}

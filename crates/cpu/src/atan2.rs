//! `atan2`: the angle of the point `(other, self)`, with its `out=` and in-place forms.
//! Integer and bool inputs compute in the default float dtype (PyTorch's
//! `build_borrowing_binary_float_op`).

use switchboard_tensor::Tensor;

use crate::binary::binary_op;
use crate::dispatch_dtype::{CpuElement, Float};
use crate::dispatch_floating_types;
use crate::error::Result;
use crate::iter::BinaryLoop;

fn atan2_kernel(iter: &impl BinaryLoop) -> Result<()> {
    dispatch_floating_types!(iter.common_dtype(), "atan2_cpu", T => {
        iter.for_each2(|a: T, b: T| T::from_acc(Float::atan2(a.to_acc(), b.to_acc())))
    })
}

/// `atan2(Tensor self, Tensor other)`.
///
/// ```
/// use switchboard_cpu::atan2;
/// use switchboard_tensor::Tensor;
/// let y = Tensor::from_vec(vec![1i64, 0], &[2]).unwrap();
/// let x = Tensor::from_vec(vec![0i64, -1], &[2]).unwrap();
/// let r = atan2(&y, &x).unwrap().to_vec::<f32>().unwrap();
/// assert_eq!(r, [std::f32::consts::FRAC_PI_2, std::f32::consts::PI]);
/// ```
pub fn atan2(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    binary_op!("atan2", self_, other, None, true, atan2_kernel)
}

/// `atan2.out(Tensor self, Tensor other, *, Tensor(a!) out)`.
pub fn atan2_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    binary_op!("atan2", self_, other, Some(out), true, atan2_kernel)
}

/// `atan2_(Tensor(a!) self, Tensor other)`: fails for an integer `self` (the float result
/// cannot be cast back).
pub fn atan2_(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    binary_op!("atan2", self_, other, Some(self_), true, atan2_kernel)
}

//! Writing a result into an `out=` argument, as the kernels PyTorch generates for its
//! `autogen:` out= overloads do (Note [Generated out= kernels] in switchboard-codegen).

use switchboard_tensor::Tensor;

use crate::composite::error;
use crate::Result;

/// Writes `result` into `out`: checks that `out` has the result's dtype and device (exactly:
/// no casting), resizes it to the result's shape (`at::native::resize_output`), copies through
/// the dispatcher (so any backend's `copy_` serves) and returns the resized `out` (Note
/// [Functional resize] in switchboard-tensor).
///
/// ```
/// use switchboard_ops as ops;
/// use switchboard_cpu as _;
/// use switchboard_tensor::Tensor;
///
/// let result = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
/// let out = ops::empty(&[0]).unwrap();
/// let written = ops::write_out(&result, &out).unwrap();
/// assert_eq!(written.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
/// let int_out = ops::empty_with(&[3], ops::EmptyOptions::default().dtype(switchboard_tensor::ScalarType::Long)).unwrap();
/// assert!(ops::write_out(&result, &int_out).is_err());
/// ```
pub fn write_out(result: &Tensor, out: &Tensor) -> Result<Tensor> {
    if out.dtype() != result.dtype() {
        return Err(error(format!(
            "Expected out tensor to have dtype {}, but got {} instead",
            result.dtype().type_meta_name(),
            out.dtype().type_meta_name()
        )));
    }
    if out.device() != result.device() {
        return Err(error(format!(
            "Expected out tensor to have device {}, but got {} instead",
            result.device(),
            out.device()
        )));
    }
    let out = out.resize_output(result.sizes())?;
    crate::copy_(&out, result)
}

//! Host copies of tensors whose device keeps no data here: the hook a backend registers so
//! that reading values (`to_vec`, `item`, printing) works on its tensors.

use switchboard_keys::DeviceType;

use crate::device_hooks::DeviceHooks;
use crate::error::{Result, TensorError};
use crate::tensor::{Tensor, TensorImpl};

// Note [Host copies of tensors without data]
// Meta tensors have no data at all, but other devices without host memory here do: a lazy
// backend computes it on demand, a remote accelerator downloads it. The reading functions of
// this crate (`to_vec`, `to_vec_as`, `item`, printing) cannot call that backend's code (it
// lives in crates above this one), so a backend registers, per device type, a function that
// returns a CPU tensor with the same sizes and values (PyTorch reaches the same point through
// `aten::_local_scalar_dense` and `.cpu()`). The registry is consulted only for tensors
// without data on a device other than meta, so CPU reads never touch it. Borrowing views of
// data (`data`, `data_mut`, raw pointers) stay errors: there are no host bytes to borrow.

/// A function returning a CPU tensor with the values of a tensor of its device type.
pub type HostCopyFn = fn(&TensorImpl) -> Result<Tensor>;

static HOST_COPIES: DeviceHooks<HostCopyFn> = DeviceHooks::new();

/// Registers how to read the values of tensors on devices of type `ty` (Note [Host copies of
/// tensors without data]); replaces an earlier registration. Fails for `cpu` and `meta`.
///
/// ```
/// use switchboard_tensor::{register_host_copy, DeviceType, Result, ScalarType, Tensor, TensorImpl};
/// fn ones_on_host(t: &TensorImpl) -> Result<Tensor> {
///     Tensor::ones(t.sizes(), t.dtype())
/// }
/// register_host_copy(DeviceType::IPU, ones_on_host).unwrap();
/// let t = Tensor::empty_on(&[2], ScalarType::Float, "ipu".parse().unwrap()).unwrap();
/// assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 1.0]);
/// assert_eq!(t.to_string(), "tensor([1., 1.], device='ipu')");
/// ```
pub fn register_host_copy(ty: DeviceType, f: HostCopyFn) -> Result<()> {
    HOST_COPIES.register(ty, f, || {
        format!("register_host_copy: {ty} tensors are read directly")
    })
}

/// The host copy of a tensor without data, when its device type registered one.
pub(crate) fn host_copy(t: &TensorImpl) -> Option<Result<Tensor>> {
    let f = HOST_COPIES.for_tensor(t)?;
    Some(f(t).and_then(|h| {
        if h.has_data() && h.sizes() == t.sizes() && h.dtype() == t.dtype() {
            Ok(h)
        } else {
            Err(TensorError::invalid(format!(
                "the host copy of a {} tensor of sizes {:?} and dtype {} has sizes {:?}, dtype {}{}",
                t.device(),
                t.sizes(),
                t.dtype(),
                h.sizes(),
                h.dtype(),
                if h.has_data() { "" } else { " and no data" }
            )))
        }
    }))
}

impl TensorImpl {
    /// The host copy of a tensor without data: a CPU tensor with its values, from the function
    /// its device type registered (Note [Host copies of tensors without data]). `None` for a
    /// tensor with data, a meta tensor, or a device type without such a function.
    pub fn host_copy(&self) -> Result<Option<Tensor>> {
        host_copy(self).transpose()
    }
}

//! Error helpers: every kernel returns the tensor crate's [`TensorError`] with PyTorch's
//! message, so the dispatcher can convert it without knowing this crate.

use switchboard_tensor::{Device, ScalarType, TensorError};

/// Shorthand for `Result<T, TensorError>`.
pub type Result<T, E = TensorError> = std::result::Result<T, E>;

/// `"add_cpu" not implemented for 'Bool'`: an op that has no kernel for a dtype
/// (the message of PyTorch's `AT_DISPATCH_*` macros).
pub fn not_implemented(op: &str, dtype: ScalarType) -> TensorError {
    TensorError::invalid(format!(
        "\"{op}\" not implemented for '{}'",
        dtype.c10_name()
    ))
}

/// An invalid-argument error with `msg`.
pub fn invalid(msg: impl Into<String>) -> TensorError {
    TensorError::invalid(msg)
}

/// Formats a shape as PyTorch does in messages: `[2, 3]`.
pub fn shape_str(v: &[i64]) -> String {
    let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", items.join(", "))
}

pub use switchboard_ops::structured::{common_device, same_device};

/// Fails unless `device` is the CPU or meta (the devices these kernels handle: CPU computes,
/// meta only propagates metadata).
pub fn check_cpu_or_meta(op: &str, device: Device) -> Result<()> {
    if device.is_cpu() || device.is_meta() {
        Ok(())
    } else {
        Err(TensorError::invalid(format!(
            "{op}: the CPU kernels cannot run on tensors on device {device}"
        )))
    }
}

/// Fails unless `device` is the CPU: the kernel of a structured operator, which computes
/// into outputs with data (a meta tensor's metadata is its meta function's, which the Meta
/// backend runs alone).
pub fn check_cpu(op: &str, device: Device) -> Result<()> {
    if device.is_cpu() {
        Ok(())
    } else {
        Err(TensorError::invalid(format!(
            "{op}: the CPU kernels cannot run on tensors on device {device}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_tensor::Tensor;

    #[test]
    fn messages() {
        assert_eq!(
            not_implemented("add_cpu", ScalarType::Bool).to_string(),
            "\"add_cpu\" not implemented for 'Bool'"
        );
        let cpu = Tensor::zeros(&[2], ScalarType::Float).unwrap();
        let meta = Tensor::zeros_on(&[2], ScalarType::Float, Device::META).unwrap();
        let s = Tensor::scalar_tensor(1.0, ScalarType::Float);
        assert_eq!(common_device(&[&meta, &s]).unwrap(), Device::META);
        assert_eq!(
            common_device(&[&cpu, &meta]).unwrap_err().to_string(),
            "Expected all tensors to be on the same device, but found at least two devices, \
             cpu and meta!"
        );
        assert!(same_device(&[&meta, &s]).is_err());
        assert_eq!(shape_str(&[2, 3]), "[2, 3]");
    }
}

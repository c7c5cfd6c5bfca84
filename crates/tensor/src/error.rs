//! [`TensorError`]: every error of this crate, with PyTorch's messages.

use crate::device::Device;
use crate::dtype::ScalarType;

/// Shorthand for `Result<T, TensorError>`.
pub type Result<T, E = TensorError> = std::result::Result<T, E>;

/// Formats a shape or stride list as PyTorch does in messages: `[2, 5]`.
pub(crate) fn list(v: &[i64]) -> String {
    let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", items.join(", "))
}

/// An error from the tensor data model. The messages are PyTorch's where PyTorch has one.
///
/// ```
/// use switchboard_tensor::RawOps;
/// use switchboard_tensor::{Tensor, TensorError};
/// let t = Tensor::from_vec((0..9).map(|x| x as f32).collect(), &[9]).unwrap();
/// let err = t.view(&[2, 5]).unwrap_err();
/// assert_eq!(err.to_string(), "shape '[2, 5]' is invalid for input of size 9");
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TensorError {
    /// A dimension index outside `[-rank, rank - 1]`.
    #[error("Dimension out of range (expected to be in range of [{min}, {max}], but got {dim})")]
    DimOutOfRange {
        /// The dimension asked for.
        dim: i64,
        /// The lowest accepted value.
        min: i64,
        /// The highest accepted value.
        max: i64,
    },
    /// A dimension given to an op on a zero-dim tensor that accepts none.
    #[error("dimension specified as {dim} but tensor has no dimensions")]
    NoDimensions {
        /// The dimension asked for.
        dim: i64,
    },
    /// A shape whose element count differs from the input's.
    #[error("shape '{}' is invalid for input of size {numel}", list(shape))]
    ShapeNumel {
        /// The requested shape.
        shape: Vec<i64>,
        /// The input's element count.
        numel: i64,
    },
    /// `view` of a tensor whose strides cannot express the new shape.
    #[error(
        "view size is not compatible with input tensor's size and stride (at least one \
         dimension spans across two contiguous subspaces). Use .reshape(...) instead."
    )]
    InvalidView,
    /// Two shapes that must be equal (or broadcast) and are not.
    #[error(
        "The size of tensor a ({a}) must match the size of tensor b ({b}) at non-singleton \
         dimension {dim}"
    )]
    BroadcastMismatch {
        /// Size in the first tensor.
        a: i64,
        /// Size in the second tensor.
        b: i64,
        /// The (right-aligned, non-negative) dimension.
        dim: i64,
    },
    /// Two shapes that had to be equal.
    #[error("shape mismatch: expected {}, got {}", list(expected), list(actual))]
    ShapeMismatch {
        /// The shape required.
        expected: Vec<i64>,
        /// The shape given.
        actual: Vec<i64>,
    },
    /// Typed access with the wrong element type (`expected scalar type Float but found Long`).
    #[error("expected scalar type {} but found {}", expected.c10_name(), found.c10_name())]
    DtypeMismatch {
        /// The dtype the caller asked for.
        expected: ScalarType,
        /// The tensor's dtype.
        found: ScalarType,
    },
    /// Tensors of one operator call on two devices. A structured error, so that a backend whose
    /// shape functions run on stand-in devices (the lazy backend's meta twins) can say the
    /// devices its caller used.
    #[error(
        "Expected all tensors to be on the same device, but found at least two devices, \
         {first} and {second}!"
    )]
    DeviceMismatch {
        /// The device of the first tensor.
        first: Device,
        /// The first other device found.
        second: Device,
    },
    /// A tensor without data (meta, or a device without real storage) read or written.
    #[error("Cannot access data of a tensor on device '{device}': it has no storage data")]
    NoData {
        /// The tensor's device.
        device: String,
    },
    /// An operation that needs a contiguous tensor.
    #[error("{op}: expected a contiguous tensor")]
    NotContiguous {
        /// The operation.
        op: &'static str,
    },
    /// A storage already borrowed in a conflicting way (see Note [Storage mutability]).
    #[error("{0}")]
    StorageBorrowed(&'static str),
    /// An invalid argument, with PyTorch's message.
    #[error("{0}")]
    InvalidArgument(String),
    /// An unparsable dtype, device or other name.
    #[error("{0}")]
    Parse(String),
    /// A safetensors or file error.
    #[error("{0}")]
    Io(String),
}

impl TensorError {
    /// An [`InvalidArgument`](Self::InvalidArgument) error.
    pub fn invalid(msg: impl Into<String>) -> TensorError {
        TensorError::InvalidArgument(msg.into())
    }
}

/// Wraps `dim` into `[0, rank)` as PyTorch's `maybe_wrap_dim` does. A zero-dim tensor accepts
/// dims -1 and 0 (as if it had one dimension).
///
/// ```
/// use switchboard_tensor::wrap_dim;
/// assert_eq!(wrap_dim(-1, 2).unwrap(), 1);
/// assert_eq!(
///     wrap_dim(2, 2).unwrap_err().to_string(),
///     "Dimension out of range (expected to be in range of [-2, 1], but got 2)"
/// );
/// ```
pub fn wrap_dim(dim: i64, rank: usize) -> Result<usize> {
    let rank = (rank as i64).max(1);
    let (min, max) = (-rank, rank - 1);
    if dim < min || dim > max {
        return Err(TensorError::DimOutOfRange { dim, min, max });
    }
    Ok(if dim < 0 { dim + rank } else { dim } as usize)
}

/// Like [`wrap_dim`] but for a rank with no scalar special case (`unsqueeze` wraps against
/// `rank + 1`).
pub(crate) fn wrap_dim_exact(dim: i64, rank: usize) -> Result<usize> {
    let rank = rank as i64;
    let (min, max) = (-rank, rank - 1);
    if rank == 0 || dim < min || dim > max {
        return Err(TensorError::DimOutOfRange { dim, min, max });
    }
    Ok(if dim < 0 { dim + rank } else { dim } as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps() {
        assert_eq!(wrap_dim(0, 0).unwrap(), 0);
        assert_eq!(wrap_dim(-1, 0).unwrap(), 0);
        assert!(wrap_dim(1, 0).is_err());
        assert_eq!(wrap_dim(-3, 3).unwrap(), 0);
        assert_eq!(
            wrap_dim(-4, 3).unwrap_err().to_string(),
            "Dimension out of range (expected to be in range of [-3, 2], but got -4)"
        );
        assert!(wrap_dim_exact(0, 0).is_err());
        assert_eq!(wrap_dim_exact(-1, 1).unwrap(), 0);
    }
}

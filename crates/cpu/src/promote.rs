//! Type promotion for kernels: the tensor crate's [`result_type`] and [`ResultTypeState`]
//! (over a mix of tensors and scalars, as `at::native::result_type` / TensorIterator compute
//! it), dtype table ([`promote_types`], [`can_cast`]) and broadcasting ([`infer_size`]),
//! re-exported here with the default floating dtype.

use switchboard_tensor::ScalarType;

/// The default floating dtype (`torch.get_default_dtype()`).
pub const DEFAULT_FLOAT: ScalarType = switchboard_tensor::DEFAULT_DTYPE;

pub use switchboard_tensor::{can_cast, infer_size, promote_types, result_type, ResultTypeState};

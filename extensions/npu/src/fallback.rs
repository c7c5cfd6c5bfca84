//! The backend's boxed fallback: every operator without a native kernel here runs on the CPU
//! (`switchboard::ops::cpu_fallback`, PyTorch's `at::native::cpu_fallback`).

use switchboard::dispatcher::{DispatchKeySet, OperatorHandle, Result, Stack};
use switchboard::ops::cpu_fallback;

use crate::backend::Backend;

/// The fallback registered at each installed backend's key: counts the call for the backend
/// the call dispatched to (the highest backend of `keys`), then copies the arguments to the
/// CPU, runs the CPU kernel and copies the results back.
pub(crate) fn fallback(op: &OperatorHandle, keys: DispatchKeySet, stack: &mut Stack) -> Result<()> {
    let backend = keys
        .highest_backend_key()
        .device_type()
        .and_then(Backend::for_device_type);
    if let Some(backend) = backend {
        backend.count_fallback(&op.name().to_string());
    }
    cpu_fallback(op, stack)
}

//! The distributed layer's errors.

use switchboard_dispatcher::{DispatchError, DispatchErrorKind};

/// A failure of a process group or a collective.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DistError {
    /// A bad argument (a rank out of range, a shape the collective cannot take, ...).
    #[error("{0}")]
    Invalid(String),
    /// The ranks called different collectives, or the same one with different tensors
    /// (detected when the group checks fingerprints, Note [Collective fingerprints]).
    #[error("{0}")]
    Mismatch(String),
    /// A collective did not complete within the group's timeout: a rank died, hangs, or
    /// never called it.
    #[error("{0}")]
    Timeout(String),
    /// The communication engine failed, or the group was shut down or aborted.
    #[error("{0}")]
    Backend(String),
}

impl From<DistError> for DispatchError {
    fn from(e: DistError) -> DispatchError {
        DispatchErrorKind::Kernel(e.to_string()).into()
    }
}

impl From<switchboard_tensor::TensorError> for DistError {
    fn from(e: switchboard_tensor::TensorError) -> DistError {
        DistError::Invalid(e.to_string())
    }
}

impl From<DispatchError> for DistError {
    fn from(e: DispatchError) -> DistError {
        DistError::Invalid(e.to_string())
    }
}

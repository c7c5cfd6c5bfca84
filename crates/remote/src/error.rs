//! [`RemoteError`]: what a client or worker reports.

use std::fmt;

use crate::protocol::{ErrorKind, WorkerError};

/// Why a remote operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteErrorKind {
    /// A bad configuration (address, token, certificate).
    Config,
    /// The worker could not be reached, or the connection broke.
    Connection,
    /// The worker did not answer within the timeout.
    Timeout,
    /// The worker's session is gone (the worker restarted, or the connection closed): its
    /// tensors no longer exist.
    StateLost,
    /// A message over the size limit.
    TooLarge,
    /// The worker refused the request or the graph failed (its kind).
    Worker(ErrorKind),
}

/// An error of a remote operation, with a message naming what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteError {
    /// Its kind.
    pub kind: RemoteErrorKind,
    /// What happened.
    pub message: String,
}

impl RemoteError {
    pub(crate) fn new(kind: RemoteErrorKind, message: impl Into<String>) -> RemoteError {
        RemoteError {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn config(message: impl Into<String>) -> RemoteError {
        RemoteError::new(RemoteErrorKind::Config, message)
    }
}

impl From<WorkerError> for RemoteError {
    fn from(e: WorkerError) -> RemoteError {
        let kind = match e.kind {
            ErrorKind::StateLost => RemoteErrorKind::StateLost,
            ErrorKind::TooLarge => RemoteErrorKind::TooLarge,
            k => RemoteErrorKind::Worker(k),
        };
        RemoteError::new(kind, e.message)
    }
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RemoteError {}

impl From<RemoteError> for switchboard_dispatcher::DispatchError {
    fn from(e: RemoteError) -> Self {
        switchboard_tensor::TensorError::invalid(e.message).into()
    }
}

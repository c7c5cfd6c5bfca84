//! Switchboard's remote worker: the lazy backend's graphs run by another process, over the
//! tarpc RPC framework (the disaggregated accelerator Genie describes).
//!
//! - [`Worker`]: a server (`switchboard worker --listen ADDR`) that runs graphs on its CPU
//!   backend and keeps their results under handles, so parameters and optimizer state stay on
//!   the worker across steps; it caches plans, frees what clients release and everything of a
//!   closed connection; a shared token (compared in constant time), loopback by default, TLS
//!   with rustls when given a certificate and key.
//! - [`RemoteClient`]: a blocking client with timeouts; a restarted worker is reported as
//!   lost state, not served with other data.
//! - [`RemoteExecutor`]: the lazy backend's [`Executor`](switchboard_lazy::Executor) over a
//!   client: graphs travel in the graph wire format, inputs as handles or raw bytes, results
//!   come back as handles (and the elements of small ones, so reading a loss costs no second
//!   round trip).
//!
//! ```no_run
//! use switchboard_remote::{ClientConfig, RemoteExecutor, Worker, WorkerConfig};
//! let worker = Worker::bind(WorkerConfig::default()).unwrap();
//! let exe = RemoteExecutor::connect(&worker.local_addr().to_string(), ClientConfig::default()).unwrap();
//! switchboard_lazy::set_executor(exe);
//! ```
#![warn(missing_docs)]

mod client;
mod device;
mod error;
mod executor;
mod protocol;
mod session;
mod tensor_bytes;
mod transport;
mod worker;

pub use client::{ClientConfig, RemoteClient, RemoteCounters};
pub use device::{
    client_config_from_env, connect, connect_from_env, install, is_remote, DEVICE_NAME,
    WORKER_CA_ENV, WORKER_ENV,
};
pub use error::{RemoteError, RemoteErrorKind};
pub use executor::{RemoteBuffer, RemoteExecutor};
pub use protocol::{
    ErrorKind, Handle, HostTensor, OperatorTime, OutputPolicy, RunInput, RunOutput, RunReply,
    RunRequest, SessionInfo, WorkerError, WorkerService, WorkerServiceClient,
};
pub use tensor_bytes::{from_host_tensor, to_host_tensor};
pub use transport::{ByteCounters, TlsIdentity, TlsTrust, DEFAULT_MAX_MESSAGE_BYTES};
pub use worker::{token_from, Worker, WorkerConfig, TOKEN_ENV};

// The CPU kernels run the graphs; the operator schemas decode them.
use switchboard_cpu as _;
use switchboard_ops as _;

//! The worker's RPC service and its messages (Note [Remote protocol]).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

// Note [Remote protocol]
// Client and worker speak tarpc over a length-delimited transport (TCP, or TLS over TCP): every
// message is one frame whose length the codec checks against a maximum before reading it, so
// no message can make either side buffer more than that; messages are bincode 1. A connection
// is one session: `hello` with the shared token opens it and returns the worker's instance id
// (random, chosen when the worker starts) and the session id; every other call before a
// successful `hello` is refused. Tensors a session's graphs produce stay on the worker under
// handles `(instance, session, id)`: a handle of another session or another worker instance is
// refused by name, never looked up, so one client cannot read or free another's tensors and a
// restarted worker is reported as lost state, not served with other data. Graphs travel in the
// graph wire format (Note [Graph wire format] in switchboard-graph) under a plan id the client
// chooses; the worker keeps the decoded plan for the session and answers `UnknownPlan` when it
// has not got it (a new session, an evicted plan), and the client resends the graph. Releases
// ride on the next request (`RunRequest::release`) instead of a round trip of their own. When
// the connection closes, the session and every tensor it holds are freed.

/// A tensor's elements on the wire: row-major (contiguous), little-endian, with dtype and
/// sizes; the byte count must be `numel * element_size`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostTensor {
    /// The dtype's name (`float32`).
    pub dtype: String,
    /// Sizes.
    pub sizes: Vec<i64>,
    /// The elements.
    #[serde(with = "serde_bytes")]
    pub bytes: Vec<u8>,
}

/// A tensor kept on the worker: `(instance, session, id)` (Note [Remote protocol]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Handle {
    /// The worker instance that made it.
    pub instance: u64,
    /// The session that owns it.
    pub session: u64,
    /// Its number in the session.
    pub id: u64,
}

/// What `hello` returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// The worker instance (changes when the worker restarts).
    pub instance: u64,
    /// This connection's session.
    pub session: u64,
}

/// A graph input.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum RunInput {
    /// A tensor the session keeps.
    Resident(Handle),
    /// A tensor sent with the request (shared: a request resent after "unknown plan" does not
    /// copy it).
    Inline(Arc<HostTensor>),
}

impl RunInput {
    /// An input sent with the request.
    pub fn inline(t: HostTensor) -> RunInput {
        RunInput::Inline(Arc::new(t))
    }
}

/// What the worker returns for one graph output besides its handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutputPolicy {
    /// Its elements too when it has at most the worker's inline limit of elements.
    Auto,
    /// Its elements too, whatever its size (up to the message limit).
    Inline,
    /// Only the handle.
    Resident,
}

/// Runs a plan.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRequest {
    /// The plan's id (chosen by the client).
    pub plan: u64,
    /// The graph in the wire format, when the worker may not have the plan.
    #[serde(with = "serde_bytes")]
    pub graph: Option<Vec<u8>>,
    /// One per graph input, in order.
    pub inputs: Vec<RunInput>,
    /// One per graph output (empty: `Auto` for each).
    pub outputs: Vec<OutputPolicy>,
    /// Whether to time each call (returned in [`RunReply::operator_times`]).
    pub profile: bool,
    /// Handles to free before running (releases queued since the last request).
    pub release: Vec<Handle>,
}

/// A graph output.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunOutput {
    /// Where the worker keeps it.
    pub handle: Handle,
    /// Its elements, when the output policy asked for them.
    pub inline: Option<HostTensor>,
}

/// The time of one operator's calls in a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorTime {
    /// `aten::mm`, `aten::add.Tensor`.
    pub op: String,
    /// Calls.
    pub count: u64,
    /// Their total time in nanoseconds.
    pub total_ns: u64,
}

/// What `run` returns.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunReply {
    /// One per graph output.
    pub outputs: Vec<RunOutput>,
    /// The time the worker spent running the graph, in nanoseconds.
    pub execution_ns: u64,
    /// Per operator, when the request asked for profiling.
    pub operator_times: Vec<OperatorTime>,
}

/// What went wrong, for the client to act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    /// No `hello`, or a wrong token.
    Unauthenticated,
    /// The session has no plan of that id: resend the graph.
    UnknownPlan,
    /// A handle of another worker instance or session.
    StateLost,
    /// A malformed or inconsistent request (unknown handle, operator, dtype; sizes that do not
    /// match; a graph that does not decode).
    InvalidRequest,
    /// The graph ran and a call failed.
    Execution,
    /// A message over the size limit.
    TooLarge,
}

/// An error the worker returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerError {
    /// Its kind.
    pub kind: ErrorKind,
    /// What was wrong and what was expected.
    pub message: String,
}

impl WorkerError {
    /// An error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> WorkerError {
        WorkerError {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for WorkerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The worker's service.
#[tarpc::service]
pub trait WorkerService {
    /// Opens the connection's session (Note [Remote protocol]).
    async fn hello(token: String) -> Result<SessionInfo, WorkerError>;
    /// Runs a plan on the session's tensors and inline inputs.
    async fn run(request: RunRequest) -> Result<RunReply, WorkerError>;
    /// The elements of a tensor the session keeps, after freeing `release`.
    async fn fetch(handle: Handle, release: Vec<Handle>) -> Result<HostTensor, WorkerError>;
    /// Frees tensors the session keeps.
    async fn release(handles: Vec<Handle>) -> Result<(), WorkerError>;
}

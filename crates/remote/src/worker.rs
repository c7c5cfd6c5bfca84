//! The worker: a tarpc server whose connections are sessions (Note [Remote protocol]), run on a
//! tokio runtime of its own.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use switchboard_cpu::threads::KernelThread;
use tarpc::context::Context;
use tarpc::server::{BaseChannel, Channel};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio_rustls::TlsAcceptor;

use crate::protocol::{
    ErrorKind, Handle, HostTensor, RunReply, RunRequest, SessionInfo, WorkerError, WorkerService,
};
use crate::session::{Session, SessionLimits};
use crate::transport::{acceptor, transport, ByteCounters, Counted, TlsIdentity};
use crate::{RemoteError, DEFAULT_MAX_MESSAGE_BYTES};

/// The environment variable holding the shared token.
pub const TOKEN_ENV: &str = "SWITCHBOARD_WORKER_TOKEN";

/// How a worker listens and what it allows.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// Where to listen (default `127.0.0.1:0`: loopback, an ephemeral port).
    pub listen: SocketAddr,
    /// The shared token clients must present; required for a non-loopback address.
    pub token: Option<String>,
    /// Serve TLS with this certificate and key.
    pub tls: Option<TlsIdentity>,
    /// The bound of every message (default 1 GiB).
    pub max_message_bytes: usize,
    /// Outputs of at most this many elements are returned with their handles (default 64).
    pub inline_elements: usize,
    /// The most bytes a session may keep, and the most a graph's results may take (default
    /// 16 GiB).
    pub max_session_bytes: u64,
    /// Plans a session keeps (default 256; the oldest ones are dropped and resent).
    pub max_plans_per_session: usize,
    /// Connections served at once (default 64; more are closed at once).
    pub max_connections: usize,
    /// Threads running graphs and connections (default 2).
    pub threads: usize,
    /// A connection that has not opened a session (TLS handshake and `hello`) by then is
    /// closed (default 10 s).
    pub hello_timeout: Duration,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
            tls: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            inline_elements: 64,
            max_plans_per_session: 256,
            max_session_bytes: 16 << 30,
            max_connections: 64,
            threads: 2,
            hello_timeout: Duration::from_secs(10),
        }
    }
}

/// The shared token: the contents of `file` (trimmed) when given, else `SWITCHBOARD_WORKER_TOKEN`
/// when set and not empty.
pub fn token_from(file: Option<&Path>) -> Result<Option<String>, RemoteError> {
    if let Some(f) = file {
        let t = std::fs::read_to_string(f).map_err(|e| {
            RemoteError::config(format!("cannot read the token file {}: {e}", f.display()))
        })?;
        let t = t.trim();
        if t.is_empty() {
            return Err(RemoteError::config(format!(
                "the token file {} is empty",
                f.display()
            )));
        }
        return Ok(Some(t.to_string()));
    }
    Ok(std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()))
}

/// State shared by a worker's connections.
struct WorkerState {
    instance: u64,
    token: Option<String>,
    limits: SessionLimits,
    next_session: AtomicU64,
    sessions: Mutex<HashMap<u64, Arc<Session>>>,
    connections: AtomicUsize,
    hello_timeout: Duration,
    /// Where graphs and copies run (Note [The worker's kernel thread]).
    kernels: KernelThread,
}

impl WorkerState {
    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Session>>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running worker; dropping it stops it.
pub struct Worker {
    local_addr: SocketAddr,
    state: Arc<WorkerState>,
    runtime: Option<Runtime>,
}

/// A random 64-bit number from the standard library's randomly keyed hasher (instance ids need
/// to differ between runs, not to be secret).
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    h.finish()
}

impl Worker {
    /// Starts a worker listening as `config` says, on a runtime of its own.
    pub fn bind(config: WorkerConfig) -> Result<Worker, RemoteError> {
        if !config.listen.ip().is_loopback() && config.token.is_none() {
            return Err(RemoteError::config(format!(
                "refusing to listen on {}, which is not a loopback address, without a token: \
                 set {TOKEN_ENV} or give a token file",
                config.listen
            )));
        }
        let tls = config
            .tls
            .as_ref()
            .map(acceptor)
            .transpose()
            .map_err(RemoteError::config)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.threads.max(1))
            .thread_name("switchboard-worker")
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| RemoteError::config(format!("cannot start the worker's runtime: {e}")))?;
        let listener = runtime
            .block_on(TcpListener::bind(config.listen))
            .map_err(|e| RemoteError::config(format!("cannot listen on {}: {e}", config.listen)))?;
        let local_addr = listener
            .local_addr()
            .map_err(|e| RemoteError::config(e.to_string()))?;
        let state = Arc::new(WorkerState {
            instance: random_u64(),
            token: config.token.clone(),
            limits: SessionLimits {
                max_message_bytes: config.max_message_bytes,
                inline_elements: config.inline_elements,
                max_plans: config.max_plans_per_session.max(1),
                max_session_bytes: config.max_session_bytes,
            },
            next_session: AtomicU64::new(1),
            sessions: Mutex::default(),
            connections: AtomicUsize::new(0),
            hello_timeout: config.hello_timeout,
            kernels: KernelThread::start(None).map_err(|e| RemoteError::config(e.to_string()))?,
        });
        runtime.spawn(accept_loop(
            listener,
            tls,
            state.clone(),
            config.max_message_bytes,
            config.max_connections,
        ));
        Ok(Worker {
            local_addr,
            state,
            runtime: Some(runtime),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// This worker's instance id (Note [Remote protocol]).
    pub fn instance(&self) -> u64 {
        self.state.instance
    }

    /// The tensors its sessions keep.
    pub fn resident_tensors(&self) -> usize {
        self.state.sessions().values().map(|s| s.resident()).sum()
    }

    /// Its open sessions.
    pub fn sessions(&self) -> usize {
        self.state.sessions().len()
    }

    /// Serves until the process ends.
    pub fn wait(self) -> ! {
        loop {
            std::thread::park();
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    state: Arc<WorkerState>,
    max_message_bytes: usize,
    max_connections: usize,
) {
    loop {
        let Ok((stream, _peer)) = listener.accept().await else {
            // Out of descriptors, or a connection reset before it was accepted: try again
            // after a moment rather than spin.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if state.connections.load(Ordering::Relaxed) >= max_connections {
            drop(stream);
            continue;
        }
        let _ = stream.set_nodelay(true);
        state.connections.fetch_add(1, Ordering::Relaxed);
        let state = state.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            serve_connection(stream, tls, state.clone(), max_message_bytes).await;
            state.connections.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Serves one connection until it closes, then frees its session.
async fn serve_connection(
    stream: TcpStream,
    tls: Option<TlsAcceptor>,
    state: Arc<WorkerState>,
    max_message_bytes: usize,
) {
    let conn = Connection {
        state: state.clone(),
        session: Arc::new(OnceLock::new()),
    };
    let counters = Arc::new(ByteCounters::default());
    match tls {
        Some(acceptor) => {
            // A peer that never finishes its handshake is dropped, not waited for.
            let accepted = tokio::time::timeout(state.hello_timeout, acceptor.accept(stream)).await;
            let Ok(Ok(stream)) = accepted else {
                return;
            };
            serve(
                Counted {
                    inner: stream,
                    counters,
                },
                conn.clone(),
                max_message_bytes,
            )
            .await;
        }
        None => {
            serve(
                Counted {
                    inner: stream,
                    counters,
                },
                conn.clone(),
                max_message_bytes,
            )
            .await
        }
    }
    if let Some(session) = conn.session.get() {
        state.sessions().remove(&session.id);
        session.close();
    }
}

/// Serves a connection; one that has not opened a session within the hello timeout is closed
/// (an idle peer must not hold one of the worker's connections).
async fn serve<S>(io: S, conn: Connection, max_message_bytes: usize)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let transport = transport(io, max_message_bytes);
    let session = conn.session.clone();
    let hello_timeout = conn.state.hello_timeout;
    let serving = tokio::spawn(
        BaseChannel::with_defaults(transport)
            .execute(conn.serve())
            .for_each(|response| async {
                tokio::spawn(response);
            }),
    );
    let abort = serving.abort_handle();
    let watchdog = tokio::spawn(async move {
        tokio::time::sleep(hello_timeout).await;
        if session.get().is_none() {
            abort.abort();
        }
    });
    let _ = serving.await;
    watchdog.abort();
}

/// One connection: the worker's state and, after `hello`, its session.
#[derive(Clone)]
struct Connection {
    state: Arc<WorkerState>,
    session: Arc<OnceLock<Arc<Session>>>,
}

impl Connection {
    fn session(&self) -> Result<Arc<Session>, WorkerError> {
        self.session.get().cloned().ok_or_else(|| {
            WorkerError::new(
                ErrorKind::Unauthenticated,
                "no session: call hello with the worker's token first",
            )
        })
    }
}

// Note [The worker's kernel thread]
// Graphs and copies are CPU work. They run on the worker's `KernelThread`, one request after
// another, rather than on tokio's blocking threads: from a thread outside any rayon pool,
// each of a kernel's parallel loops is handed over to the pool while the caller sleeps
// (Note [The caller is one of the kernel threads] in switchboard-cpu). On two threads the
// in-process `remote_mlp_train_step` took 2.8 ms that way and takes 2.5 ms on the kernel
// thread (the eager step: 1.56 ms).
// One request at a time, as an accelerator's stream runs its work: two requests on a pool's
// threads could also run one nested inside the other.

/// Runs `f` on the worker's kernel thread (Note [The worker's kernel thread]), reporting a
/// panic as an error instead of losing the connection or the thread.
async fn blocking<T: Send + 'static>(
    kernels: &KernelThread,
    f: impl FnOnce() -> Result<T, WorkerError> + Send + 'static,
) -> Result<T, WorkerError> {
    let stopped = || {
        WorkerError::new(
            ErrorKind::Execution,
            "the worker's kernel thread has stopped",
        )
    };
    let (reply, result) = tokio::sync::oneshot::channel();
    kernels
        .submit(move || {
            let _ = reply.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
        })
        .map_err(|_| stopped())?;
    match result.await {
        Ok(Ok(r)) => r,
        Ok(Err(panic)) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            Err(WorkerError::new(
                ErrorKind::Execution,
                format!("the worker failed running the request: {message}"),
            ))
        }
        Err(_) => Err(stopped()),
    }
}

impl WorkerService for Connection {
    async fn hello(self, _: Context, token: String) -> Result<SessionInfo, WorkerError> {
        if let Some(expected) = &self.state.token {
            if !constant_time_eq::constant_time_eq(expected.as_bytes(), token.as_bytes()) {
                return Err(WorkerError::new(
                    ErrorKind::Unauthenticated,
                    "wrong worker token (the worker's SWITCHBOARD_WORKER_TOKEN or token file)",
                ));
            }
        }
        if let Some(s) = self.session.get() {
            return Ok(SessionInfo {
                instance: s.instance,
                session: s.id,
            });
        }
        let id = self.state.next_session.fetch_add(1, Ordering::Relaxed);
        let session = Arc::new(Session::new(self.state.instance, id));
        let session = self.session.get_or_init(|| session).clone();
        self.state.sessions().insert(session.id, session.clone());
        Ok(SessionInfo {
            instance: session.instance,
            session: session.id,
        })
    }

    async fn run(self, _: Context, request: RunRequest) -> Result<RunReply, WorkerError> {
        let session = self.session()?;
        let limits = self.state.limits;
        blocking(&self.state.kernels, move || session.run(request, &limits)).await
    }

    async fn fetch(
        self,
        _: Context,
        handle: Handle,
        release: Vec<Handle>,
    ) -> Result<HostTensor, WorkerError> {
        let session = self.session()?;
        let limits = self.state.limits;
        blocking(&self.state.kernels, move || {
            session.fetch(&handle, &release, &limits)
        })
        .await
    }

    async fn release(self, _: Context, handles: Vec<Handle>) -> Result<(), WorkerError> {
        self.session()?.release(&handles)
    }
}

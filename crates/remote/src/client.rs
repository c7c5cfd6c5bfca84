//! [`RemoteClient`]: a blocking client of one worker, over a tokio runtime of its own.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tarpc::client::RpcError;
use tarpc::context::Context;
use tokio::net::TcpStream;
use tokio::runtime::Runtime;

use crate::error::{RemoteError, RemoteErrorKind};
use crate::protocol::{
    ErrorKind, Handle, HostTensor, RunInput, RunReply, RunRequest, SessionInfo, WorkerError,
    WorkerServiceClient,
};
use crate::transport::{connector, transport, ByteCounters, Counted, TlsTrust};
use crate::DEFAULT_MAX_MESSAGE_BYTES;

/// How a client connects.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The worker's shared token (empty when the worker has none).
    pub token: Option<String>,
    /// Connect with TLS, trusting these certificates.
    pub tls: Option<TlsTrust>,
    /// The longest a call may take before it fails (default 60 s).
    pub timeout: Duration,
    /// The longest connecting may take (default 10 s).
    pub connect_timeout: Duration,
    /// The bound of every message (default 1 GiB; the worker has its own).
    pub max_message_bytes: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            token: None,
            tls: None,
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
        }
    }
}

/// What a client counts (the metrics report's remote lines).
#[derive(Debug, Default)]
pub struct RemoteCounters {
    /// Requests answered or failed.
    pub round_trips: AtomicU64,
    /// Bytes on the wire, both ways (frames, headers and TLS records included).
    pub bytes: Arc<ByteCounters>,
    /// Runs, and the worker's time running them in nanoseconds.
    pub runs: AtomicU64,
    /// See `runs`.
    pub execution_ns: AtomicU64,
}

struct Connection {
    client: WorkerServiceClient,
    info: SessionInfo,
    known_plans: HashSet<u64>,
}

/// A client of one worker (Note [Remote protocol]): calls block until the worker answers or
/// the timeout passes. A broken connection is reopened on the next call, as a new session:
/// handles of the old one are then reported as lost state.
pub struct RemoteClient {
    addr: String,
    config: ClientConfig,
    runtime: Runtime,
    connection: Mutex<Option<Connection>>,
    /// The last session, to tell a restarted worker from a closed connection.
    last_session: Mutex<Option<SessionInfo>>,
    released: Mutex<Vec<Handle>>,
    counters: RemoteCounters,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl RemoteClient {
    /// Connects to the worker at `addr` (`host:port`) and opens a session: a wrong token, an
    /// unreachable worker or a failed TLS handshake are errors here.
    pub fn connect(addr: &str, config: ClientConfig) -> Result<Arc<RemoteClient>, RemoteError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("switchboard-remote-client")
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| RemoteError::config(format!("cannot start the client's runtime: {e}")))?;
        let client = RemoteClient {
            addr: addr.to_string(),
            config,
            runtime,
            connection: Mutex::new(None),
            last_session: Mutex::new(None),
            released: Mutex::new(Vec::new()),
            counters: RemoteCounters::default(),
        };
        {
            let mut c = lock(&client.connection);
            client.ensure(&mut c)?;
        }
        Ok(Arc::new(client))
    }

    /// The worker's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The counters.
    pub fn counters(&self) -> &RemoteCounters {
        &self.counters
    }

    /// The current session, if connected.
    pub fn session(&self) -> Option<SessionInfo> {
        lock(&self.connection).as_ref().map(|c| c.info)
    }

    /// Opens a connection and a session when there is none.
    fn ensure<'a>(
        &self,
        slot: &'a mut Option<Connection>,
    ) -> Result<&'a mut Connection, RemoteError> {
        if slot.is_none() {
            let c = self.open()?;
            *lock(&self.last_session) = Some(c.info);
            *slot = Some(c);
        }
        Ok(slot.as_mut().expect("just set"))
    }

    fn open(&self) -> Result<Connection, RemoteError> {
        let addr = self.addr.clone();
        let cfg = self.config.clone();
        let counters = self.counters.bytes.clone();
        let connected = self.runtime.block_on(async move {
            let connect = async {
                let tcp = TcpStream::connect(&addr)
                    .await
                    .map_err(|e| format!("cannot connect to the worker at {addr}: {e}"))?;
                let _ = tcp.set_nodelay(true);
                let client = match &cfg.tls {
                    Some(trust) => {
                        let (connector, name) = connector(trust)?;
                        let tls = connector.connect(name, tcp).await.map_err(|e| {
                            format!("TLS handshake with the worker at {addr} failed: {e}")
                        })?;
                        let t = transport(
                            Counted {
                                inner: tls,
                                counters,
                            },
                            cfg.max_message_bytes,
                        );
                        WorkerServiceClient::new(Default::default(), t).spawn()
                    }
                    None => {
                        let t = transport(
                            Counted {
                                inner: tcp,
                                counters,
                            },
                            cfg.max_message_bytes,
                        );
                        WorkerServiceClient::new(Default::default(), t).spawn()
                    }
                };
                Ok::<_, String>(client)
            };
            match tokio::time::timeout(cfg.connect_timeout, connect).await {
                Ok(r) => r,
                Err(_) => Err(format!(
                    "connecting to the worker at {addr} took more than {:?}",
                    cfg.connect_timeout
                )),
            }
        });
        let client = connected.map_err(|m| RemoteError::new(RemoteErrorKind::Connection, m))?;
        let token = self.config.token.clone().unwrap_or_default();
        let info = self.call(&client, |c, ctx| async move { c.hello(ctx, token).await })?;
        Ok(Connection {
            client,
            info,
            known_plans: HashSet::new(),
        })
    }

    /// One call with the configured deadline.
    fn call<T, F, Fut>(&self, client: &WorkerServiceClient, f: F) -> Result<T, RemoteError>
    where
        F: FnOnce(WorkerServiceClient, Context) -> Fut,
        Fut: std::future::Future<Output = Result<Result<T, WorkerError>, RpcError>>,
    {
        let timeout = self.config.timeout;
        let mut ctx = tarpc::context::current();
        ctx.deadline = Instant::now() + timeout;
        let fut = f(client.clone(), ctx);
        self.counters.round_trips.fetch_add(1, Ordering::Relaxed);
        // The deadline fails the call in tarpc; the outer timeout is a backstop.
        let r = self
            .runtime
            .block_on(async { tokio::time::timeout(timeout + Duration::from_secs(1), fut).await });
        match r {
            Err(_) | Ok(Err(RpcError::DeadlineExceeded)) => Err(RemoteError::new(
                RemoteErrorKind::Timeout,
                format!(
                    "the worker at {} did not answer within {timeout:?} (it may have died or \
                     hung); its session is abandoned",
                    self.addr
                ),
            )),
            Ok(Err(e)) => Err(RemoteError::new(
                RemoteErrorKind::Connection,
                format!("lost the connection to the worker at {}: {e}", self.addr),
            )),
            Ok(Ok(r)) => r.map_err(RemoteError::from),
        }
    }

    /// A call on the current connection; a connection that failed or timed out is dropped
    /// (its session ends on the worker), so the next call opens a new one.
    fn call_on<T, F, Fut>(&self, slot: &mut Option<Connection>, f: F) -> Result<T, RemoteError>
    where
        F: FnOnce(WorkerServiceClient, Context) -> Fut,
        Fut: std::future::Future<Output = Result<Result<T, WorkerError>, RpcError>>,
    {
        let client = self.ensure(slot)?.client.clone();
        let r = self.call(&client, f);
        if let Err(e) = &r {
            if matches!(
                e.kind,
                RemoteErrorKind::Timeout | RemoteErrorKind::Connection
            ) {
                *slot = None;
            }
        }
        r
    }

    /// Refuses a handle of another session than the current one: the worker's state it
    /// stood for is gone (Note [Remote protocol]).
    fn check(&self, info: &SessionInfo, h: &Handle) -> Result<(), RemoteError> {
        if h.instance != info.instance {
            return Err(RemoteError::new(
                RemoteErrorKind::StateLost,
                format!(
                    "remote worker state lost (the worker restarted: handle {} was made by \
                     worker instance {:016x}, the worker at {} is now instance {:016x}): the \
                     tensors it kept are gone",
                    h.id, h.instance, self.addr, info.instance
                ),
            ));
        }
        if h.session != info.session {
            return Err(RemoteError::new(
                RemoteErrorKind::StateLost,
                format!(
                    "remote worker state lost (the connection to the worker at {} closed, \
                     which freed session {} and its tensors): handle {} no longer exists",
                    self.addr, h.session, h.id
                ),
            ));
        }
        Ok(())
    }

    /// The queued releases of the current session (those of ended sessions are dropped:
    /// their tensors were freed with them).
    fn take_releases(&self, info: &SessionInfo) -> Vec<Handle> {
        let mut q = lock(&self.released);
        q.drain(..)
            .filter(|h| h.instance == info.instance && h.session == info.session)
            .collect()
    }

    /// Queues `handle` to be freed with the next request.
    pub fn release_later(&self, handle: Handle) {
        lock(&self.released).push(handle);
    }

    /// Frees the queued handles now (one round trip; none when nothing is queued).
    pub fn flush_releases(&self) -> Result<(), RemoteError> {
        let mut slot = lock(&self.connection);
        let Some(conn) = slot.as_ref() else {
            lock(&self.released).clear();
            return Ok(());
        };
        let release = self.take_releases(&conn.info);
        if release.is_empty() {
            return Ok(());
        }
        self.call_on(
            &mut slot,
            |c, ctx| async move { c.release(ctx, release).await },
        )
    }

    /// Runs plan `plan` (sending `graph`, its wire bytes, when the session may not have it).
    pub fn run(
        &self,
        plan: u64,
        graph: &[u8],
        inputs: Vec<RunInput>,
        profile: bool,
    ) -> Result<RunReply, RemoteError> {
        let mut slot = lock(&self.connection);
        let conn = self.ensure(&mut slot)?;
        let info = conn.info;
        for input in &inputs {
            if let RunInput::Resident(h) = input {
                self.check(&info, h)?;
            }
        }
        let mut send_graph = !conn.known_plans.contains(&plan);
        let inline: usize = inputs
            .iter()
            .map(|i| match i {
                RunInput::Inline(h) => h.bytes.len() + 8 * h.sizes.len() + 32,
                RunInput::Resident(_) => 32,
            })
            .sum();
        let mut release = self.take_releases(&info);
        let mut retried = false;
        loop {
            let size = inline + if send_graph { graph.len() } else { 0 } + 32 * release.len();
            // Room for the envelope (ids, context, lengths).
            if size.saturating_add(1024) > self.config.max_message_bytes {
                return Err(RemoteError::new(
                    RemoteErrorKind::TooLarge,
                    format!(
                        "the request would be a message of about {size} bytes, over the limit \
                         of {} bytes",
                        self.config.max_message_bytes
                    ),
                ));
            }
            let request = RunRequest {
                plan,
                graph: send_graph.then(|| graph.to_vec()),
                inputs: inputs.clone(),
                outputs: Vec::new(),
                profile,
                release: std::mem::take(&mut release),
            };
            match self.call_on(&mut slot, |c, ctx| async move { c.run(ctx, request).await }) {
                Err(e)
                    if e.kind == RemoteErrorKind::Worker(ErrorKind::UnknownPlan) && !send_graph =>
                {
                    send_graph = true;
                }
                Err(e) if e.kind == RemoteErrorKind::Connection && !retried => {
                    // The worker may have restarted: a new session tells. Tensors of the old
                    // one are lost; a request without any is sent again.
                    retried = true;
                    let info = self.reconnect(&mut slot, e)?;
                    for input in &inputs {
                        if let RunInput::Resident(h) = input {
                            self.check(&info, h)?;
                        }
                    }
                    send_graph = true;
                }
                Err(e) => return Err(e),
                Ok(reply) => {
                    if let Some(c) = slot.as_mut() {
                        c.known_plans.insert(plan);
                    }
                    self.counters.runs.fetch_add(1, Ordering::Relaxed);
                    self.counters
                        .execution_ns
                        .fetch_add(reply.execution_ns, Ordering::Relaxed);
                    return Ok(reply);
                }
            }
        }
    }

    /// The elements of `handle`.
    pub fn fetch(&self, handle: Handle) -> Result<HostTensor, RemoteError> {
        let mut slot = lock(&self.connection);
        let info = self.ensure(&mut slot)?.info;
        self.check(&info, &handle)?;
        let release = self.take_releases(&info);
        match self.call_on(&mut slot, |c, ctx| async move {
            c.fetch(ctx, handle, release).await
        }) {
            Err(e) if e.kind == RemoteErrorKind::Connection => {
                let info = self.reconnect(&mut slot, e.clone())?;
                self.check(&info, &handle)?;
                Err(e)
            }
            r => r,
        }
    }

    /// Opens a new session after `lost` broke the connection; if that fails too, the error
    /// says both.
    fn reconnect(
        &self,
        slot: &mut Option<Connection>,
        lost: RemoteError,
    ) -> Result<SessionInfo, RemoteError> {
        *slot = None;
        match self.ensure(slot) {
            Ok(c) => Ok(c.info),
            Err(e) => Err(RemoteError::new(
                lost.kind,
                format!("{} (reconnecting failed: {})", lost.message, e.message),
            )),
        }
    }
}

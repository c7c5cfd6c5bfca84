//! `switchboard worker`: a remote worker that runs the lazy graphs clients send it (the
//! switchboard-remote crate) until it is stopped.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

use switchboard_remote::{token_from, TlsIdentity, Worker, WorkerConfig, TOKEN_ENV};

/// The arguments of `switchboard worker`.
#[derive(clap::Args, Debug, Clone)]
#[command(after_help = "\
The worker prints `switchboard worker listening on ADDR (instance ID)` once it accepts
connections. Clients must present the shared token (SWITCHBOARD_WORKER_TOKEN, or --token-file);
without one the worker only listens on a loopback address. Errors are one line on stderr,
`error: ...`, with exit status 2.")]
pub struct WorkerArgs {
    /// The address to listen on (`HOST:PORT`; port 0 picks a free one).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: String,
    /// A file holding the shared token (instead of SWITCHBOARD_WORKER_TOKEN).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Serve TLS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, value_name = "PATH", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The largest message accepted or sent, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = switchboard_remote::DEFAULT_MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,
    /// The most bytes of tensors one client's session may keep on the worker.
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 30)]
    pub max_session_bytes: u64,
    /// Outputs of at most this many elements are returned with their handles.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub inline_elements: usize,
}

fn config(args: &WorkerArgs) -> Result<WorkerConfig, String> {
    let listen: SocketAddr = args
        .listen
        .to_socket_addrs()
        .map_err(|e| format!("invalid --listen address '{}': {e}", args.listen))?
        .next()
        .ok_or_else(|| format!("--listen address '{}' resolves to nothing", args.listen))?;
    let token = token_from(args.token_file.as_deref()).map_err(|e| e.to_string())?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsIdentity {
            cert: cert.clone(),
            key: key.clone(),
        }),
        _ => None,
    };
    if args.max_message_bytes < 4096 {
        return Err(format!(
            "--max-message-bytes {} is too small (at least 4096)",
            args.max_message_bytes
        ));
    }
    Ok(WorkerConfig {
        listen,
        token,
        tls,
        max_message_bytes: args.max_message_bytes,
        inline_elements: args.inline_elements,
        max_session_bytes: args.max_session_bytes,
        ..WorkerConfig::default()
    })
}

/// Runs the worker; returns the exit status when it cannot start.
pub fn main(args: &WorkerArgs) -> i32 {
    let started = config(args).and_then(|c| {
        let token = if c.token.is_some() {
            "required".to_string()
        } else {
            format!("none, set {TOKEN_ENV} to require one")
        };
        Worker::bind(c)
            .map(|w| (w, token))
            .map_err(|e| e.to_string())
    });
    let (worker, token) = match started {
        Ok(w) => w,
        Err(e) => {
            super::report_error(&e);
            return 2;
        }
    };
    let mut out = std::io::stdout();
    let _ = writeln!(
        out,
        "switchboard worker listening on {} (instance {:016x}; token: {token}; tls: {})",
        worker.local_addr(),
        worker.instance(),
        if args.tls_cert.is_some() { "on" } else { "off" }
    );
    let _ = out.flush();
    worker.wait()
}

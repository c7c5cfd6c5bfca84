//! Connections: length-delimited frames with a maximum size, optional TLS (rustls), byte
//! counting, and the tarpc transport over them (Note [Remote protocol]).

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tarpc::tokio_serde::formats::Bincode;
use tarpc::tokio_util::codec::LengthDelimitedCodec;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::rustls;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The default bound of every message, either way: 1 GiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1 << 30;

/// A certificate chain and its private key (PEM files) for a worker serving TLS.
#[derive(Clone, Debug)]
pub struct TlsIdentity {
    /// The certificate chain.
    pub cert: PathBuf,
    /// The private key.
    pub key: PathBuf,
}

/// What a client trusts when it connects with TLS.
#[derive(Clone, Debug)]
pub struct TlsTrust {
    /// The CA certificates (PEM) the worker's certificate must chain to (for a self-signed
    /// certificate: the certificate itself).
    pub ca: PathBuf,
    /// The name the worker's certificate must be valid for (`localhost`).
    pub server_name: String,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read certificates from {}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("bad certificate PEM in {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("no certificate in {}", path.display()));
    }
    Ok(certs)
}

/// The TLS acceptor of a worker serving `identity`.
pub(crate) fn acceptor(identity: &TlsIdentity) -> Result<TlsAcceptor, String> {
    let certs = read_certs(&identity.cert)?;
    let key = PrivateKeyDer::from_pem_file(&identity.key).map_err(|e| {
        format!(
            "cannot read a private key from {}: {e}",
            identity.key.display()
        )
    })?;
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("bad TLS certificate or key: {e}"))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The TLS connector of a client trusting `trust`, and the server name to check.
pub(crate) fn connector(trust: &TlsTrust) -> Result<(TlsConnector, ServerName<'static>), String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in read_certs(&trust.ca)? {
        roots
            .add(c)
            .map_err(|e| format!("bad CA certificate in {}: {e}", trust.ca.display()))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(trust.server_name.clone())
        .map_err(|e| format!("bad TLS server name \"{}\": {e}", trust.server_name))?;
    Ok((TlsConnector::from(Arc::new(config)), name))
}

/// Bytes sent and received on a connection.
#[derive(Debug, Default)]
pub struct ByteCounters {
    /// Written to the connection.
    pub sent: AtomicU64,
    /// Read from it.
    pub received: AtomicU64,
}

/// A stream that counts the bytes through it (what the metrics report as bytes sent and
/// received: frames, headers and TLS records included).
pub(crate) struct Counted<S> {
    pub inner: S,
    pub counters: Arc<ByteCounters>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        self.counters.received.fetch_add(n, Ordering::Relaxed);
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.counters.sent.fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The tarpc transport over `io`: frames of at most `max_message_bytes`, bincode messages.
pub(crate) fn transport<S, Item, SinkItem>(
    io: S,
    max_message_bytes: usize,
) -> tarpc::serde_transport::Transport<S, Item, SinkItem, Bincode<Item, SinkItem>>
where
    S: AsyncRead + AsyncWrite,
    Item: for<'de> serde::Deserialize<'de>,
    SinkItem: serde::Serialize,
{
    let framed = LengthDelimitedCodec::builder()
        .max_frame_length(max_message_bytes)
        .new_framed(io);
    tarpc::serde_transport::new(framed, Bincode::default())
}

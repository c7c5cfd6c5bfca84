//! What the worker refuses: wrong tokens, open addresses without a token, oversized and
//! garbage messages, another session's handles, malformed requests; TLS; a closed connection
//! frees its session's tensors.

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use switchboard_remote::{
    ClientConfig, ErrorKind, Handle, RemoteClient, RemoteErrorKind, RunInput, TlsIdentity,
    TlsTrust, Worker, WorkerConfig,
};

fn with_token(token: &str) -> Worker {
    Worker::bind(WorkerConfig {
        token: Some(token.into()),
        ..WorkerConfig::default()
    })
    .unwrap()
}

fn client_config(token: Option<&str>) -> ClientConfig {
    ClientConfig {
        token: token.map(str::to_string),
        timeout: Duration::from_secs(20),
        ..ClientConfig::default()
    }
}

fn connect(w: &Worker, token: Option<&str>) -> Result<std::sync::Arc<RemoteClient>, String> {
    RemoteClient::connect(&w.local_addr().to_string(), client_config(token))
        .map_err(|e| e.to_string())
}

#[test]
fn a_wrong_or_missing_token_is_refused() {
    let w = with_token("s3cret-token");
    assert!(connect(&w, Some("s3cret-token")).is_ok());
    for bad in [Some("s3cret-tokem"), Some("s3cret"), Some(""), None] {
        assert_eq!(
            connect(&w, bad).err().unwrap(),
            "wrong worker token (the worker's SWITCHBOARD_WORKER_TOKEN or token file)"
        );
    }
    // Every call but hello needs a session.
    let rt = runtime();
    let raw = raw_client(&rt, w.local_addr());
    let e = rt
        .block_on(raw.release(ctx(), vec![]))
        .unwrap()
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unauthenticated);
    assert_eq!(
        e.message,
        "no session: call hello with the worker's token first"
    );
}

#[test]
fn a_non_loopback_address_needs_a_token() {
    let open = WorkerConfig {
        listen: SocketAddr::from(([0, 0, 0, 0], 0)),
        ..WorkerConfig::default()
    };
    let e = Worker::bind(open.clone()).err().unwrap();
    assert_eq!(e.kind, RemoteErrorKind::Config);
    assert_eq!(
        e.message,
        "refusing to listen on 0.0.0.0:0, which is not a loopback address, without a token: set \
         SWITCHBOARD_WORKER_TOKEN or give a token file"
    );
    let w = Worker::bind(WorkerConfig {
        token: Some("t".into()),
        ..open
    })
    .unwrap();
    assert!(!w.local_addr().ip().is_loopback());
}

#[test]
fn tls_round_trip_and_a_plain_client_is_refused() {
    let dir = std::env::temp_dir().join(format!("switchboard-remote-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.signing_key.serialize_pem()).unwrap();
    let w = Worker::bind(WorkerConfig {
        tls: Some(TlsIdentity {
            cert: cert_path.clone(),
            key: key_path,
        }),
        ..WorkerConfig::default()
    })
    .unwrap();
    let tls = ClientConfig {
        tls: Some(TlsTrust {
            ca: cert_path.clone(),
            server_name: "localhost".into(),
        }),
        ..client_config(None)
    };
    let client = RemoteClient::connect(&w.local_addr().to_string(), tls.clone()).unwrap();
    let reply = client
        .run(
            1,
            &double_graph(&[3]),
            vec![RunInput::inline(host_f32(&[1.0, 2.0, 3.0], &[3]))],
            false,
        )
        .unwrap();
    assert_eq!(
        reply.outputs[0].inline,
        Some(host_f32(&[2.0, 4.0, 6.0], &[3]))
    );
    // A client that does not speak TLS gets an error, not a hang.
    let plain = ClientConfig {
        timeout: Duration::from_secs(5),
        ..client_config(None)
    };
    assert!(RemoteClient::connect(&w.local_addr().to_string(), plain).is_err());
    // A client expecting another name refuses the certificate.
    let other = ClientConfig {
        tls: Some(TlsTrust {
            ca: cert_path,
            server_name: "example.org".into(),
        }),
        ..tls
    };
    let e = RemoteClient::connect(&w.local_addr().to_string(), other)
        .err()
        .unwrap();
    assert!(e.message.contains("TLS handshake with the worker"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn oversized_messages_are_refused() {
    let w = Worker::bind(WorkerConfig {
        max_message_bytes: 64 * 1024,
        ..WorkerConfig::default()
    })
    .unwrap();
    let big = vec![1.0f32; 32 * 1024];
    // The client's own limit: refused before sending.
    let small = ClientConfig {
        max_message_bytes: 64 * 1024,
        ..client_config(None)
    };
    let c = RemoteClient::connect(&w.local_addr().to_string(), small).unwrap();
    let e = c
        .run(
            1,
            &double_graph(&[32 * 1024]),
            vec![RunInput::inline(host_f32(&big, &[32 * 1024]))],
            false,
        )
        .unwrap_err();
    assert_eq!(e.kind, RemoteErrorKind::TooLarge);
    assert!(
        e.message
            .starts_with("the request would be a message of about 131"),
        "{e}"
    );
    assert!(e.message.ends_with("over the limit of 65536 bytes"), "{e}");
    // A client with a larger limit: the worker drops the connection at the frame's header.
    let c = RemoteClient::connect(&w.local_addr().to_string(), client_config(None)).unwrap();
    let e = c
        .run(
            1,
            &double_graph(&[32 * 1024]),
            vec![RunInput::inline(host_f32(&big, &[32 * 1024]))],
            false,
        )
        .unwrap_err();
    assert_eq!(e.kind, RemoteErrorKind::Connection, "{e}");
    // Results over the limit stay on the worker and say why.
    let c = RemoteClient::connect(&w.local_addr().to_string(), client_config(None)).unwrap();
    let n = 15 * 1024;
    let reply = c
        .run(
            2,
            &double_graph(&[n]),
            vec![RunInput::inline(host_f32(&vec![1.0; n as usize], &[n]))],
            false,
        )
        .unwrap();
    assert!(reply.outputs[0].inline.is_none());
    let fetched = c.fetch(reply.outputs[0].handle).unwrap();
    assert_eq!(fetched.bytes.len(), 4 * n as usize);
    assert!(w.sessions() >= 1, "the worker still serves");
}

#[test]
fn garbage_bytes_do_not_harm_the_worker() {
    let w = worker();
    let garbage: Vec<Vec<u8>> = vec![
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        vec![0xff, 0xff, 0xff, 0xff, 1, 2, 3],
        vec![0, 0, 0, 8, 0xde, 0xad, 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef],
        vec![0, 0, 0, 2, 0, 0],
        (0..4096u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
            .collect(),
    ];
    for g in garbage {
        let mut s = std::net::TcpStream::connect(w.local_addr()).unwrap();
        let _ = s.write_all(&g);
        drop(s);
    }
    // Still serving, and nothing is left of those connections.
    let c = RemoteClient::connect(&w.local_addr().to_string(), client_config(None)).unwrap();
    let reply = c
        .run(
            1,
            &double_graph(&[2]),
            vec![RunInput::inline(host_f32(&[1.0, 5.0], &[2]))],
            false,
        )
        .unwrap();
    assert_eq!(reply.outputs[0].inline, Some(host_f32(&[2.0, 10.0], &[2])));
}

#[test]
fn a_session_cannot_use_another_sessions_handles() {
    let w = worker();
    let rt = runtime();
    let (a, b) = (
        raw_client(&rt, w.local_addr()),
        raw_client(&rt, w.local_addr()),
    );
    let sa = rt.block_on(a.hello(ctx(), String::new())).unwrap().unwrap();
    let sb = rt.block_on(b.hello(ctx(), String::new())).unwrap().unwrap();
    assert_ne!(sa.session, sb.session);
    assert_eq!(sa.instance, sb.instance);
    let reply = rt
        .block_on(a.run(
            ctx(),
            run_request(
                1,
                Some(double_graph(&[2])),
                vec![RunInput::inline(host_f32(&[1.0, 2.0], &[2]))],
            ),
        ))
        .unwrap()
        .unwrap();
    let h = reply.outputs[0].handle;
    let refused = format!(
        "handle {} belongs to session {}, not to this connection's session {}: a session can \
         only use its own tensors",
        h.id, sa.session, sb.session
    );
    let e = rt.block_on(b.fetch(ctx(), h, vec![])).unwrap().unwrap_err();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::InvalidRequest, refused.as_str())
    );
    let e = rt.block_on(b.release(ctx(), vec![h])).unwrap().unwrap_err();
    assert_eq!(e.message, refused);
    let e = rt
        .block_on(b.run(
            ctx(),
            run_request(1, Some(double_graph(&[2])), vec![RunInput::Resident(h)]),
        ))
        .unwrap()
        .unwrap_err();
    assert_eq!(e.message, refused);
    // A forged handle with b's session id but a's number is simply unknown to b.
    let forged = Handle {
        session: sb.session,
        ..h
    };
    let e = rt
        .block_on(b.fetch(ctx(), forged, vec![]))
        .unwrap()
        .unwrap_err();
    assert!(e.message.starts_with("unknown handle"), "{e}");
    // a still has it.
    let t = rt.block_on(a.fetch(ctx(), h, vec![])).unwrap().unwrap();
    assert_eq!(t, host_f32(&[2.0, 4.0], &[2]));
    // A handle of another worker instance is lost state.
    let other = Handle {
        instance: sa.instance ^ 1,
        ..h
    };
    let e = rt
        .block_on(a.fetch(ctx(), other, vec![]))
        .unwrap()
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::StateLost);
    assert!(
        e.message
            .starts_with("remote worker state lost (the worker restarted"),
        "{e}"
    );
}

#[test]
fn malformed_requests_get_clear_errors() {
    let w = worker();
    let rt = runtime();
    let c = raw_client(&rt, w.local_addr());
    let s = rt.block_on(c.hello(ctx(), String::new())).unwrap().unwrap();
    let run = |req| rt.block_on(c.run(ctx(), req)).unwrap().unwrap_err();
    let e = run(run_request(7, None, vec![]));
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::UnknownPlan, "unknown plan 7: send its graph")
    );
    let mut graph = double_graph(&[2]);
    let at = graph.windows(3).position(|w| w == b"mul").unwrap();
    graph[at..at + 3].copy_from_slice(b"foo");
    let e = run(run_request(1, Some(graph), vec![]));
    assert_eq!(
        e.message,
        "bad graph: node 1: unknown operator \"aten::foo.Scalar\""
    );
    let good = || Some(double_graph(&[2]));
    let e = run(run_request(1, good(), vec![]));
    assert_eq!(e.message, "the graph has 1 inputs but 0 were sent");
    let mut short = host_f32(&[1.0, 2.0], &[2]);
    short.bytes.pop();
    let e = run(run_request(1, good(), vec![RunInput::inline(short)]));
    assert_eq!(
        e.message,
        "input 0: a float32 tensor of sizes [2] needs 8 bytes, 7 were sent"
    );
    let e = run(run_request(
        1,
        good(),
        vec![RunInput::inline(host_f32(&[1.0; 3], &[3]))],
    ));
    assert_eq!(
        e.message,
        "input 0: a float32 tensor of sizes [3] where a float32 tensor of sizes [2] was expected"
    );
    let mut bad_dtype = host_f32(&[1.0, 2.0], &[2]);
    bad_dtype.dtype = "float128".into();
    let e = run(run_request(1, good(), vec![RunInput::inline(bad_dtype)]));
    assert_eq!(e.message, "input 0: unknown dtype \"float128\"");
    let mut huge = host_f32(&[1.0, 2.0], &[2]);
    huge.sizes = vec![i64::MAX, 4];
    let e = run(run_request(1, good(), vec![RunInput::inline(huge)]));
    assert_eq!(
        e.message,
        "input 0: sizes [9223372036854775807, 4] overflow"
    );
    let unknown = Handle {
        instance: s.instance,
        session: s.session,
        id: 99,
    };
    let e = run(run_request(1, good(), vec![RunInput::Resident(unknown)]));
    assert_eq!(
        e.message,
        format!(
            "unknown handle 99 of session {}: it was released, or never returned by this worker",
            s.session
        )
    );
    // A resident tensor of another layout than the graph's input.
    let ok = rt
        .block_on(c.run(
            ctx(),
            run_request(
                2,
                Some(double_graph(&[3])),
                vec![RunInput::inline(host_f32(&[1.0; 3], &[3]))],
            ),
        ))
        .unwrap()
        .unwrap();
    let e = run(run_request(
        1,
        good(),
        vec![RunInput::Resident(ok.outputs[0].handle)],
    ));
    assert!(
        e.message.starts_with(&format!(
            "input 0 (handle {}): a float32 tensor of sizes [3], strides [1], offset 0 where the \
             graph expects float32 of sizes [2]",
            ok.outputs[0].handle.id
        )),
        "{e}"
    );
}

#[test]
fn a_closed_connection_frees_its_tensors() {
    let w = worker();
    let c = RemoteClient::connect(&w.local_addr().to_string(), client_config(None)).unwrap();
    for plan in 0..3 {
        c.run(
            plan,
            &double_graph(&[2]),
            vec![RunInput::inline(host_f32(&[1.0, 2.0], &[2]))],
            false,
        )
        .unwrap();
    }
    assert_eq!(w.resident_tensors(), 3);
    assert_eq!(w.sessions(), 1);
    drop(c);
    // The worker notices the closed connection on its own threads: wait for it.
    for _ in 0..1000 {
        if w.sessions() == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(w.sessions(), 0);
    assert_eq!(w.resident_tensors(), 0);
}

#[test]
fn released_handles_are_freed_with_the_next_request() {
    let w = worker();
    let c = RemoteClient::connect(&w.local_addr().to_string(), client_config(None)).unwrap();
    let input = || vec![RunInput::inline(host_f32(&[1.0, 2.0], &[2]))];
    let r = c.run(1, &double_graph(&[2]), input(), false).unwrap();
    assert_eq!(w.resident_tensors(), 1);
    c.release_later(r.outputs[0].handle);
    assert_eq!(w.resident_tensors(), 1, "queued, not sent");
    let trips = c
        .counters()
        .round_trips
        .load(std::sync::atomic::Ordering::Relaxed);
    c.run(1, &double_graph(&[2]), input(), false).unwrap();
    assert_eq!(
        c.counters()
            .round_trips
            .load(std::sync::atomic::Ordering::Relaxed),
        trips + 1
    );
    assert_eq!(
        w.resident_tensors(),
        1,
        "the first result freed, the second kept"
    );
    let e = c.fetch(r.outputs[0].handle).unwrap_err();
    assert!(e.message.starts_with("unknown handle"), "{e}");
}

//! The worker's limits: bytes a session keeps, graphs that lie about their sizes or allocate
//! off their device, connections that never open a session, plans evicted and resent.

mod common;

use std::time::Duration;

use common::*;
use switchboard_remote::{
    ClientConfig, ErrorKind, RemoteClient, RemoteErrorKind, RunInput, Worker, WorkerConfig,
};

fn client_config() -> ClientConfig {
    ClientConfig {
        timeout: Duration::from_secs(20),
        ..ClientConfig::default()
    }
}

#[test]
fn a_session_keeps_at_most_its_byte_limit() {
    let w = Worker::bind(WorkerConfig {
        max_session_bytes: 64,
        ..WorkerConfig::default()
    })
    .unwrap();
    let c = RemoteClient::connect(&w.local_addr().to_string(), client_config()).unwrap();
    let input = || vec![RunInput::inline(host_f32(&[1.0; 8], &[8]))];
    let first = c.run(1, &double_graph(&[8]), input(), false).unwrap();
    c.run(1, &double_graph(&[8]), input(), false).unwrap();
    let e = c.run(1, &double_graph(&[8]), input(), false).unwrap_err();
    assert_eq!(e.kind, RemoteErrorKind::TooLarge);
    assert_eq!(
        e.message,
        "the session would keep 96 bytes, over the worker's limit of 64 bytes per \
         session (--max-session-bytes): release tensors"
    );
    // Releasing makes room.
    c.release_later(first.outputs[0].handle);
    c.run(1, &double_graph(&[8]), input(), false).unwrap();
    assert_eq!(w.resident_tensors(), 2);
    let e = c
        .run(
            2,
            &double_graph(&[32]),
            vec![RunInput::inline(host_f32(&[1.0; 32], &[32]))],
            false,
        )
        .unwrap_err();
    assert_eq!(
        e.message,
        "the graph's results take 128 bytes, over the worker's limit of 64 bytes per session \
         (--max-session-bytes)"
    );
}

/// A factory call of sizes `sizes` on `device`, recorded as making 2 floats.
fn zeros_graph(sizes: i64, device: Option<&str>) -> Vec<u8> {
    use switchboard_dispatcher::{Dispatcher, IValue};
    use switchboard_graph::{Arg, Graph, Output, TensorMeta};
    use switchboard_tensor::{ScalarType, Tensor};
    let x = Tensor::zeros(&[2], ScalarType::Float).unwrap();
    let zeros = Dispatcher::global()
        .find_schema_or_throw("aten::zeros")
        .unwrap();
    let mut g = Graph::new();
    let n = g
        .add_call(
            zeros,
            vec![
                Arg::Const(IValue::IntList([sizes].into_iter().collect())),
                Arg::Const(IValue::None),
                Arg::Const(IValue::None),
                Arg::Const(device.map_or(IValue::None, |d| IValue::Device(d.parse().unwrap()))),
                Arg::Const(IValue::None),
            ],
            vec![Output::ret(0, TensorMeta::of(&x))],
        )
        .unwrap();
    g.set_outputs(vec![g.value(n, 0)]).unwrap();
    g.to_bytes().unwrap()
}

/// A graph whose records understate what a call allocates is refused before it runs (Note
/// [Checking a graph's shapes before it runs]), and so is a factory call off the graph's
/// device.
#[test]
fn a_graph_lying_about_its_sizes_is_refused_before_it_allocates() {
    let w = worker();
    let c = RemoteClient::connect(&w.local_addr().to_string(), client_config()).unwrap();
    // Recorded as 2 elements; the call would allocate 1 TiB.
    let e = c
        .run(1, &zeros_graph(1 << 38, Some("lazy:0")), vec![], false)
        .unwrap_err();
    assert_eq!(e.kind, RemoteErrorKind::Worker(ErrorKind::InvalidRequest));
    assert!(
        e.message.starts_with(
            "the graph's recorded shapes do not hold: graph: aten::zeros produced a torch.float32 \
             tensor of sizes [274877906944]"
        ),
        "{e}"
    );
    for (device, named) in [
        (None, "the default device (no device given)"),
        (Some("cpu"), "cpu"),
    ] {
        let e = c
            .run(2, &zeros_graph(1 << 38, device), vec![], false)
            .unwrap_err();
        assert_eq!(
            e.message,
            format!(
                "bad graph: node 0 (aten::zeros) makes a tensor on {named}: a worker runs only \
                 calls on the device the graph was captured for"
            )
        );
    }
    // The honest graph runs.
    let r = c
        .run(3, &zeros_graph(2, Some("lazy:0")), vec![], false)
        .unwrap();
    assert_eq!(r.outputs[0].inline, Some(host_f32(&[0.0, 0.0], &[2])));
}

#[test]
fn a_connection_without_hello_is_closed() {
    use std::io::Read;
    let w = Worker::bind(WorkerConfig {
        hello_timeout: Duration::from_millis(200),
        ..WorkerConfig::default()
    })
    .unwrap();
    let mut idle = std::net::TcpStream::connect(w.local_addr()).unwrap();
    // A guard against a hang, far above the hello timeout: the worker closes first.
    idle.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(idle.read(&mut buf).unwrap(), 0, "closed by the worker");
    // A client that says hello in time keeps its connection past the timeout.
    let c = RemoteClient::connect(&w.local_addr().to_string(), client_config()).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    c.run(
        1,
        &double_graph(&[2]),
        vec![RunInput::inline(host_f32(&[1.0, 2.0], &[2]))],
        false,
    )
    .unwrap();
}

#[test]
fn evicted_plans_are_resent_by_the_client() {
    let w = Worker::bind(WorkerConfig {
        max_plans_per_session: 1,
        ..WorkerConfig::default()
    })
    .unwrap();
    let c = RemoteClient::connect(&w.local_addr().to_string(), client_config()).unwrap();
    let trips = || {
        c.counters()
            .round_trips
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let run = |plan, n: i64| {
        let r = c
            .run(
                plan,
                &double_graph(&[n]),
                vec![RunInput::inline(host_f32(&vec![1.0; n as usize], &[n]))],
                false,
            )
            .unwrap();
        c.release_later(r.outputs[0].handle);
        r.outputs[0].inline.clone().unwrap()
    };
    run(1, 2);
    run(2, 3);
    let before = trips();
    // Plan 1 was evicted for plan 2: "unknown plan", then the graph again.
    assert_eq!(run(1, 2), host_f32(&[2.0, 2.0], &[2]));
    assert_eq!(trips(), before + 2);
    assert_eq!(run(1, 2), host_f32(&[2.0, 2.0], &[2]));
    assert_eq!(trips(), before + 3);
}

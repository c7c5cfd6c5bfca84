//! Training through a worker: an MLP step on a remote lazy device gives the CPU executor's
//! numbers exactly; parameters are uploaded once; a step with a cached plan is one round trip
//! carrying the batch and the loss; the lazy graph survives the wire format.

mod common;

use std::sync::atomic::Ordering;

use common::*;
use switchboard_graph::Graph;
use switchboard_nn::Optimizer;
use switchboard_tensor::Device;

const SIZES: [usize; 3] = [64, 256, 10];

#[test]
fn mlp_training_matches_the_cpu_executor_exactly() {
    let data = batches(4, 64);
    let cpu = own_device();
    let mut on_cpu = Trainer::new(cpu.device(), &SIZES);
    let w = worker();
    let (remote, _exe) = remote_device(&w);
    let mut on_worker = Trainer::new(remote.device(), &SIZES);
    let mut eager = Trainer::new(Device::CPU, &SIZES);
    for (x, y) in &data {
        let a = on_cpu.step(x, y);
        let b = on_worker.step(x, y);
        let c = eager.step(x, y);
        assert_eq!(
            a.to_bits(),
            b.to_bits(),
            "loss: cpu executor {a}, worker {b}"
        );
        assert_eq!(a.to_bits(), c.to_bits(), "loss: lazy {a}, eager {c}");
    }
    assert_eq!(on_cpu.first_weight(), on_worker.first_weight());
    assert_eq!(eager.first_weight(), on_worker.first_weight());
}

/// What one step costs on the wire.
#[derive(Debug, Clone, Copy)]
struct StepCost {
    round_trips: u64,
    sent: u64,
    received: u64,
}

#[test]
fn parameters_travel_once_and_a_cached_step_is_one_round_trip() {
    let data = batches(5, 64);
    let w = worker();
    let (d, exe) = remote_device(&w);
    let mut t = Trainer::new(d.device(), &SIZES);
    let c = exe.client().counters();
    let mut costs = Vec::new();
    for (x, y) in &data {
        let before = (
            c.round_trips.load(Ordering::Relaxed),
            c.bytes.sent.load(Ordering::Relaxed),
            c.bytes.received.load(Ordering::Relaxed),
        );
        t.step(x, y);
        costs.push(StepCost {
            round_trips: c.round_trips.load(Ordering::Relaxed) - before.0,
            sent: c.bytes.sent.load(Ordering::Relaxed) - before.1,
            received: c.bytes.received.load(Ordering::Relaxed) - before.2,
        });
    }
    let params = t.parameter_bytes() as u64;
    let batch = (data[0].0.nbytes() + data[0].1.nbytes()) as u64;
    eprintln!("parameters {params} B, batch {batch} B, per step: {costs:#?}");
    // The first step uploads the parameters; no later one does.
    assert!(costs[0].sent > params, "{costs:?}");
    for s in &costs[1..] {
        assert!(
            s.sent < params / 4,
            "a later step sent {} bytes: {costs:?}",
            s.sent
        );
    }
    // Steps 3.. reuse step 2's plan: one round trip (the loss comes back inline), and the
    // request is the batch plus handles and a small envelope.
    for s in &costs[2..] {
        assert_eq!(s.round_trips, 1, "{costs:?}");
        assert!(s.sent < batch + 2048, "{costs:?}");
        assert!(s.received < 4096, "{costs:?}");
    }
    assert_eq!(costs[3].sent, costs[4].sent);
    // Nothing piles up on the worker: each step frees what the previous one replaced.
    let resident = w.resident_tensors();
    t.step(&data[0].0, &data[0].1);
    t.step(&data[1].0, &data[1].1);
    assert_eq!(w.resident_tensors(), resident);
    let report = d.metrics_report();
    for line in [
        "Counter: RemoteRoundTrips",
        "Counter: RemoteBytesSent",
        "Counter: RemoteBytesReceived",
        "Metric: RemoteExecutionTime",
    ] {
        assert!(report.contains(line), "{report}");
    }
    assert!(
        report.contains("Lazy backend metrics (executor: remote"),
        "{report}"
    );
}

#[test]
fn the_worker_times_each_operator_when_asked() {
    let data = batches(1, 64);
    let w = worker();
    let (d, exe) = remote_device(&w);
    let mut t = Trainer::new(d.device(), &SIZES);
    assert!(exe.operator_times().is_empty());
    exe.set_profiling(true);
    t.step(&data[0].0, &data[0].1);
    let times = exe.operator_times();
    let (count, ns) = times["aten::addmm"];
    assert_eq!(count, 2, "{times:?}");
    assert!(ns > 0);
    assert!(times.contains_key("aten::mm"), "{times:?}");
}

#[test]
fn a_training_step_graph_survives_the_wire_format() {
    let data = batches(2, 64);
    let d = own_device();
    let mut t = Trainer::new(d.device(), &SIZES);
    t.step(&data[0].0, &data[0].1);
    // Capture a second step without running it.
    let (x, y) = (to(&data[1].0, d.device()), to(&data[1].1, d.device()));
    let loss = switchboard_ops::cross_entropy_loss(
        &switchboard_nn::Module::forward(&t.model, &x).unwrap(),
        &y,
    )
    .unwrap();
    t.opt.zero_grad();
    switchboard_autograd::AutogradTensor::backward(&loss).unwrap();
    t.opt.step().unwrap();
    let g = d.pending_graph();
    assert!(g.num_calls() > 30, "{g}");
    let back = Graph::from_bytes(&g.to_bytes().unwrap()).unwrap();
    assert_eq!(back.structural_key(), g.structural_key());
    assert_eq!(back.to_json(), g.to_json());
    drop(loss);
}

/// A graph that writes its input in place: the host copy the input's buffer held from an
/// earlier run is stale afterwards, and reading the input fetches the new elements.
#[test]
fn an_input_written_in_place_is_not_read_from_a_stale_host_copy() {
    use switchboard_dispatcher::{Dispatcher, IValue};
    use switchboard_graph::{Arg, Output, Source, TensorMeta};
    use switchboard_lazy::Executor;
    use switchboard_remote::RemoteBuffer;
    use switchboard_tensor::Tensor;

    let w = worker();
    let (_d, exe) = remote_device(&w);
    let x = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let meta = TensorMeta::of(&x);
    let op = |name: &str| Dispatcher::global().find_schema_or_throw(name).unwrap();
    // mul: y = x * 2, returned with its elements inline.
    let mut g = Graph::new();
    let a = g.add_input(meta.clone());
    let n = g
        .add_call(
            op("aten::mul.Scalar"),
            vec![Arg::Value(a), Arg::Const(IValue::Int(2))],
            vec![Output::ret(0, meta.clone())],
        )
        .unwrap();
    g.set_outputs(vec![g.value(n, 0)]).unwrap();
    let y = exe.compile(g).unwrap().run(vec![x]).unwrap().remove(0);
    assert!(y.payload_as::<RemoteBuffer>().unwrap().has_host_copy());
    assert_eq!(values(&exe.to_host(&y).unwrap()), [2.0, 4.0]);
    // add_: y += 1 in place on the worker.
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(&y));
    let n = g
        .add_call(
            op("aten::add_.Scalar"),
            vec![
                Arg::Value(a),
                Arg::Const(IValue::Int(1)),
                Arg::Const(IValue::Int(1)),
            ],
            vec![Output {
                meta: meta.into(),
                source: Source::Return(0),
            }],
        )
        .unwrap();
    g.set_outputs(vec![g.value(n, 0)]).unwrap();
    exe.compile(g).unwrap().run(vec![y.clone()]).unwrap();
    assert!(!y.payload_as::<RemoteBuffer>().unwrap().has_host_copy());
    assert_eq!(values(&exe.to_host(&y).unwrap()), [3.0, 5.0]);
}

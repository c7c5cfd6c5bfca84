//! Running the pending graph: materialisation on demand, sync, the graph cache, dead nodes,
//! merged nodes, executors, failures; lazy mode and selective interception; statistics,
//! report and profile; exports.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;
use switchboard_autograd::AutogradTensor;
use switchboard_dispatcher::Result;
use switchboard_graph::Graph;
use switchboard_lazy as lazy;
use switchboard_nn::{mlp, Module, Optimizer, Sgd};
use switchboard_ops as ops;
use switchboard_tensor::{Device, Generator, ScalarType, Tensor};

#[test]
fn values_are_computed_on_demand() {
    let d = own_device();
    let x = d.lz(&seq(&[2, 2]));
    let y = ops::mul_scalar(&x, 3).unwrap();
    let before = d.stats();
    assert_eq!(y.to_vec::<f32>().unwrap(), [3.0, 6.0, 9.0, 12.0]);
    let s = ops::sum(&y).unwrap();
    assert_eq!(s.item().unwrap().to_f64(), 30.0);
    assert_eq!(
        y.to_string(),
        format!(
            "tensor([[ 3.,  6.],\n        [ 9., 12.]], device='{}')",
            d.device()
        )
    );
    let c = to(&ops::relu(&y).unwrap(), Device::CPU);
    assert_eq!(c.device(), Device::CPU);
    let after = d.stats();
    assert_eq!(
        after.syncs,
        before.syncs + 3,
        "y, s and relu each needed a run"
    );
    assert!(after.materializations >= before.materializations + 4);
    // sync / mark_step run what is pending and nothing when nothing is.
    let z = ops::exp(&x).unwrap();
    assert!(d.pending_calls() > 0);
    d.mark_step().unwrap();
    assert_eq!(d.pending_calls(), 0);
    let s1 = d.stats();
    d.sync().unwrap();
    let s2 = d.stats();
    assert_eq!(
        (s2.syncs, s2.explicit_syncs),
        (s1.syncs, s1.explicit_syncs + 1)
    );
    assert_eq!(values(&z)[0], 1f32.exp());
}

/// The same training step each iteration: one plan, then hits.
#[test]
fn the_graph_cache_reuses_plans() {
    let d = own_device();
    let mut model = mlp(&[6, 5, 3], 1).unwrap();
    model.to_device(d.device()).unwrap();
    let x = d.lz(&seq(&[4, 6]));
    let y = d.lz(&Tensor::from_vec(vec![0i64, 1, 2, 1], &[4]).unwrap());
    let mut opt = Sgd::new(model.parameters(), 0.01).momentum(0.9);
    let mut step = || {
        let loss = ops::cross_entropy_loss(&model.forward(&x).unwrap(), &y).unwrap();
        opt.zero_grad();
        loss.backward().unwrap();
        opt.step().unwrap();
        d.mark_step().unwrap();
        loss.item().unwrap().to_f64()
    };
    step(); // the momentum buffers are created: another graph
    step();
    let before = d.stats();
    for _ in 0..3 {
        step();
    }
    let after = d.stats();
    assert_eq!(after.cache_misses, before.cache_misses);
    assert_eq!(after.cache_hits, before.cache_hits + 3);
}

#[test]
fn dead_nodes_do_not_run_and_identical_pure_nodes_run_once() {
    let d = own_device();
    let x = d.lz(&seq(&[3]));
    d.sync().unwrap();
    let before = d.stats();
    let dead = ops::exp(&x).unwrap();
    drop(dead);
    let a = ops::relu(&x).unwrap();
    let b = ops::relu(&x).unwrap();
    let c = ops::add(&a, &b).unwrap();
    drop((a, b));
    d.sync().unwrap();
    let after = d.stats();
    assert_eq!(after.nodes_dead, before.nodes_dead + 1, "exp");
    assert_eq!(
        after.nodes_merged,
        before.nodes_merged + 1,
        "the second relu"
    );
    assert_eq!(
        after.nodes_executed,
        before.nodes_executed + 2,
        "relu and add"
    );
    assert_eq!(values(&c), [2.0, 4.0, 6.0]);
}

/// An executor that counts its runs and delegates to the CPU executor.
struct Counting(Arc<AtomicUsize>);

struct CountingExe(Arc<dyn lazy::Executable>, Arc<AtomicUsize>);

impl lazy::Executor for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn compile(&self, graph: Graph) -> Result<Arc<dyn lazy::Executable>> {
        Ok(Arc::new(CountingExe(
            lazy::CpuExecutor.compile(graph)?,
            self.0.clone(),
        )))
    }
}

impl lazy::Executable for CountingExe {
    fn run(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        self.1.fetch_add(1, Ordering::SeqCst);
        self.0.run(inputs)
    }
    fn calls(&self) -> usize {
        self.0.calls()
    }
}

#[test]
fn executors_are_pluggable() {
    let d = own_device();
    let runs = Arc::new(AtomicUsize::new(0));
    let old = d.set_executor(Arc::new(Counting(runs.clone())));
    assert_eq!(d.stats().executor, "counting");
    assert_eq!(d.stats().cache_size, 0, "the cache is emptied");
    let x = d.lz(&seq(&[2]));
    assert_eq!(values(&ops::neg(&x).unwrap()), [-1.0, -2.0]);
    assert!(runs.load(Ordering::SeqCst) >= 1);
    assert!(d.metrics_report().contains("executor: counting"));
    d.set_executor(old);
    assert_eq!(d.stats().executor, "cpu");
}

#[test]
fn a_failing_graph_reports_its_error_and_poisons_its_results() {
    let d = own_device();
    let x = d.lz(&seq(&[3]));
    let bad = d.lz(&Tensor::from_vec(vec![0i64, 5], &[2]).unwrap());
    d.sync().unwrap();
    let y = ops::index_select(&x, 0, &bad).unwrap(); // the index is only checked on data
    let err = d.sync().unwrap_err().to_string();
    assert!(err.contains("out of range"), "{err}");
    let err = y.to_vec::<f32>().unwrap_err().to_string();
    assert!(err.contains("the graph computing it failed"), "{err}");
    // The backend goes on.
    assert_eq!(values(&ops::neg(&x).unwrap()), [-1.0, -2.0, -3.0]);
}

#[test]
fn lazy_mode_off_runs_at_once_with_the_same_results() {
    let d = own_device();
    let a = seq(&[2, 3]);
    let want = values(&ops::relu(&ops::mm(&a, &ops::t(&a).unwrap()).unwrap()).unwrap());
    let la = d.lz(&a);
    d.sync().unwrap();
    let before = d.stats();
    let got = {
        let _eager = lazy::LazyModeGuard::new(false);
        assert!(!lazy::lazy_mode());
        let r = ops::relu(&ops::mm(&la, &ops::t(&la).unwrap()).unwrap()).unwrap();
        assert_eq!(d.pending_calls(), 0, "nothing deferred");
        assert_eq!(r.device(), d.device());
        assert!(d.metrics_report().contains("lazy mode: off"));
        r
    };
    assert!(lazy::lazy_mode(), "the guard restores the mode");
    assert_eq!(values(&got), want);
    let after = d.stats();
    assert!(after.eager_mode_calls >= before.eager_mode_calls + 3);
    assert_eq!(after.syncs, before.syncs, "eager calls need no graph");
    assert!(!lazy::set_lazy_mode(true) || lazy::lazy_mode());
}

#[test]
fn disabling_applies_to_operators_seen_before_and_after() {
    let d = own_device();
    let la = d.lz(&seq(&[2]));
    let eager_calls = |name: &str| *d.stats().eager_fallback_ops.get(name).unwrap_or(&0);
    // `neg` is intercepted (and so registered) before the filter changes; `tanh` is not.
    ops::neg(&la).unwrap();
    let (neg0, tanh0) = (eager_calls("aten::neg"), eager_calls("aten::tanh"));
    d.disable_ops(&["neg", "tanh"]).unwrap();
    ops::neg(&la).unwrap();
    ops::tanh(&la).unwrap();
    assert_eq!(
        (eager_calls("aten::neg"), eager_calls("aten::tanh")),
        (neg0 + 1, tanh0 + 1)
    );
    d.enable_all_ops();
    ops::neg(&la).unwrap();
    ops::tanh(&la).unwrap();
    assert_eq!(
        (eager_calls("aten::neg"), eager_calls("aten::tanh")),
        (neg0 + 1, tanh0 + 1)
    );
    assert!(d.disabled_ops().is_empty());
}

#[test]
fn disabled_operators_run_eagerly() {
    let d = own_device();
    let a = seq(&[2, 2]);
    let la = d.lz(&a);
    d.disable_ops(&["aten::mm"]).unwrap();
    let before = d.stats();
    let r = ops::mm(&la, &la).unwrap();
    let e = ops::exp(&la).unwrap();
    let mid = d.stats();
    assert_eq!(
        mid.eager_fallback_ops.get("aten::mm"),
        Some(&(before.eager_fallback_ops.get("aten::mm").unwrap_or(&0) + 1))
    );
    assert_eq!(
        mid.registered_captures,
        before.registered_captures + 1,
        "exp is captured"
    );
    d.enable_all_ops();
    let r2 = ops::mm(&la, &la).unwrap();
    assert_eq!(
        d.stats().eager_fallback_ops.get("aten::mm"),
        mid.eager_fallback_ops.get("aten::mm")
    );
    assert_eq!(values(&r), values(&ops::mm(&a, &a).unwrap()));
    assert_eq!(values(&r), values(&r2));
    assert_eq!(values(&e)[0], 1f32.exp());
    assert!(d.disabled_ops().is_empty());
}

#[test]
fn statistics_report_and_profile() {
    let d = own_device();
    d.reset_stats();
    let x = d.lz(&seq(&[4, 4]));
    assert!(d.profile().is_empty(), "off: nothing recorded");
    d.set_profiling(true);
    for _ in 0..3 {
        let _ = ops::mm(&x, &x).unwrap();
    }
    let _ = ops::clamp_with(&x, ops::ClampOptions::default().max(2)).unwrap();
    d.set_profiling(false);
    let _ = ops::mm(&x, &x).unwrap();
    d.sync().unwrap();
    let p = d.profile();
    assert_eq!(p["aten::mm"].count, 3);
    assert!(p["aten::mm"].avg_overhead_ns > 0.0);
    let j = d.profile_json();
    assert_eq!(j["aten::mm"]["count"], 3);
    assert!(j["aten::clamp"]["avg_overhead_ns"].as_f64().unwrap() > 0.0);

    let s = d.stats();
    assert_eq!(s.registered_ops, s.static_coverage.registered);
    assert!(s.registered_ops >= 80);
    assert_eq!(s.fallback_ops["aten::clamp"], 1);
    assert_eq!(
        s.operation_count,
        s.registered_captures
            + s.fallback_capture_count
            + s.eager_fallback_count
            + s.eager_mode_calls
    );
    assert!(s.lazy_mode);
    assert_eq!(s.capture_percentage, 100.0);
    let c = &s.static_coverage;
    assert_eq!(
        c.operators,
        c.registered + c.fallback + c.composite + c.eager_only
    );
    assert!(c.percentage() > 90.0);
    let report = d.metrics_report();
    for line in [
        "Counter: OperationCount",
        "Counter: RegisteredCaptures",
        "Counter: FallbackCaptures",
        "Counter: EagerFallbacks",
        "Counter: Materializations",
        "Counter: GraphCache",
        "Coverage: 100.00% of calls captured without an eager fallback",
        "Fallback-captured operators:\n  aten::clamp: 1",
    ] {
        assert!(report.contains(line), "{line} in\n{report}");
    }
    d.reset_stats();
    assert_eq!(d.stats().operation_count, 0);
}

#[test]
fn the_pending_graph_as_code_dot_and_json() {
    let d = own_device();
    let x = d.lz(&seq(&[2, 3]));
    d.sync().unwrap();
    let y = ops::relu(&ops::mm(&x, &ops::t(&x).unwrap()).unwrap()).unwrap();
    let g = d.pending_graph();
    let code = g.to_string();
    assert!(
        code.starts_with("def graph(arg0: \"f32[2, 3]\"):"),
        "{code}"
    );
    // The transposed operand: a functional tensor's value is `t_copy` (Note [Lazy tensors are
    // functional]).
    assert!(
        code.contains("t_copy: \"f32[3, 2]\" = aten.t_copy.default(arg0)"),
        "{code}"
    );
    assert!(
        code.contains("mm: \"f32[2, 2]\" = aten.mm.default(arg0, t_copy)"),
        "{code}"
    );
    assert!(code.ends_with("return (relu,)\n"), "{code}");
    let j = g.to_json();
    assert_eq!(j["nodes"].as_array().unwrap().len(), 3);
    assert_eq!(j["nodes"][2]["op"], "aten::relu");
    assert_eq!(
        j["nodes"][2]["outputs"][0]["device"],
        d.device().to_string()
    );
    assert!(g.to_dot().contains("aten::mm"));
    assert_eq!(values(&y), [14.0, 32.0, 32.0, 77.0]);
    assert_eq!(d.pending_graph().len(), 0);
}

/// Training an MLP on lazy tensors gives eager's numbers, with backward captured.
#[test]
fn autograd_runs_above_the_lazy_backend() {
    let d = own_device();
    let run = |device: Device| -> (Vec<f64>, Vec<f32>) {
        let mut model = mlp(&[8, 16, 4], 0).unwrap();
        let gen = Generator::new(3);
        let x = ops::empty_with(
            &[6, 8],
            ops::EmptyOptions::default().dtype(ScalarType::Float),
        )
        .unwrap();
        ops::uniform_with_(&x, ops::UniformInplaceOptions::default().generator(&gen)).unwrap();
        let y =
            ops::empty_with(&[6], ops::EmptyOptions::default().dtype(ScalarType::Long)).unwrap();
        ops::random_with_(
            &y,
            0,
            Some(4),
            ops::RandomInplaceOptions::default().generator(&gen),
        )
        .unwrap();
        model.to_device(device).unwrap();
        let (x, y) = (to(&x, device), to(&y, device));
        let mut opt = Sgd::new(model.parameters(), 0.1)
            .momentum(0.9)
            .weight_decay(1e-3);
        let mut losses = vec![];
        for i in 0..4 {
            let loss = ops::cross_entropy_loss(&model.forward(&x).unwrap(), &y).unwrap();
            opt.zero_grad();
            let ((), cpu_calls) = cpu_kernel_calls(|| loss.backward().unwrap());
            if device == d.device() && i == 0 {
                let g = model.parameters()[0].grad().unwrap();
                assert_eq!(g.device(), d.device(), "gradients are lazy tensors");
                assert_eq!(cpu_calls, 0, "backward was captured, not run");
                assert!(d.pending_calls() > 20, "backward was captured");
            }
            opt.step().unwrap();
            losses.push(loss.item().unwrap().to_f64());
        }
        (losses, values(&model.parameters()[0]))
    };
    let (cpu, lazy) = (run(Device::CPU), run(d.device()));
    // The functional program multiplies dense copies where eager multiplies transposed views
    // (`t_copy` then `mm`): the same numbers up to the last bit of rounding.
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * b.abs().max(1e-3);
    let pairs = cpu.0.iter().zip(&lazy.0).map(|(a, b)| (*a, *b));
    let weights = cpu
        .1
        .iter()
        .zip(&lazy.1)
        .map(|(a, b)| (*a as f64, *b as f64));
    assert!(
        pairs.chain(weights).all(|(a, b)| close(a, b)),
        "{cpu:?}\n{lazy:?}"
    );
    assert_eq!((cpu.0.len(), cpu.1.len()), (lazy.0.len(), lazy.1.len()));
}

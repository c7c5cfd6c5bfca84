//! Genie's dispatcher API on the lazy backend, as its seed gives it: selective interception
//! (composite operators included), `get_stats`' fields, run-time registration, the lazy mode
//! log line, per-operator performance figures.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;
use switchboard_autograd::{AutogradTensor, InferenceMode};
use switchboard_dispatcher::{Dispatcher, IValue};
use switchboard_graph::{Graph, Output, TensorMeta};
use switchboard_lazy::{self as lazy, LazyBackend};
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

fn eager_calls(d: &LazyBackend, op: &str) -> u64 {
    *d.stats().eager_fallback_ops.get(op).unwrap_or(&0)
}

fn close(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= 1e-5 * (1.0 + y.abs()))
}

#[test]
fn an_allow_list_captures_only_its_operators() {
    let d = own_device();
    let a = seq(&[2, 2]);
    let la = d.lz(&a);
    d.sync().unwrap();
    d.enable_ops(&["mm"]).unwrap();
    assert_eq!(d.enabled_ops().unwrap(), ["aten::mm"]);
    let before = d.stats();
    let m = ops::mm(&la, &la).unwrap();
    assert_eq!(d.pending_calls(), 1, "mm is captured");
    let r = ops::relu(&m).unwrap();
    let after = d.stats();
    assert_eq!(
        after.eager_fallback_ops.get("aten::relu"),
        Some(&(before.eager_fallback_ops.get("aten::relu").unwrap_or(&0) + 1)),
        "relu is not on the list: the default path"
    );
    assert_eq!(after.registered_captures, before.registered_captures + 1);
    assert_eq!(r.device(), d.device());
    assert_eq!(
        values(&r),
        values(&ops::relu(&ops::mm(&a, &a).unwrap()).unwrap())
    );
    d.enable_all_ops();
    assert!(d.enabled_ops().is_none());
    ops::relu(&la).unwrap();
    assert_eq!(
        eager_calls(&d, "aten::relu"),
        after.eager_fallback_ops["aten::relu"]
    );
}

#[test]
fn disable_wins_over_enable_and_enable_all_ops_clears_both() {
    let d = own_device();
    let la = d.lz(&seq(&[3]));
    d.enable_ops(&["aten::neg", "exp"]).unwrap();
    d.disable_ops(&["exp"]).unwrap();
    let (neg0, exp0) = (eager_calls(&d, "aten::neg"), eager_calls(&d, "aten::exp"));
    ops::neg(&la).unwrap();
    ops::exp(&la).unwrap();
    assert_eq!(eager_calls(&d, "aten::neg"), neg0, "enabled: captured");
    assert_eq!(
        eager_calls(&d, "aten::exp"),
        exp0 + 1,
        "enabled and disabled: disabled"
    );
    assert_eq!(d.disabled_ops(), ["aten::exp"]);
    d.enable_all_ops();
    assert!(d.disabled_ops().is_empty() && d.enabled_ops().is_none());
    ops::exp(&la).unwrap();
    assert_eq!(
        eager_calls(&d, "aten::exp"),
        exp0 + 1,
        "cleared: captured again"
    );
}

#[test]
fn unknown_names_are_errors_naming_the_operator_and_change_nothing() {
    let d = own_device();
    for bad in ["no_such_op", "mm.no_such_overload", "", " mm", "aten::"] {
        let e = d.enable_ops(&["mm", bad]).unwrap_err().to_string();
        assert!(e.contains(&format!("unknown operator '{bad}'")), "{e}");
        let e = d.disable_ops(&[bad]).unwrap_err().to_string();
        assert!(e.contains("disable_ops: unknown operator"), "{e}");
    }
    assert!(
        d.enabled_ops().is_none(),
        "a failed call leaves the lists as they were"
    );
    d.enable_ops(&[]).unwrap();
    assert!(d.enabled_ops().is_none(), "an empty list is no allow-list");
    assert!(d.disabled_ops().is_empty());
    // Overload names and `.default`.
    d.disable_ops(&["add.Tensor", "aten::mm.default"]).unwrap();
    assert_eq!(d.disabled_ops(), ["aten::add.Tensor", "aten::mm"]);
}

/// `linear(x, w, b)` on a matrix input decomposes into `t` and `addmm`.
fn linear_inputs(d: &LazyBackend) -> (Tensor, Tensor, Tensor, Tensor) {
    let (x, w, b) = (seq(&[4, 3]), seq(&[2, 3]), seq(&[2]));
    let want = ops::linear_with(&x, &w, ops::LinearOptions::default().bias(&b)).unwrap();
    let to_d = |t: &Tensor| to(t, d.device());
    (to_d(&x), to_d(&w), to_d(&b), want)
}

#[test]
fn enabling_a_composite_operator_captures_its_decomposition() {
    let d = own_device();
    let (x, w, b, want) = linear_inputs(&d);
    d.sync().unwrap();
    let coverage = d.stats().static_coverage;
    d.enable_ops(&["linear", "mm"]).unwrap();
    // The interposed kernel is not a lazy kernel: the layers' counts do not change.
    assert_eq!(d.stats().static_coverage, coverage);
    assert_eq!(coverage.registered, lazy::REGISTERED_OPS.len());
    let before = d.stats();
    let y = ops::linear_with(&x, &w, ops::LinearOptions::default().bias(&b)).unwrap();
    let mid = d.stats();
    assert_eq!(
        mid.eager_fallback_count, before.eager_fallback_count,
        "nothing eager"
    );
    assert!(
        d.pending_calls() >= 2,
        "t and addmm captured: {}",
        d.pending_graph()
    );
    assert!(d.pending_graph().to_string().contains("aten.addmm.default"));
    // The same operators outside `linear` are not on the list.
    ops::addmm(&b, &x, &ops::t(&w).unwrap()).unwrap();
    assert_eq!(
        eager_calls(&d, "aten::addmm"),
        1 + before.eager_fallback_ops.get("aten::addmm").unwrap_or(&0)
    );
    assert_eq!(values(&y), values(&want));
    // `matmul` and `conv2d`, the seed's other examples.
    d.enable_ops(&["matmul", "conv2d"]).unwrap();
    let v = d.lz(&seq(&[3]));
    d.sync().unwrap();
    let mv = ops::matmul(&x, &v).unwrap();
    assert!(d.pending_calls() >= 1, "matmul's decomposition is captured");
    assert_eq!(
        values(&mv),
        values(&ops::matmul(&seq(&[4, 3]), &seq(&[3])).unwrap())
    );
    let (img, k) = (seq(&[1, 1, 4, 4]), seq(&[1, 1, 2, 2]));
    let conv_want = ops::conv2d(&img, &k).unwrap();
    let (limg, lk) = (d.lz(&img), d.lz(&k));
    d.sync().unwrap();
    let eager_before = d.stats().eager_fallback_count;
    let conv = ops::conv2d(&limg, &lk).unwrap();
    assert_eq!(d.stats().eager_fallback_count, eager_before);
    assert!(d.pending_graph().to_string().contains("convolution"));
    assert_eq!(values(&conv), values(&conv_want));
}

#[test]
fn disabling_a_composite_operator_runs_its_decomposition_eagerly() {
    let d = own_device();
    let (x, w, b, want) = linear_inputs(&d);
    d.disable_ops(&["aten::linear"]).unwrap();
    let addmm0 = eager_calls(&d, "aten::addmm");
    let y = ops::linear_with(&x, &w, ops::LinearOptions::default().bias(&b)).unwrap();
    assert_eq!(
        eager_calls(&d, "aten::addmm"),
        addmm0 + 1,
        "inside linear: eager"
    );
    assert_eq!(d.pending_calls(), 0);
    assert_eq!(y.device(), d.device());
    assert_eq!(values(&y), values(&want));
    // Outside `linear`, addmm is captured.
    let z = ops::addmm(&b, &x, &ops::t(&w).unwrap()).unwrap();
    assert_eq!(eager_calls(&d, "aten::addmm"), addmm0 + 1);
    assert!(d.pending_calls() >= 1);
    assert_eq!(values(&z), values(&want));
}

#[test]
fn a_disabled_composite_keeps_its_gradients_and_holds_in_inference_mode() {
    let d = own_device();
    let (x, w, b, want) = linear_inputs(&d);
    let w = w.requires_grad_(true).unwrap();
    d.disable_ops(&["linear"]).unwrap();
    let addmm0 = eager_calls(&d, "aten::addmm");
    let loss = ops::sum(&ops::linear_with(&x, &w, ops::LinearOptions::default().bias(&b)).unwrap())
        .unwrap();
    loss.backward().unwrap();
    assert_eq!(eager_calls(&d, "aten::addmm"), addmm0 + 1);
    let g = w.grad().unwrap();
    // d(sum(x w^T + b))/dw = column sums of x, per output row.
    let x_cpu = seq(&[4, 3]);
    let col = ops::sum_dim_int_list(&x_cpu, Some(&[0])).unwrap();
    assert_eq!(values(&g), [values(&col), values(&col)].concat());
    assert_eq!(values(&loss)[0], values(&want).iter().sum::<f32>());
    // Inference mode skips the Autograd keys: the filter still applies.
    let _inference = InferenceMode::new();
    let y = ops::linear_with(&x, &w, ops::LinearOptions::default().bias(&b)).unwrap();
    assert_eq!(eager_calls(&d, "aten::addmm"), addmm0 + 2);
    assert_eq!(values(&y), values(&want));
}

#[test]
fn get_stats_has_the_seeds_fields() {
    let d = own_device();
    d.reset_stats();
    let s = d.stats();
    assert_eq!(s.registered_ops, lazy::REGISTERED_OPS.len());
    assert_eq!(s.successful_registrations, s.registered_ops);
    assert_eq!((s.failed_registrations, s.coverage_percentage), (0, 100.0));
    let x = d.lz(&seq(&[2, 2]));
    let _ = ops::clamp_with(&x, ops::ClampOptions::default().max(2)).unwrap();
    let _ = ops::clamp_with(&x, ops::ClampOptions::default().min(2)).unwrap();
    assert!(d.register_op("aten::no_such_op", |_, _| Ok(())).is_err());
    let s = d.stats();
    assert_eq!(s.failed_registrations, 1);
    let n = s.successful_registrations as f64;
    assert_eq!(s.coverage_percentage, n / (n + 1.0) * 100.0);
    assert!(s.registration_failures["aten::no_such_op"].contains("unknown operator"));
    assert_eq!(s.fallback_capture_count, 2);
    let j = s.to_json();
    let mut keys: Vec<&String> = j.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "coverage_percentage",
            "failed_registrations",
            "fallback_capture_count",
            "fallback_ops",
            "lazy_mode",
            "operation_count",
            "registered_ops",
            "successful_registrations"
        ]
    );
    assert_eq!(
        j["fallback_ops"], 2,
        "clamp, and the failed registration (as Genie counts)"
    );
    assert_eq!(j["fallback_capture_count"], 2);
    assert_eq!(j["failed_registrations"], 1);
    assert_eq!(j["operation_count"], s.operation_count);
    assert_eq!(j["lazy_mode"], true);
    assert_eq!(j["coverage_percentage"], s.coverage_percentage);
    assert!(d.metrics_report().contains(&format!(
        "Registrations: {} successful, 1 failed",
        s.successful_registrations
    )));
    assert_eq!(lazy::registration_coverage(0, 0), 0.0);
    assert_eq!(lazy::registration_coverage(45, 5), 90.0);
}

#[test]
fn a_registered_implementation_runs_on_the_default_path_and_capture_stays() {
    let d = own_device();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    // clamp, as its CPU kernel computes it, plus 100.
    d.register_op("clamp", move |op, stack| {
        seen.fetch_add(1, Ordering::Relaxed);
        assert!(
            stack.iter().all(|v| v.tensors().all(|t| t.is_cpu())),
            "CPU arguments"
        );
        op.redispatch_boxed(
            switchboard_dispatcher::DispatchKeySet::from_key(
                switchboard_dispatcher::DispatchKey::CPU,
            ),
            stack,
        )?;
        let IValue::Tensor(t) = &stack[0] else {
            unreachable!()
        };
        stack[0] = IValue::Tensor(ops::add_scalar(t, 100)?);
        Ok(())
    })
    .unwrap();
    assert!(d.is_operation_registered("aten::clamp"));
    assert!(d.is_operation_registered("clamp.default"));
    let x = d.lz(&seq(&[3]));
    let clamp = |x: &Tensor| ops::clamp_with(x, ops::ClampOptions::default().max(2)).unwrap();
    // Lazy mode on: captured, as a registered capture (not a fallback one).
    let before = d.stats();
    let captured = clamp(&x);
    let after = d.stats();
    assert_eq!(after.registered_captures, before.registered_captures + 1);
    assert_eq!(after.fallback_capture_count, before.fallback_capture_count);
    assert_eq!(values(&captured), [1.0, 2.0, 2.0]);
    assert_eq!(
        calls.load(Ordering::Relaxed),
        0,
        "the executor runs the node"
    );
    // Lazy mode off: the implementation, at once.
    let eager = {
        let _off = lazy::LazyModeGuard::new(false);
        clamp(&x)
    };
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    assert_eq!(eager.device(), d.device());
    assert_eq!(values(&eager), [101.0, 102.0, 102.0]);
    // Disabled: the default path is the implementation too.
    d.disable_ops(&["clamp"]).unwrap();
    assert_eq!(values(&clamp(&x)), [101.0, 102.0, 102.0]);
    d.enable_all_ops();
    assert_eq!(calls.load(Ordering::Relaxed), 2);
    // An implementation leaving the wrong results is an error naming the operator.
    d.register_op("aten::neg", |_, stack| {
        stack.clear();
        Ok(())
    })
    .unwrap();
    let _off = lazy::LazyModeGuard::new(false);
    let e = ops::neg(&x).unwrap_err().to_string();
    assert!(
        e.contains("implementation registered for aten::neg left []"),
        "{e}"
    );
}

#[test]
fn is_operation_registered_knows_built_in_and_run_time_operators() {
    let d = own_device();
    assert!(d.is_operation_registered("mm"));
    assert!(d.is_operation_registered("aten::add"));
    assert!(d.is_operation_registered("aten::add.Tensor"));
    assert!(!d.is_operation_registered("aten::clamp"));
    assert!(!d.is_operation_registered("no_such_op"));
    d.register_op("aten::clamp.Tensor", |_, _| Ok(())).unwrap();
    assert!(d.is_operation_registered("clamp.Tensor"));
    assert!(d.is_operation_registered("clamp"), "an overload of it is");
    assert!(!d.is_operation_registered("clamp.default"));
    assert!(!own_device().is_operation_registered("clamp"), "per device");
}

#[test]
fn register_ops_from_trace_registers_what_a_trace_calls() {
    let d = own_device();
    let x = d.lz(&seq(&[2, 2]));
    d.sync().unwrap();
    let y = ops::clamp_with(
        &ops::mm(&x, &x).unwrap(),
        ops::ClampOptions::default().max(3),
    )
    .unwrap();
    let trace: Graph = d.pending_graph();
    assert!(!d.is_operation_registered("clamp"));
    assert_eq!(d.register_ops_from_trace(&trace), 2, "mm and clamp");
    assert!(d.is_operation_registered("aten::clamp"));
    let before = d.stats();
    let _ = ops::clamp_with(&y, ops::ClampOptions::default().max(3)).unwrap();
    let after = d.stats();
    assert_eq!(
        after.fallback_capture_count, before.fallback_capture_count,
        "now registered"
    );
    // An operator that cannot be captured is a failed registration.
    let t = seq(&[4]);
    let mut g = Graph::new();
    let input = g.add_input(TensorMeta::of(&t));
    let nonzero = Dispatcher::global()
        .find_schema_or_throw("aten::nonzero")
        .unwrap();
    g.add_call(
        nonzero,
        [switchboard_graph::Arg::Value(input)],
        [Output::ret(0, TensorMeta::of(&t))],
    )
    .unwrap();
    assert_eq!(d.register_ops_from_trace(&g), 0);
    let s = d.stats();
    assert!(s.registration_failures["aten::nonzero"].contains("cannot be captured"));
    assert!(!d.is_operation_registered("nonzero"));
}

#[test]
fn toggling_lazy_mode_logs_genies_line_and_eager_results_are_materialised() {
    let d = own_device();
    let a = seq(&[2, 2]);
    let x = d.lz(&a);
    d.sync().unwrap();
    let (was, lines) = lazy::capture_intercept_log(|| lazy::set_lazy_mode(false));
    assert!(was);
    assert_eq!(lines, ["[switchboard] Dispatcher lazy mode disabled"]);
    assert!(!d.stats().lazy_mode);
    assert_eq!(d.stats().to_json()["lazy_mode"], false);
    let syncs = d.stats().syncs;
    let y = ops::relu(&ops::mm(&x, &x).unwrap()).unwrap();
    assert_eq!(d.pending_calls(), 0, "executed at once");
    assert_eq!(y.device(), d.device(), "a tensor of the device");
    assert!(lazy::is_lazy(&y));
    assert_eq!(
        values(&y),
        values(&ops::relu(&ops::mm(&a, &a).unwrap()).unwrap())
    );
    assert_eq!(
        d.stats().syncs,
        syncs,
        "its data is there: reading it runs no graph"
    );
    let (_, lines) = lazy::capture_intercept_log(|| lazy::set_lazy_mode(true));
    assert_eq!(lines, ["[switchboard] Dispatcher lazy mode enabled"]);
    // A guard sets the mode for a scope without a line.
    let (_, lines) = lazy::capture_intercept_log(|| drop(lazy::LazyModeGuard::new(false)));
    assert!(lines.is_empty());
    assert!(lazy::lazy_mode());
}

#[test]
fn performance_stats_include_time_recorded_elsewhere() {
    let d = own_device();
    let x = d.lz(&seq(&[4, 4]));
    d.set_profiling(true);
    for _ in 0..3 {
        let _ = ops::mm(&x, &x).unwrap();
    }
    d.set_profiling(false);
    let captured = d.profile()["aten::mm"].clone();
    assert_eq!(captured.count, 3);
    // A worker ran the three calls in 3 ms.
    d.record_execution_time("aten::mm", 3, 3_000_000).unwrap();
    let p = d.profile()["aten::mm"].clone();
    assert_eq!(p.count, 3, "a captured and executed call is one call");
    assert!(close(
        &[p.avg_overhead_ns as f32],
        &[(captured.avg_overhead_ns + 1_000_000.0) as f32]
    ));
    // Executions alone (profiling was off while capturing), in the graph's spelling.
    d.record_execution_time("aten.relu.default", 2, 500)
        .unwrap();
    assert_eq!(
        d.profile()["aten::relu"],
        lazy::OpProfile {
            count: 2,
            avg_overhead_ns: 250.0
        }
    );
    let j = d.profile_json();
    assert_eq!(j["aten::relu"]["count"], 2);
    assert_eq!(j["aten::relu"]["avg_overhead_ns"], 250.0);
    // Huge figures saturate rather than wrap.
    d.record_execution_time("relu", u64::MAX, u64::MAX).unwrap();
    assert_eq!(d.profile()["aten::relu"].count, u64::MAX);
    // Errors name the operator.
    let e = d
        .record_execution_time("add", 1, 1)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("'add' names") && e.contains("aten::add.Tensor"),
        "{e}"
    );
    let e = d
        .record_execution_time("no_such_op", 1, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown operator 'no_such_op'"), "{e}");
    d.reset_stats();
    assert!(d.profile().is_empty());
}

#[test]
fn filters_apply_to_explicit_composites_too() {
    // `ones_like` is CompositeExplicitAutograd: its kernel runs at the Lazy key itself.
    let d = own_device();
    let x = d.lz(&seq(&[2, 2]));
    d.sync().unwrap();
    d.disable_ops(&["ones_like"]).unwrap();
    let before = d.stats().eager_fallback_count;
    let o = ops::ones_like(&x).unwrap();
    assert!(
        d.stats().eager_fallback_count > before,
        "its kernel's calls run eagerly"
    );
    assert_eq!(d.pending_calls(), 0);
    assert_eq!((o.device(), values(&o)), (d.device(), vec![1.0; 4]));
    let before = d.stats().eager_fallback_count;
    let z = ops::zeros_like(&x).unwrap();
    assert_eq!(
        d.stats().eager_fallback_count,
        before,
        "zeros_like is captured"
    );
    assert!(d.pending_calls() > 0);
    assert_eq!(values(&z), [0.0; 4]);
}

#[test]
fn an_implementation_of_a_composite_operator_runs_on_the_default_path() {
    // `softmax.int` (CompositeImplicitAutograd): no other test of this binary names it, so the
    // interposed kernel is this registration's.
    let softmax_op = Dispatcher::global()
        .find_schema("aten::softmax.int")
        .unwrap();
    let origin =
        Dispatcher::global().kernel_origin(&softmax_op, switchboard_dispatcher::DispatchKey::Lazy);
    assert_eq!(origin.provenance, switchboard_dispatcher::Provenance::Math);
    let d = own_device();
    let a = seq(&[2, 3]);
    let x = d.lz(&a);
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    d.register_op("softmax.int", move |op, stack| {
        seen.fetch_add(1, Ordering::Relaxed);
        op.redispatch_boxed(
            switchboard_dispatcher::DispatchKeySet::from_key(
                switchboard_dispatcher::DispatchKey::CPU,
            ),
            stack,
        )?;
        let IValue::Tensor(t) = &stack[0] else {
            unreachable!()
        };
        stack[0] = IValue::Tensor(ops::add_scalar(t, 1000)?);
        Ok(())
    })
    .unwrap();
    let softmax = |x: &Tensor| ops::softmax(x, 1).unwrap();
    let want = values(&softmax(&a));
    let plus_1000: Vec<f32> = want.iter().map(|v| v + 1000.0).collect();
    // Lazy mode on: the decomposition is captured.
    assert!(close(&values(&softmax(&x)), &want));
    assert_eq!(calls.load(Ordering::Relaxed), 0);
    {
        let _off = lazy::LazyModeGuard::new(false);
        let y = softmax(&x);
        assert_eq!(
            calls.load(Ordering::Relaxed),
            1,
            "lazy mode off: the implementation"
        );
        assert_eq!(y.device(), d.device());
        assert!(close(&values(&y), &plus_1000));
        // An input that requires grad: the decomposition, which autograd differentiates.
        let xg = x.detach().requires_grad_(true).unwrap();
        let y = softmax(&xg);
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        assert!(close(&values(&y), &want));
        ops::sum(&ops::mul(&y, &y).unwrap())
            .unwrap()
            .backward()
            .unwrap();
        let ac = a.detach().requires_grad_(true).unwrap();
        let yc = softmax(&ac);
        ops::sum(&ops::mul(&yc, &yc).unwrap())
            .unwrap()
            .backward()
            .unwrap();
        assert!(close(
            &values(&xg.grad().unwrap()),
            &values(&ac.grad().unwrap())
        ));
    }
    // Disabled, it takes the default path in lazy mode too.
    d.disable_ops(&["softmax"]).unwrap();
    assert!(close(&values(&softmax(&x)), &plus_1000));
    assert_eq!(calls.load(Ordering::Relaxed), 2);
}

#[test]
fn the_api_works_on_a_private_use_lazy_device_type() {
    let ty = lazy::install(
        switchboard_keys::BackendComponent::PrivateUse1Bit,
        "remote_accelerator",
    )
    .unwrap();
    let dev = switchboard_tensor::Device::with_index(ty, 1);
    let d = lazy::backend(dev).unwrap();
    let (x, w, b) = (seq(&[4, 3]), seq(&[2, 3]), seq(&[2]));
    let want = ops::linear_with(&x, &w, ops::LinearOptions::default().bias(&b)).unwrap();
    let (rx, rw, rb) = (to(&x, dev), to(&w, dev), to(&b, dev));
    d.sync().unwrap();
    // A composite operator filtered on this device type.
    d.disable_ops(&["linear"]).unwrap();
    let addmm0 = eager_calls(d, "aten::addmm");
    let y = ops::linear_with(&rx, &rw, ops::LinearOptions::default().bias(&rb)).unwrap();
    assert_eq!(eager_calls(d, "aten::addmm"), addmm0 + 1);
    assert_eq!(d.pending_calls(), 0);
    assert_eq!(y.device().to_string(), "remote_accelerator:1");
    assert_eq!(values(&y), values(&want));
    // An allow-list, a run-time implementation, lazy mode off.
    d.enable_ops(&["mm"]).unwrap();
    // The device sees `t` as `t_copy` (Note [Lazy tensors are functional]).
    let t_name = "aten::t_copy";
    let t0 = eager_calls(d, t_name);
    let m = ops::mm(&rx, &ops::t(&rw).unwrap()).unwrap();
    assert_eq!(eager_calls(d, t_name), t0 + 1, "t is not listed");
    assert!(
        d.pending_graph().to_string().contains("aten.mm.default"),
        "mm is captured"
    );
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    d.register_op("neg", move |op, stack| {
        seen.fetch_add(1, Ordering::Relaxed);
        op.redispatch_boxed(
            switchboard_dispatcher::DispatchKeySet::from_key(
                switchboard_dispatcher::DispatchKey::CPU,
            ),
            stack,
        )
    })
    .unwrap();
    let n = {
        let _off = lazy::LazyModeGuard::new(false);
        ops::neg(&m).unwrap()
    };
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    assert_eq!((n.device(), d.pending_calls()), (dev, 0));
    let mut neg_want = values(&ops::mm(&x, &ops::t(&w).unwrap()).unwrap());
    neg_want.iter_mut().for_each(|v| *v = -*v);
    assert_eq!(values(&n), neg_want);
    assert!(d.is_operation_registered("neg"));
    assert_eq!(
        d.stats().to_json()["registered_ops"],
        lazy::REGISTERED_OPS.len()
    );
    d.record_execution_time("mm", 1, 10).unwrap();
    assert_eq!(d.profile()["aten::mm"].count, 1);
    assert!(
        lazy::default_backend().enabled_ops().is_none(),
        "lazy:0 is not filtered"
    );
}

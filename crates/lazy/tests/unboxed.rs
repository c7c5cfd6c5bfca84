//! The typed kernels of the operators with a shape rule (Note [Unboxed capture]): a call whose
//! rule applies is captured from its typed arguments; every other call (typed or boxed, the
//! rule not applying, lazy mode off, the operator disabled, the log or the profile on) takes
//! the general path, with the same values and counts.

mod common;

use common::{f32s, own_device, values, OwnDevice};
use switchboard_dispatcher::{Dispatcher, IValue, Stack};
use switchboard_lazy as lazy;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

fn add_alpha(a: &Tensor, b: &Tensor) -> Tensor {
    ops::add_with(a, b, ops::AddOptions::default().alpha(2)).unwrap()
}

fn inputs() -> (Tensor, Tensor) {
    (
        f32s(&[1.0, -2.0, 3.0, -4.0], &[2, 2]),
        f32s(&[0.5, 0.25, 2.0, 1.0], &[2, 2]),
    )
}

/// The pending graph's last call: its operator, arguments and outputs, with the value it
/// produced renamed, so that two captures of the same call compare equal.
fn last_call(d: &OwnDevice) -> String {
    let g = d.pending_graph();
    let node = g
        .nodes()
        .filter(|n| n.op().is_some())
        .last()
        .expect("a call was captured");
    format!(
        "{} {:?} {:?}",
        node.op().unwrap().name(),
        node.args(),
        node.outputs()
    )
}

#[test]
fn typed_and_boxed_calls_capture_the_same_node() {
    let d = own_device();
    let (x, y) = inputs();
    let eager = values(&add_alpha(&x, &y));
    let (lx, ly) = (d.lz(&x), d.lz(&y));
    d.sync().unwrap();

    let before = d.stats();
    let typed = add_alpha(&lx, &ly);
    let mid = d.stats();
    // The typed kernel's fast path captured it.
    assert_eq!(mid.unboxed_captures, before.unboxed_captures + 1);
    assert_eq!(mid.registered_captures, before.registered_captures + 1);
    assert_eq!(mid.operation_count, before.operation_count + 1);
    assert_eq!(mid.nodes_captured, before.nodes_captured + 1);
    let typed_node = last_call(&d);

    // The boxed call reaches the typed kernel through the dispatcher's unboxing.
    let add = Dispatcher::global()
        .find_schema_or_throw("aten::add.Tensor")
        .unwrap();
    let mut stack: Stack = vec![
        IValue::Tensor(lx.clone()),
        IValue::Tensor(ly.clone()),
        IValue::Int(2),
    ];
    add.call_boxed(&mut stack).unwrap();
    let Some(IValue::Tensor(boxed)) = stack.pop() else {
        panic!("add returned {stack:?}")
    };
    let after = d.stats();
    assert_eq!(after.unboxed_captures, mid.unboxed_captures + 1);
    assert_eq!(after.registered_captures, mid.registered_captures + 1);
    assert_eq!(after.nodes_captured, mid.nodes_captured + 1);
    // The same node: operator, operands (the same graph values), alpha, output metadata.
    assert_eq!(last_call(&d), typed_node);
    assert!(typed_node.starts_with("aten::add.Tensor"), "{typed_node}");
    assert!(typed_node.contains("Const(IValue(2))"), "{typed_node}");
    assert_eq!(values(&typed), eager);
    assert_eq!(values(&boxed), eager);
}

#[test]
fn calls_the_rule_does_not_cover_take_the_general_path() {
    let d = own_device();
    let x = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let row = f32s(&[10.0, 20.0, 30.0], &[3]);
    let eager = values(&add_alpha(&x, &row));
    // Broadcasting: no rule; a transposed operand: no rule; a bool scalar: no rule.
    let (lx, lrow) = (d.lz(&x), d.lz(&row));
    d.sync().unwrap();
    let before = d.stats();
    let broadcast = add_alpha(&lx, &lrow);
    let t = ops::t(&lx).unwrap();
    let transposed = ops::mul_scalar(&t, true).unwrap();
    assert_eq!(broadcast.sizes(), &[2, 3]);
    assert_eq!(transposed.sizes(), &[3, 2]);
    let after = d.stats();
    // Captured by the dedicated kernels (`t` too: a functional tensor's value is `t_copy`,
    // Note [Lazy tensors are functional]), none by the typed fast path.
    assert_eq!(after.registered_captures, before.registered_captures + 3);
    assert_eq!(after.fallback_capture_count, before.fallback_capture_count);
    assert_eq!(after.unboxed_captures, before.unboxed_captures);
    // The same call that the rule covers takes the fast path.
    let ruled = add_alpha(&lx, &lx);
    assert_eq!(d.stats().unboxed_captures, after.unboxed_captures + 1);
    assert_eq!(values(&broadcast), eager);
    assert_eq!(values(&transposed), values(&ops::t(&x).unwrap()));
    assert_eq!(values(&ruled), values(&add_alpha(&x, &x)));
    // A CPU operand: the general path's device error, as eager's.
    let err = ops::add(&lx, &x).unwrap_err().to_string();
    assert!(
        err.contains("Expected all tensors to be on the same device"),
        "{err}"
    );
}

#[test]
fn observed_calls_are_logged_profiled_and_filtered() {
    let d = own_device();
    let (x, y) = inputs();
    let eager = values(&add_alpha(&x, &y));
    let (lx, ly) = (d.lz(&x), d.lz(&y));
    d.sync().unwrap();

    // The intercept log sees the call.
    let (logged, lines) = lazy::capture_intercept_log(|| add_alpha(&lx, &ly));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("Intercepted aten::add.Tensor"),
        "{}",
        lines[0]
    );
    assert_eq!(values(&logged), eager);

    // The profile counts it.
    d.reset_stats();
    let was = d.set_profiling(true);
    let profiled = add_alpha(&lx, &ly);
    d.set_profiling(was);
    assert_eq!(d.profile()["aten::add.Tensor"].count, 1);
    assert_eq!(values(&profiled), eager);

    // Disabled, it runs eagerly.
    d.disable_ops(&["aten::add.Tensor"]).unwrap();
    let before = d.stats();
    let disabled = add_alpha(&lx, &ly);
    let after = d.stats();
    d.enable_all_ops();
    assert_eq!(after.eager_fallback_count, before.eager_fallback_count + 1);
    assert_eq!(after.registered_captures, before.registered_captures);
    assert_eq!(values(&disabled), eager);

    // Lazy mode off: run at once.
    let before = d.stats();
    let eager_mode = {
        let _off = lazy::LazyModeGuard::new(false);
        add_alpha(&lx, &ly)
    };
    let after = d.stats();
    assert_eq!(after.eager_mode_calls, before.eager_mode_calls + 1);
    assert_eq!(values(&eager_mode), eager);
}

//! Dispatch modes: entering through the Python keys, popped while running, nesting,
//! re-entrant calls, typed and boxed callers, composition with autograd and autocast.

use std::cell::RefCell;
use std::rc::Rc;

use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_dispatcher::{
    push, tls_is_dispatch_key_excluded, tls_is_dispatch_key_included, DispatchKey, DispatchKeySet,
    Dispatcher, IValue, OperatorHandle, Result, Stack,
};
use switchboard_modes::{
    mode_stack_len, push_mode, with_mode, DispatchMode, LoggingMode, RestoreDispatchSnapshot,
};
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{ScalarType, Tensor};

/// Records the names it sees under a label, then runs the call.
struct Named {
    label: &'static str,
    seen: Rc<RefCell<Vec<String>>>,
}

impl DispatchMode for Named {
    fn dispatch(
        &self,
        op: &OperatorHandle,
        _keys: DispatchKeySet,
        stack: &mut Stack,
    ) -> Result<()> {
        self.seen
            .borrow_mut()
            .push(format!("{}:{}", self.label, op.name()));
        op.call_boxed(stack)
    }
}

#[test]
fn python_keys_are_included_while_a_mode_is_pushed() {
    assert_eq!(mode_stack_len(), 0);
    assert!(!tls_is_dispatch_key_included(DispatchKey::Python));
    let log = Rc::new(LoggingMode::new());
    {
        let _m = push_mode(log.clone());
        assert_eq!(mode_stack_len(), 1);
        assert!(tls_is_dispatch_key_included(DispatchKey::Python));
        assert!(tls_is_dispatch_key_included(DispatchKey::PythonTLSSnapshot));
    }
    assert_eq!(mode_stack_len(), 0);
    assert!(!tls_is_dispatch_key_included(DispatchKey::Python));
    assert!(!tls_is_dispatch_key_included(
        DispatchKey::PythonTLSSnapshot
    ));
    let d = Dispatcher::global();
    assert!(d.has_backend_fallback_for_dispatch_key(DispatchKey::Python));
    assert!(d.has_backend_fallback_for_dispatch_key(DispatchKey::PythonTLSSnapshot));
}

#[test]
fn the_mode_runs_popped_below_the_layers_above_python() -> Result<()> {
    let x = ops::ones(&[2])?;
    let state = Rc::new(RefCell::new(None));
    let s = state.clone();
    let probe = move |op: &OperatorHandle, _keys: DispatchKeySet, stack: &mut Stack| {
        *s.borrow_mut() = Some((
            mode_stack_len(),
            tls_is_dispatch_key_included(DispatchKey::Python),
            tls_is_dispatch_key_excluded(DispatchKey::AutogradFunctionality),
            tls_is_dispatch_key_excluded(DispatchKey::ADInplaceOrView),
            tls_is_dispatch_key_excluded(DispatchKey::AutocastCPU),
            tls_is_dispatch_key_excluded(DispatchKey::PythonTLSSnapshot),
            tls_is_dispatch_key_excluded(DispatchKey::Python),
            tls_is_dispatch_key_excluded(DispatchKey::BackendSelect),
        ));
        op.call_boxed(stack)
    };
    with_mode(Rc::new(probe), || ops::neg(&x))?;
    // As PyTorch shows inside __torch_dispatch__: the stack is empty, Python not included,
    // every key above Python excluded, Python and the keys below it not.
    assert_eq!(
        state.borrow().unwrap(),
        (0, false, true, true, true, true, false, false)
    );
    assert_eq!(mode_stack_len(), 0);
    Ok(())
}

#[test]
fn logging_mode_logs_typed_and_boxed_calls() -> Result<()> {
    let log = Rc::new(LoggingMode::new());
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    let i = Tensor::from_vec(vec![1i64, 0], &[2])?;
    let (sum, picked) = with_mode(log.clone(), || -> Result<_> {
        let sum = ops::sum_dim_int_list_with(
            &a,
            Some(&[1]),
            ops::SumDimIntListOptions::default().keepdim(true),
        )?;
        // A boxed call.
        let op = Dispatcher::global().find_schema_or_throw("aten::index_select")?;
        let mut stack = Vec::new();
        push(&mut stack, (&a, 0i64, &i));
        op.call_boxed(&mut stack)?;
        let picked = stack.pop().and_then(|v| v.as_tensor().cloned()).unwrap();
        Ok((sum, picked))
    })?;
    assert_eq!(sum.to_vec::<f32>()?, [6.0, 15.0]);
    assert_eq!(picked.to_vec::<f32>()?, [4.0, 5.0, 6.0, 1.0, 2.0, 3.0]);
    assert_eq!(
        log.lines(),
        [
            "aten::sum.dim_IntList(f32[2, 3], [1], True, None) -> f32[2, 1]",
            "aten::index_select(f32[2, 3], 0, i64[2]) -> f32[2, 3]",
        ]
    );
    Ok(())
}

#[test]
fn nested_modes_see_calls_outermost_last_pushed_first() -> Result<()> {
    let seen = Rc::new(RefCell::new(Vec::new()));
    let x = ops::ones(&[2])?;
    let inner = Rc::new(Named {
        label: "inner",
        seen: seen.clone(),
    });
    let outer = Rc::new(Named {
        label: "outer",
        seen: seen.clone(),
    });
    {
        let _i = push_mode(inner);
        let _o = push_mode(outer);
        assert_eq!(mode_stack_len(), 2);
        ops::neg(&x)?;
    }
    assert_eq!(*seen.borrow(), ["outer:aten::neg", "inner:aten::neg"]);
    Ok(())
}

/// A mode that calls operators itself: its own calls go to the modes below it (and never
/// back to itself), so a mode can build on the operators it intercepts.
#[test]
fn reentrant_calls_go_below_the_running_mode() -> Result<()> {
    let log = Rc::new(LoggingMode::new());
    let doubling = |op: &OperatorHandle, _keys: DispatchKeySet, stack: &mut Stack| {
        let is_neg = op.name().name() == "aten::neg";
        op.call_boxed(stack)?;
        if is_neg {
            let out = stack.pop().and_then(|v| v.as_tensor().cloned()).unwrap();
            let doubled = ops::add(&out, &out)?; // an operator call inside the mode
            stack.push(IValue::Tensor(doubled));
        }
        Ok(())
    };
    let x = Tensor::from_vec(vec![1.0f32, -2.0], &[2])?;
    let y = {
        let _log = push_mode(log.clone());
        let _doubling = push_mode(Rc::new(doubling));
        ops::neg(&x)?
    };
    assert_eq!(y.to_vec::<f32>()?, [-2.0, 4.0]);
    assert_eq!(
        log.lines(),
        [
            "aten::neg(f32[2]) -> f32[2]",
            "aten::add.Tensor(f32[2], f32[2], 1) -> f32[2]"
        ]
    );
    Ok(())
}

#[test]
fn a_mode_may_replace_the_call() -> Result<()> {
    let zeros = |op: &OperatorHandle, _keys: DispatchKeySet, stack: &mut Stack| {
        let n = op.schema().unwrap().schema.arguments().len();
        let x = stack[stack.len() - n].as_tensor().unwrap().clone();
        stack.truncate(stack.len() - n);
        stack.push(IValue::Tensor(ops::zeros_like(&x)?));
        Ok(())
    };
    let x = ops::ones(&[3])?;
    let y = with_mode(Rc::new(zeros), || x.exp())?;
    assert_eq!(y.to_vec::<f32>()?, [0.0; 3]);
    Ok(())
}

/// Modes sit below autograd: the forward is recorded above the mode, and backward's
/// operators reach the mode too when backward runs inside it.
#[test]
fn modes_compose_with_autograd() -> Result<()> {
    let log = Rc::new(LoggingMode::new());
    let w = ops::ones(&[3, 2])?.requires_grad_(true)?;
    let x = ops::ones(&[4, 3])?;
    with_mode(log.clone(), || -> Result<()> {
        let y = ops::mm(&x, &w)?;
        assert!(y.grad_fn().is_some());
        y.sum()?.backward()?;
        Ok(())
    })?;
    assert_eq!(w.grad().unwrap().to_vec::<f32>()?, [4.0; 6]);
    let lines = log.lines();
    assert_eq!(lines[0], "aten::mm(f32[4, 3], f32[3, 2]) -> f32[4, 2]");
    // The backward's matrix product (x^T @ grad) is seen as well.
    assert!(
        lines[2..]
            .iter()
            .any(|l| l.starts_with("aten::mm(f32[3, 4], f32[4, 2])")),
        "{lines:#?}"
    );
    Ok(())
}

/// Modes sit below autocast: they see the casts and the lower-precision call.
#[test]
fn modes_compose_with_autocast() -> Result<()> {
    let log = Rc::new(LoggingMode::new());
    let (a, b) = (ops::ones(&[2, 3])?, ops::ones(&[3, 4])?);
    let c = with_mode(log.clone(), || {
        switchboard_autocast::autocast(
            switchboard_tensor::Device::CPU,
            ScalarType::BFloat16,
            || ops::mm(&a, &b),
        )
    })?;
    assert_eq!(c.dtype(), ScalarType::BFloat16);
    assert_eq!(
        log.lines(),
        [
            "aten::_to_copy(f32[2, 3], torch.bfloat16, None, None, None, False, None) -> bf16[2, 3]",
            "aten::_to_copy(f32[3, 4], torch.bfloat16, None, None, None, False, None) -> bf16[3, 4]",
            "aten::mm(bf16[2, 3], bf16[3, 4]) -> bf16[2, 4]",
        ]
    );
    Ok(())
}

/// `RestoreDispatchSnapshot` runs code inside a mode with the key sets of the call's entry:
/// autograd records again.
#[test]
fn restoring_the_snapshot_turns_the_upper_layers_on() -> Result<()> {
    let recorded = Rc::new(RefCell::new(None));
    let r = recorded.clone();
    let w = ops::ones(&[2])?.requires_grad_(true)?;
    let wc = w.clone();
    let probe = move |op: &OperatorHandle, _keys: DispatchKeySet, stack: &mut Stack| {
        let plain = ops::mul(&wc, &wc)?;
        let snapshot = RestoreDispatchSnapshot::new().expect("inside a dispatch");
        let with_autograd = ops::mul(&wc, &wc)?;
        drop(snapshot);
        *r.borrow_mut() = Some((plain.grad_fn().is_some(), with_autograd.grad_fn().is_some()));
        op.call_boxed(stack)
    };
    with_mode(Rc::new(probe), || ops::neg(&w))?;
    assert_eq!(recorded.borrow().unwrap(), (false, true));
    assert!(RestoreDispatchSnapshot::new().is_none());
    Ok(())
}

#[test]
fn modes_are_per_thread() -> Result<()> {
    let log = Rc::new(LoggingMode::new());
    let _m = push_mode(log.clone());
    std::thread::spawn(|| {
        assert_eq!(mode_stack_len(), 0);
        ops::neg(&ops::ones(&[1]).unwrap()).unwrap();
    })
    .join()
    .unwrap();
    assert!(log.lines().is_empty());
    Ok(())
}

/// The operators a mode sees of `scaled_dot_product_attention` are the ones PyTorch 2.15's
/// `TorchDispatchMode` logs for the same calls on CPU: the fused kernel alone (the kernel
/// choice is no operator call there, nor here), with a boolean mask converted first and 3-d
/// inputs given a batch of one; and the math path op by op when dropout rules flash out.
#[test]
fn attention_shows_pytorchs_operators() -> Result<()> {
    let seen = |f: &dyn Fn() -> Result<Tensor>| -> Result<Vec<String>> {
        let names = Rc::new(RefCell::new(Vec::new()));
        let mode = Rc::new(Named {
            label: "",
            seen: names.clone(),
        });
        with_mode(mode, || f().map(drop))?;
        let names = names.take();
        Ok(names.iter().map(|n| n[1..].to_string()).collect())
    };
    let q = ops::ones(&[2, 4, 8, 16])?;
    let sdpa = |q: &Tensor, options: ops::ScaledDotProductAttentionOptions| {
        ops::scaled_dot_product_attention_with(q, q, q, options)
    };
    let causal = ops::ScaledDotProductAttentionOptions {
        is_causal: true,
        ..Default::default()
    };
    assert_eq!(
        seen(&|| sdpa(&q, causal))?,
        ["aten::_scaled_dot_product_flash_attention_for_cpu"]
    );
    let keep = ops::ones_with(
        &[8, 8],
        ops::OnesOptions {
            dtype: Some(ScalarType::Bool),
            ..Default::default()
        },
    )?;
    let masked = ops::ScaledDotProductAttentionOptions {
        attn_mask: Some(&keep),
        ..Default::default()
    };
    assert_eq!(
        seen(&|| sdpa(&q, masked))?,
        [
            "aten::scalar_tensor",
            "aten::scalar_tensor",
            "aten::where.self",
            "aten::_scaled_dot_product_flash_attention_for_cpu"
        ]
    );
    let q3 = ops::ones(&[4, 8, 16])?;
    assert_eq!(
        seen(&|| sdpa(&q3, Default::default()))?,
        [
            "aten::unsqueeze",
            "aten::unsqueeze",
            "aten::unsqueeze",
            "aten::_scaled_dot_product_flash_attention_for_cpu",
            "aten::squeeze.dim"
        ]
    );
    let dropout = ops::ScaledDotProductAttentionOptions {
        dropout_p: 0.5,
        ..Default::default()
    };
    let matmul = [
        "aten::expand",
        "aten::view",
        "aten::expand",
        "aten::view",
        "aten::bmm",
    ];
    let mut math = vec![
        "aten::mul.Scalar",
        "aten::transpose.int",
        "aten::mul.Scalar",
    ];
    math.extend(matmul);
    math.extend([
        "aten::_unsafe_view",
        "aten::_safe_softmax",
        "aten::empty_like",
        "aten::bernoulli_.float",
        "aten::div_.Scalar",
        "aten::mul.Tensor",
    ]);
    math.extend(matmul);
    math.push("aten::_unsafe_view");
    assert_eq!(seen(&|| sdpa(&q, dropout))?, math);
    Ok(())
}

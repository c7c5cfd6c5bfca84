//! A boxed fallback: one function that serves every operator at a key, here a logging mode on
//! a key nothing else uses. While the mode is on (the key is in the thread's included set),
//! every call reaches the fallback first, which logs the operator and its arguments and
//! redispatches to the keys below its own (autograd, then the backend).
//!
//! `cargo run --example custom_backend_fallback`; `cargo test` runs it too.

use std::sync::Mutex;

use switchboard::dispatcher::{Result, Stack};
use switchboard::prelude::*;

/// The key of the mode.
const LOGGING: DispatchKey = DispatchKey::TESTING_ONLY_GenericMode;

/// What the fallback saw, one line per call.
static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The fallback: logs the call, then redispatches below its key. `keys` is the call's key
/// set; masking it with the keys after `LOGGING` keeps those below, which is what
/// `redispatch` means.
fn log_and_redispatch(op: &OperatorHandle, keys: DispatchKeySet, stack: &mut Stack) -> Result<()> {
    let schema = op.schema().expect("operators called here have schemas");
    let args = &stack[stack.len() - schema.schema.arguments().len()..];
    let shown: Vec<String> = args.iter().map(IValue::to_string).collect();
    LOG.lock()
        .unwrap()
        .push(format!("{}({})", op.name(), shown.join(", ")));
    op.redispatch_boxed(keys & DispatchKeySet::full_after(LOGGING), stack)
}

fn main() -> Result<()> {
    let mut lib = Library::new(Dispatcher::global(), LibraryKind::Impl, "_", Some(LOGGING))?;
    lib.fallback(None, KernelFunction::from_boxed(log_and_redispatch))?;

    let x = ops::ones(&[2, 3])?.requires_grad_(true)?;
    let y = {
        let _mode = IncludeDispatchKeyGuard::new(LOGGING);
        ops::mul_scalar(&ops::relu(&x)?, 3)?.sum()?
    };
    // Outside the mode, nothing is logged; the results are the same as without the mode, and
    // autograd, below the mode, recorded the calls.
    y.backward()?;
    assert_eq!(y.item()?.to_f64(), 18.0);
    assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [3.; 6]);

    let log = LOG.lock().unwrap().clone();
    for line in &log {
        println!("{line}");
    }
    assert_eq!(
        log,
        [
            "aten::relu(Tensor([2, 3], torch.float32))",
            "aten::mul.Scalar(Tensor([2, 3], torch.float32), 3)",
            "aten::sum(Tensor([2, 3], torch.float32), None)",
        ]
    );
    // Dropping the library unregisters the fallback.
    drop(lib);
    assert!(!Dispatcher::global().has_backend_fallback_for_dispatch_key(LOGGING));
    Ok(())
}

#[test]
fn runs() {
    main().unwrap();
}

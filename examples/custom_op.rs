//! A custom operator end to end, as PyTorch's "Dispatcher in C++" tutorial builds `myops::myadd`:
//! one schema, a CPU kernel, a Meta kernel, an Autograd kernel made with the custom `Function`
//! API that redispatches below autograd, and calls through a typed handle and boxed.
//!
//! `cargo run --example custom_op`; `cargo test` runs it too.

use std::sync::OnceLock;

use switchboard::autograd::{apply, Function, FunctionCtx};
use switchboard::dispatcher::{library, push, Result, Stack};
use switchboard::prelude::*;

// 1. The schema: what every kernel of the operator agrees on (TORCH_LIBRARY).
library!(DEF myops, |lib| {
    lib.def("myadd(Tensor self, Tensor other) -> Tensor")?;
    Ok(())
});

fn check_same_sizes(a: &Tensor, b: &Tensor) -> Result<()> {
    if a.sizes() != b.sizes() {
        return Err(DispatchError::from(
            switchboard::tensor::TensorError::invalid(format!(
                "myadd: sizes {:?} and {:?} differ",
                a.sizes(),
                b.sizes()
            )),
        ));
    }
    Ok(())
}

// 2. The CPU kernel: computes.
fn myadd_cpu(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    check_same_sizes(a, b)?;
    let (x, y) = (a.to_vec::<f32>()?, b.to_vec::<f32>()?);
    let sum: Vec<f32> = x.iter().zip(&y).map(|(x, y)| x + y).collect();
    Ok(Tensor::from_vec(sum, a.sizes())?)
}

// 3. The Meta kernel: the same checks and output metadata, no data.
fn myadd_meta(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    check_same_sizes(a, b)?;
    Ok(Tensor::empty_on(a.sizes(), a.dtype(), Device::META)?)
}

library!(IMPL myops, CPU, |lib| {
    lib.impl_("myadd", None, KernelFunction::from_fn(myadd_cpu))?;
    Ok(())
});
library!(IMPL myops, Meta, |lib| {
    lib.impl_("myadd", None, KernelFunction::from_fn(myadd_meta))?;
    Ok(())
});

// 4. The dispatching function, the operator's public API: looks the operator up once.
fn myadd(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    type Handle = TypedOperatorHandle<(Tensor, Tensor), Tensor>;
    static OP: OnceLock<Handle> = OnceLock::new();
    let op = match OP.get() {
        Some(op) => op,
        None => {
            let found = Dispatcher::global()
                .find_schema_or_throw("myops::myadd")?
                .typed::<(Tensor, Tensor), Tensor>()?;
            OP.get_or_init(|| found)
        }
    };
    op.call((a, b))
}

// 5. The Autograd kernel: a custom Function whose forward redispatches below autograd (without
// the guard, `myadd` would come back here forever) and whose backward passes the gradient on.
struct MyAddFunction;

impl Function for MyAddFunction {
    fn forward(&self, _ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let _below_autograd = AutoDispatchBelowADInplaceOrView::new();
        Ok(vec![myadd(&inputs[0], &inputs[1])?])
    }

    fn backward(&self, _ctx: &FunctionCtx, grads: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(grads[0].clone()), Some(grads[0].clone())])
    }
}

fn myadd_autograd(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let mut outputs = apply(MyAddFunction, &[a.clone(), b.clone()])?;
    Ok(outputs.remove(0))
}

// The `Autograd` alias key covers every backend's autograd key (AutogradCPU, AutogradMeta...).
library!(IMPL myops, Autograd, |lib| {
    lib.impl_("myadd", None, KernelFunction::from_fn(myadd_autograd))?;
    Ok(())
});

fn main() -> Result<()> {
    let x = Tensor::from_vec(vec![1f32, 2., 3.], &[3])?.requires_grad_(true)?;
    let y = Tensor::from_vec(vec![10f32, 20., 30.], &[3])?;

    // Typed: Autograd -> CPU, recorded.
    let z = myadd(&x, &y)?;
    assert_eq!(z.to_vec::<f32>()?, [11., 22., 33.]);
    assert_eq!(
        z.grad_fn().map(|f| f.name().to_string()).as_deref(),
        Some("MyAddFunctionBackward")
    );
    z.sum()?.backward()?;
    assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [1., 1., 1.]);
    println!("myadd(x, y) = {z}; x.grad = {}", x.grad().unwrap());

    // Boxed: arguments on a stack, as an interpreter or the CLI's `call` would pass them.
    let op = Dispatcher::global().find_schema_or_throw("myops::myadd")?;
    let mut stack = Stack::new();
    push(&mut stack, (&y, &y));
    op.call_boxed(&mut stack)?;
    let IValue::Tensor(doubled) = &stack[0] else {
        unreachable!("myadd returns a tensor")
    };
    assert_eq!(doubled.to_vec::<f32>()?, [20., 40., 60.]);

    // Meta: shapes without data, and the same errors.
    let m = Tensor::empty_on(&[128, 64], ScalarType::Float, Device::META)?;
    let out = myadd(&m, &m)?;
    assert_eq!(
        (out.sizes(), out.device()),
        (&[128i64, 64][..], Device::META)
    );
    let err = myadd(
        &m,
        &Tensor::empty_on(&[2], ScalarType::Float, Device::META)?,
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "myadd: sizes [128, 64] and [2] differ");
    println!("on meta: {out}");
    Ok(())
}

#[test]
fn runs() {
    main().unwrap();
}

//! Operators whose output shape is read from the data (`nonzero` and its decompositions) run
//! eagerly on lazy tensors (their Meta kernels fail, as PyTorch's do), with the values and
//! layouts eager gives; `nonzero_static`, whose shape is an argument, is captured.

mod common;

use common::*;
use switchboard_dispatcher::{Dispatcher, KernelFunction, Tag};
use switchboard_ops as ops;
use switchboard_tensor::{Device, ScalarType, Tensor};

fn mixed() -> Tensor {
    f32s(&[0.0, 1.5, -0.0, f32::NAN, 0.0, -2.0], &[2, 3])
}

fn longs(t: &Tensor) -> Vec<i64> {
    t.to_vec::<i64>().unwrap()
}

#[test]
fn nonzero_takes_the_eager_fallback() {
    let d = own_device();
    let cpu = ops::nonzero(&ops::mul_scalar(&mixed(), 2).unwrap()).unwrap();
    // Its input is pending: the fallback runs the graph, then nonzero on CPU.
    let x = ops::mul_scalar(&d.lz(&mixed()), 2).unwrap();
    let before = d.stats();
    let nz = ops::nonzero(&x).unwrap();
    let after = d.stats();
    assert_eq!(nz.device(), d.device());
    assert_eq!(
        (nz.sizes(), nz.strides(), nz.dtype()),
        (cpu.sizes(), cpu.strides(), ScalarType::Long)
    );
    assert_eq!(longs(&nz), [0, 1, 1, 0, 1, 2]);
    assert_eq!(longs(&nz), longs(&cpu));
    assert_eq!(after.eager_fallback_count, before.eager_fallback_count + 1);
    let ops_run_eagerly = after.eager_fallback_ops;
    assert!(
        ops_run_eagerly.keys().any(|k| k.contains("nonzero")),
        "{ops_run_eagerly:?}"
    );
    // Its result is a lazy tensor later calls capture.
    let shifted = ops::add_scalar(&nz, 1).unwrap();
    assert_eq!(longs(&shifted), [1, 2, 2, 1, 2, 3]);
}

#[test]
fn decompositions_of_nonzero_run_eagerly_too() {
    let d = own_device();
    let x = d.lz(&mixed());
    assert_eq!(longs(&ops::argwhere(&x).unwrap()), [0, 1, 1, 0, 1, 2]);
    let columns = ops::where_default(&x).unwrap();
    assert_eq!(columns.len(), 2);
    assert_eq!(longs(&columns[0]), [0, 1, 1]);
    assert_eq!(longs(&columns[1]), [1, 0, 2]);
    assert!(columns.iter().all(|c| c.device() == d.device()));
    let out = d.lz(&Tensor::zeros(&[0], ScalarType::Long).unwrap());
    let written = ops::nonzero_out(&x, &out).unwrap();
    assert_eq!(longs(&written), [0, 1, 1, 0, 1, 2]);
}

#[test]
fn nonzero_static_is_captured() {
    let d = own_device();
    let cpu = ops::nonzero_static_with(
        &mixed(),
        5,
        ops::NonzeroStaticOptions::default().fill_value(-3),
    )
    .unwrap();
    let x = d.lz(&mixed());
    let before = d.stats();
    let s = ops::nonzero_static_with(&x, 5, ops::NonzeroStaticOptions::default().fill_value(-3))
        .unwrap();
    assert_eq!(d.stats().eager_fallback_count, before.eager_fallback_count);
    assert_eq!((s.sizes(), s.strides()), (cpu.sizes(), cpu.strides()));
    assert_eq!(longs(&s), [0, 1, 1, 0, 1, 2, -3, -3, -3, -3]);
    assert_eq!(to(&s, Device::CPU).device(), Device::CPU);
}

// The same kernel under three definitions: untagged (captured: its Meta kernel gives the
// shape), and tagged `dynamic_output_shape` or `data_dependent_output` (run eagerly, Note
// [Data-dependent operators run eagerly]).
fn plus_one(x: &Tensor) -> switchboard_dispatcher::Result<Tensor> {
    ops::add_scalar(x, 1)
}

switchboard_dispatcher::library!(DEF lazy_tag_test, |lib| {
    lib.def("plain(Tensor x) -> Tensor")?;
    lib.def_with_tags("shaped(Tensor x) -> Tensor", &[Tag::DynamicOutputShape])?;
    lib.def_with_tags("valued(Tensor x) -> Tensor", &[Tag::DataDependentOutput])?;
    Ok(())
});
switchboard_dispatcher::library!(IMPL lazy_tag_test, CPU, |lib| {
    for name in ["plain", "shaped", "valued"] {
        lib.impl_(name, None, KernelFunction::from_fn(plus_one))?;
    }
    Ok(())
});
switchboard_dispatcher::library!(IMPL lazy_tag_test, Meta, |lib| {
    for name in ["plain", "shaped", "valued"] {
        lib.impl_(name, None, KernelFunction::from_fn(plus_one))?;
    }
    Ok(())
});

#[test]
fn custom_operators_tagged_data_dependent_run_eagerly() {
    let d = own_device();
    let dispatcher = Dispatcher::global();
    for (name, eager) in [("plain", false), ("shaped", true), ("valued", true)] {
        let op = dispatcher
            .find_schema_or_throw(&format!("lazy_tag_test::{name}"))
            .unwrap()
            .typed::<(Tensor,), Tensor>()
            .unwrap();
        let x = d.lz(&mixed());
        let before = d.stats();
        let y = op.call((&x,)).unwrap();
        let after = d.stats();
        assert_eq!(
            after.eager_fallback_count - before.eager_fallback_count,
            u64::from(eager),
            "{name}"
        );
        assert_eq!(y.device(), d.device());
        let v = y.to_vec::<f32>().unwrap();
        assert_eq!(v[1], 2.5, "{name}");
    }
}

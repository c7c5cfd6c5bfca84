//! The shape rules of the hot operators (Note [Shape rules]) give exactly the metadata, or
//! the error, of the operators' Meta kernels, whether the rule applies to the call or the call
//! falls back to the Meta kernel.

mod common;

use common::{own_device, OwnDevice};
use switchboard_dispatcher::{Dispatcher, ExcludeDispatchKeyGuard, IValue, Stack};
use switchboard_keys::{DeviceType, DispatchKey};
use switchboard_lazy as lazy;
use switchboard_ops as ops;
use switchboard_tensor::{Device, ScalarType, Tensor};

/// Where an operand's elements are: sizes, strides, storage offset.
type Geometry = (&'static [i64], &'static [i64], i64);

const GEOMETRIES: &[Geometry] = &[
    (&[3, 4], &[4, 1], 0),       // a fresh tensor
    (&[3, 4], &[1, 3], 0),       // transposed
    (&[3, 4], &[4, 1], 2),       // offset: no lazy value has one, so not compared
    (&[2, 1, 3], &[3, 7, 1], 0), // contiguous, a size-1 dim with an odd stride
    (&[4], &[1], 0),             // broadcasts against [3, 4]
    (&[], &[], 0),               // zero-dim
    (&[0, 4], &[4, 1], 0),       // empty
    (&[3, 4], &[0, 1], 0),       // expanded
];

const DTYPES: &[ScalarType] = &[
    ScalarType::Float,
    ScalarType::Double,
    ScalarType::Half,
    ScalarType::BFloat16,
    ScalarType::Long,
    ScalarType::Bool,
];

/// A tensor of `dtype` on `device` with geometry `g`: on a lazy device a value (a plain lazy
/// tensor: the caller excludes `Functionalize`) made with that geometry, which it can only be
/// without an offset (Note [Lazy values]); on Meta a fresh tensor when `g` is its storage's
/// whole contiguous layout, else a view (`as_strided`) of a larger one.
fn operand(device: Device, dtype: ScalarType, g: Geometry) -> Option<Tensor> {
    let (sizes, strides, offset) = g;
    let opts = ops::EmptyOptions::default().dtype(dtype).device(device);
    let fresh = offset == 0 && strides == Tensor::zeros(sizes, dtype).unwrap().strides();
    if fresh {
        return Some(ops::empty_with(sizes, opts).unwrap());
    }
    if device.ty == DeviceType::Lazy {
        let opts = ops::EmptyStridedOptions::default()
            .dtype(dtype)
            .device(device);
        return (offset == 0).then(|| ops::empty_strided_with(sizes, strides, opts).unwrap());
    }
    let extent: i64 = offset
        + sizes
            .iter()
            .zip(strides)
            .map(|(s, st)| (s - 1).max(0) * st)
            .sum::<i64>()
        + 1;
    let base = ops::empty_with(&[extent + 3], opts).unwrap();
    ops::as_strided_with(
        &base,
        sizes,
        strides,
        ops::AsStridedOptions::default().storage_offset(offset),
    )
    .ok()
}

/// What a call gave: the metadata of its result, or its error.
fn outcome(op: &str, args: Vec<IValue>) -> Result<(Vec<i64>, Vec<i64>, i64, ScalarType), String> {
    let handle = Dispatcher::global().find_schema_or_throw(op).unwrap();
    let mut stack: Stack = args;
    handle.call_boxed(&mut stack).map_err(|e| e.to_string())?;
    match stack.first() {
        Some(IValue::Tensor(t)) => Ok((
            t.sizes().to_vec(),
            t.strides().to_vec(),
            t.storage_offset(),
            t.dtype(),
        )),
        other => Err(format!("unexpected return {other:?}")),
    }
}

/// The numbers each operator takes after its tensors, in schema order.
fn numbers(op: &str) -> Vec<Vec<IValue>> {
    let numbers = [IValue::Int(2), IValue::Double(0.5), IValue::Bool(true)];
    match op {
        "aten::add.Tensor" | "aten::sub.Tensor" | "aten::threshold_backward" => {
            numbers.iter().map(|n| vec![n.clone()]).collect()
        }
        "aten::add.Scalar" | "aten::sub.Scalar" => numbers
            .iter()
            .flat_map(|a| numbers.iter().map(move |b| vec![a.clone(), b.clone()]))
            .collect(),
        "aten::mul.Scalar" | "aten::div.Scalar" => {
            numbers.iter().map(|n| vec![n.clone()]).collect()
        }
        _ => vec![vec![]],
    }
}

fn binary(op: &str) -> bool {
    matches!(
        op,
        "aten::add.Tensor"
            | "aten::sub.Tensor"
            | "aten::mul.Tensor"
            | "aten::div.Tensor"
            | "aten::maximum"
            | "aten::minimum"
            | "aten::threshold_backward"
            | "aten::sigmoid_backward"
            | "aten::tanh_backward"
    )
}

/// Compares a lazy call with the same call on meta tensors.
/// Compares a lazy call on values with the same call on meta tensors: whether the call
/// succeeded, or `None` when no lazy value has the geometries.
fn check(
    d: &OwnDevice,
    op: &str,
    tensors: &[(ScalarType, Geometry)],
    numbers: &[IValue],
) -> Option<bool> {
    let args = |device: Device| -> Option<Vec<IValue>> {
        let ts = tensors
            .iter()
            .map(|(dtype, g)| operand(device, *dtype, *g).map(IValue::Tensor))
            .collect::<Option<Vec<_>>>()?;
        Some(ts.into_iter().chain(numbers.iter().cloned()).collect())
    };
    // The values below the functionalization layer (Note [Lazy tensors are functional]).
    let _values = ExcludeDispatchKeyGuard::new(DispatchKey::Functionalize);
    let on_lazy = outcome(op, args(d.device())?);
    let on_meta = outcome(op, args(Device::META)?);
    assert_eq!(on_lazy, on_meta, "{op} on {tensors:?} with {numbers:?}");
    Some(on_meta.is_ok())
}

#[test]
fn rules_agree_with_the_meta_kernels() {
    let d = own_device();
    // The rules compute the metadata of lazy values (`check` calls below the
    // functionalization layer).
    let mut ok = 0;
    let mut failed = 0;
    for op in lazy::operators_with_shape_rules() {
        for nums in numbers(op) {
            for &dtype in DTYPES {
                for &g in GEOMETRIES {
                    if binary(op) {
                        // The second operand: the same, another dtype, another geometry.
                        let others = [(dtype, g), (ScalarType::Double, g), (dtype, GEOMETRIES[0])];
                        for other in others {
                            match check(&d, op, &[(dtype, g), other], &nums) {
                                Some(true) => ok += 1,
                                Some(false) => failed += 1,
                                None => {}
                            }
                        }
                    } else {
                        match check(&d, op, &[(dtype, g)], &nums) {
                            Some(true) => ok += 1,
                            Some(false) => failed += 1,
                            None => {}
                        }
                    }
                }
            }
        }
        d.sync().unwrap();
    }
    // Both kinds of outcome were compared.
    assert!(ok > 1000 && failed > 100, "{ok} results, {failed} errors");
}

#[test]
fn a_rule_result_runs_like_eager() {
    let d = own_device();
    let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0, -4.0], &[2, 2]).unwrap();
    let y = Tensor::from_vec(vec![0.5f32, 0.25, 2.0, 1.0], &[2, 2]).unwrap();
    let to_lazy = |t: &Tensor| {
        ops::_to_copy_with(t, ops::ToCopyOptions::default().device(d.device())).unwrap()
    };
    let (lx, ly) = (to_lazy(&x), to_lazy(&y));
    let step = |a: &Tensor, b: &Tensor| {
        let s = ops::add_with(a, b, ops::AddOptions::default().alpha(2)).unwrap();
        let r = ops::relu(&ops::mul(&s, b).unwrap()).unwrap();
        ops::div_scalar(&ops::exp(&r).unwrap(), 3.0).unwrap()
    };
    let eager = step(&x, &y);
    let captured = step(&lx, &ly);
    assert_eq!(captured.sizes(), eager.sizes());
    assert_eq!(captured.strides(), eager.strides());
    assert_eq!(
        captured.to_vec::<f32>().unwrap(),
        eager.to_vec::<f32>().unwrap()
    );
}

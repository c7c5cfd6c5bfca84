//! The clamp family (`clamp`, `clamp_min`, `clamp_max`, Scalar and Tensor bounds, functional,
//! in-place and `out=`) against PyTorch 2.15 (values recorded from `torch` on the CPU, whose
//! C++ meta functions these are): output geometry with type promotion, broadcasting and
//! memory-format propagation, errors equal on Meta and CPU, the kernels' own errors (CPU only,
//! as in PyTorch), values with NaN, and Meta kernels that are meta functions.

mod common;

use common::{
    assert_errors_on_meta_and_cpu, assert_geometry_on_meta_and_cpu, DeviceCase, ErrorCase,
};

use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{Device, MemoryFormat, Scalar, ScalarType as S, Tensor};

use switchboard_cpu as _;
use switchboard_meta as _;

fn on(d: Device, sizes: &[i64], dtype: S) -> Tensor {
    Tensor::empty_on(sizes, dtype, d).unwrap()
}

fn channels_last(d: Device, dtype: S) -> Tensor {
    Tensor::empty_with_format(&[2, 3, 4, 5], dtype, d, MemoryFormat::ChannelsLast).unwrap()
}

/// A (3, 4) view with strides (2, 6): neither dense nor in row-major order.
fn non_dense(d: Device, dtype: S) -> Tensor {
    ops::as_strided(&on(d, &[24], dtype), &[3, 4], &[2, 6]).unwrap()
}

fn bounds(min: Option<f64>, max: Option<f64>) -> ops::ClampOptions {
    ops::ClampOptions {
        min: min.map(Scalar::Float),
        max: max.map(Scalar::Float),
    }
}

fn int_bounds(min: Option<i64>, max: Option<i64>) -> ops::ClampOptions {
    ops::ClampOptions {
        min: min.map(Scalar::Int),
        max: max.map(Scalar::Int),
    }
}

fn tensor_bounds<'a>(
    min: Option<&'a Tensor>,
    max: Option<&'a Tensor>,
) -> ops::ClampTensorOptions<'a> {
    ops::ClampTensorOptions { min, max }
}

/// `(name, call, sizes, strides, dtype)` as PyTorch 2.15 gives them.
const CASES: &[DeviceCase] = &[
    (
        "clamp float",
        |d| ops::clamp_with(&on(d, &[2, 3], S::Float), int_bounds(Some(-1), Some(1))),
        &[2, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "clamp long by 0.5 promotes",
        |d| ops::clamp_with(&on(d, &[3], S::Long), bounds(Some(0.5), None)),
        &[3],
        &[1],
        S::Float,
    ),
    (
        "clamp long by ints stays long",
        |d| ops::clamp_with(&on(d, &[3], S::Long), int_bounds(Some(0), Some(2))),
        &[3],
        &[1],
        S::Long,
    ),
    (
        "clamp bool by ints gives long",
        |d| ops::clamp_with(&on(d, &[2], S::Bool), int_bounds(Some(0), Some(1))),
        &[2],
        &[1],
        S::Long,
    ),
    (
        "clamp half by doubles stays half",
        |d| ops::clamp_with(&on(d, &[2], S::Half), bounds(Some(0.5), Some(2.5))),
        &[2],
        &[1],
        S::Half,
    ),
    (
        "clamp channels-last long by 0.5",
        |d| ops::clamp_with(&channels_last(d, S::Long), bounds(Some(0.5), None)),
        &[2, 3, 4, 5],
        &[60, 1, 15, 3],
        S::Float,
    ),
    (
        "clamp transposed",
        |d| ops::clamp_with(&on(d, &[4, 3], S::Float).t()?, int_bounds(Some(0), Some(1))),
        &[3, 4],
        &[1, 3],
        S::Float,
    ),
    (
        "clamp non-dense long by 0.5",
        |d| ops::clamp_with(&non_dense(d, S::Long), bounds(Some(0.5), None)),
        &[3, 4],
        &[1, 3],
        S::Float,
    ),
    (
        "clamp expanded rows",
        |d| {
            let x = ops::expand(&on(d, &[4, 1], S::Long), &[4, 3])?;
            ops::clamp_with(&x, bounds(Some(0.5), None))
        },
        &[4, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "clamp_min bool by 0 gives long",
        |d| ops::clamp_min(&on(d, &[2], S::Bool), 0),
        &[2],
        &[1],
        S::Long,
    ),
    (
        "clamp_min channels-last long by 0.5",
        |d| ops::clamp_min(&channels_last(d, S::Long), 0.5),
        &[2, 3, 4, 5],
        &[60, 1, 15, 3],
        S::Float,
    ),
    (
        "clamp_max long by 0.5, non-dense",
        |d| ops::clamp_max(&non_dense(d, S::Long), 0.5),
        &[3, 4],
        &[1, 3],
        S::Float,
    ),
    (
        "clamp.Tensor broadcasts self, min and max",
        |d| {
            let (lo, hi) = (on(d, &[1, 4], S::Float), on(d, &[2, 1, 1], S::Float));
            ops::clamp_tensor_with(
                &on(d, &[3, 1], S::Float),
                tensor_bounds(Some(&lo), Some(&hi)),
            )
        },
        &[2, 3, 4],
        &[12, 4, 1],
        S::Float,
    ),
    (
        "clamp.Tensor long with a 0-dim float min",
        |d| {
            let lo = on(d, &[], S::Float);
            ops::clamp_tensor_with(&on(d, &[3], S::Long), tensor_bounds(Some(&lo), None))
        },
        &[3],
        &[1],
        S::Float,
    ),
    (
        "clamp.Tensor half with a 0-dim double max",
        |d| {
            let hi = on(d, &[], S::Double);
            ops::clamp_tensor_with(&on(d, &[2], S::Half), tensor_bounds(None, Some(&hi)))
        },
        &[2],
        &[1],
        S::Half,
    ),
    (
        "clamp.Tensor half with a 1-dim double max",
        |d| {
            let hi = on(d, &[1], S::Double);
            ops::clamp_tensor_with(&on(d, &[2], S::Half), tensor_bounds(None, Some(&hi)))
        },
        &[2],
        &[1],
        S::Double,
    ),
    (
        "clamp.Tensor channels-last with per-channel bounds",
        |d| {
            let lo = on(d, &[3, 1, 1], S::Float);
            ops::clamp_tensor_with(
                &channels_last(d, S::Float),
                tensor_bounds(Some(&lo), Some(&lo)),
            )
        },
        &[2, 3, 4, 5],
        &[60, 1, 15, 3],
        S::Float,
    ),
    (
        "clamp.Tensor bool with a bool min (maximum's kernel takes bool)",
        |d| {
            let lo = on(d, &[1], S::Bool);
            ops::clamp_tensor_with(&on(d, &[2], S::Bool), tensor_bounds(Some(&lo), None))
        },
        &[2],
        &[1],
        S::Bool,
    ),
    (
        "clamp_min.Tensor channels-last with a row",
        |d| ops::clamp_min_tensor(&channels_last(d, S::Float), &on(d, &[5], S::Float)),
        &[2, 3, 4, 5],
        &[60, 1, 15, 3],
        S::Float,
    ),
    (
        "clamp_min.Tensor bool",
        |d| ops::clamp_min_tensor(&on(d, &[2], S::Bool), &on(d, &[2], S::Bool)),
        &[2],
        &[1],
        S::Bool,
    ),
    (
        "clamp_max.Tensor long with a float row",
        |d| ops::clamp_max_tensor(&on(d, &[2, 3], S::Long), &on(d, &[3], S::Float)),
        &[2, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "clamp.out of the result dtype",
        |d| {
            let o = ops::ClampOutOptions {
                min: Some(Scalar::Float(0.5)),
                ..Default::default()
            };
            ops::clamp_out_with(&on(d, &[3], S::Long), &on(d, &[3], S::Float), o)
        },
        &[3],
        &[1],
        S::Float,
    ),
    (
        "clamp.out keeps the strides of an out of the right sizes",
        |d| {
            let o = ops::ClampOutOptions {
                max: Some(Scalar::Int(1)),
                ..Default::default()
            };
            ops::clamp_out_with(&on(d, &[4, 3], S::Float), &on(d, &[3, 4], S::Float).t()?, o)
        },
        &[4, 3],
        &[1, 4],
        S::Float,
    ),
    (
        "clamp.Tensor_out casts to a wider out",
        |d| {
            let lo = on(d, &[1], S::Long);
            let o = ops::ClampTensorOutOptions {
                min: Some(&lo),
                ..Default::default()
            };
            ops::clamp_tensor_out_with(&on(d, &[3], S::Long), &on(d, &[3], S::Float), o)
        },
        &[3],
        &[1],
        S::Float,
    ),
    (
        "clamp_min.out resizes an empty out",
        |d| ops::clamp_min_out(&on(d, &[2, 3], S::Float), 0, &on(d, &[0], S::Float)),
        &[2, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "clamp_max.Tensor_out",
        |d| {
            let x = on(d, &[2, 3], S::Float);
            ops::clamp_max_tensor_out(&x, &on(d, &[3], S::Float), &on(d, &[0], S::Double))
        },
        &[2, 3],
        &[3, 1],
        S::Double,
    ),
    (
        "clamp_ in place",
        |d| {
            let o = ops::ClampInplaceOptions {
                min: Some(Scalar::Int(0)),
                ..Default::default()
            };
            ops::clamp_with_(&on(d, &[4, 3], S::Float).t()?, o)
        },
        &[3, 4],
        &[1, 3],
        S::Float,
    ),
    (
        "clamp_min_ long by an int",
        |d| ops::clamp_min_(&on(d, &[3], S::Long), 1),
        &[3],
        &[1],
        S::Long,
    ),
    (
        "clamp_max_.Tensor float by a long bound",
        |d| ops::clamp_max_tensor_(&on(d, &[2, 3], S::Float), &on(d, &[3], S::Long)),
        &[2, 3],
        &[3, 1],
        S::Float,
    ),
];

#[test]
fn geometry_as_pytorch_on_meta_and_cpu() {
    assert_geometry_on_meta_and_cpu(CASES);
}

const NO_BOUND: &str = "torch.clamp: At least one of 'min' or 'max' must not be None";
const COMPLEX: &str = "clamp is not supported for complex types";

/// The meta functions' errors: PyTorch 2.15's messages, the same on Meta and CPU.
const ERRORS: &[ErrorCase] = &[
    (
        "clamp with no bound",
        |d| ops::clamp(&on(d, &[3], S::Float)),
        NO_BOUND,
    ),
    (
        "clamp_ with no bound",
        |d| ops::clamp_(&on(d, &[3], S::Float)),
        NO_BOUND,
    ),
    (
        "clamp.Tensor with no bound",
        |d| ops::clamp_tensor(&on(d, &[3], S::Float)),
        NO_BOUND,
    ),
    (
        "clamp.Tensor_out with no bound",
        |d| ops::clamp_tensor_out(&on(d, &[3], S::Float), &on(d, &[3], S::Float)),
        NO_BOUND,
    ),
    (
        "clamp of complex",
        |d| ops::clamp_with(&on(d, &[2], S::ComplexFloat), int_bounds(Some(0), None)),
        COMPLEX,
    ),
    (
        "clamp_min of complex",
        |d| ops::clamp_min(&on(d, &[2], S::ComplexFloat), 0),
        COMPLEX,
    ),
    (
        "clamp_max_ of complex",
        |d| ops::clamp_max_(&on(d, &[2], S::ComplexFloat), 0),
        COMPLEX,
    ),
    (
        "clamp.Tensor of complex",
        |d| {
            let lo = on(d, &[1], S::Float);
            ops::clamp_tensor_with(
                &on(d, &[2], S::ComplexFloat),
                tensor_bounds(Some(&lo), None),
            )
        },
        COMPLEX,
    ),
    (
        "clamp_ long by 0.5",
        |d| {
            let o = ops::ClampInplaceOptions {
                min: Some(Scalar::Float(0.5)),
                ..Default::default()
            };
            ops::clamp_with_(&on(d, &[3], S::Long), o)
        },
        "result type Float can't be cast to the desired output type long int",
    ),
    (
        "clamp_ bool by ints",
        |d| {
            let o = ops::ClampInplaceOptions {
                min: Some(Scalar::Int(0)),
                max: Some(Scalar::Int(1)),
            };
            ops::clamp_with_(&on(d, &[2], S::Bool), o)
        },
        "result type Long can't be cast to the desired output type bool",
    ),
    (
        "clamp_min_ long by 0.5",
        |d| ops::clamp_min_(&on(d, &[3], S::Long), 0.5),
        "result type Float can't be cast to the desired output type long int",
    ),
    (
        "clamp_max_ long by 0.5",
        |d| ops::clamp_max_(&on(d, &[3], S::Long), 0.5),
        "result type Float can't be cast to the desired output type long int",
    ),
    (
        "clamp.out of another dtype than the promoted one",
        |d| {
            let o = ops::ClampOutOptions {
                min: Some(Scalar::Float(0.5)),
                ..Default::default()
            };
            ops::clamp_out_with(&on(d, &[3], S::Long), &on(d, &[3], S::Long), o)
        },
        "Found dtype Long but expected Float",
    ),
    (
        "clamp.out wider than self",
        |d| {
            let o = ops::ClampOutOptions {
                min: Some(Scalar::Float(0.5)),
                ..Default::default()
            };
            ops::clamp_out_with(&on(d, &[3], S::Float), &on(d, &[3], S::Double), o)
        },
        "Found dtype Double but expected Float",
    ),
    (
        "clamp_min.out wider than self",
        |d| ops::clamp_min_out(&on(d, &[3], S::Float), 0.5, &on(d, &[3], S::Double)),
        "Found dtype Double but expected Float",
    ),
    (
        "clamp_max.out float for a long clamp",
        |d| ops::clamp_max_out(&on(d, &[3], S::Long), 0, &on(d, &[3], S::Float)),
        "Found dtype Float but expected Long",
    ),
    (
        "clamp.Tensor_out narrower than the result",
        |d| {
            let lo = on(d, &[], S::Float);
            let o = ops::ClampTensorOutOptions {
                min: Some(&lo),
                ..Default::default()
            };
            ops::clamp_tensor_out_with(&on(d, &[3], S::Float), &on(d, &[3], S::Long), o)
        },
        "result type Float can't be cast to the desired output type Long",
    ),
    (
        "clamp_min.Tensor_out narrower than the result",
        |d| {
            let x = on(d, &[3], S::Float);
            ops::clamp_min_tensor_out(&x, &on(d, &[1], S::Float), &on(d, &[3], S::Long))
        },
        "result type Float can't be cast to the desired output type Long",
    ),
    (
        "clamp_.Tensor long by a float bound",
        |d| {
            let lo = on(d, &[1], S::Float);
            let o = ops::ClampTensorInplaceOptions {
                min: Some(&lo),
                ..Default::default()
            };
            ops::clamp_tensor_with_(&on(d, &[3], S::Long), o)
        },
        "result type Float can't be cast to the desired output type Long",
    ),
    (
        "clamp_min_.Tensor long by a 0-dim float",
        |d| ops::clamp_min_tensor_(&on(d, &[3], S::Long), &on(d, &[], S::Float)),
        "result type Float can't be cast to the desired output type Long",
    ),
    (
        "clamp_.Tensor broadcasting self",
        |d| {
            let lo = on(d, &[1, 4], S::Float);
            let o = ops::ClampTensorInplaceOptions {
                min: Some(&lo),
                ..Default::default()
            };
            ops::clamp_tensor_with_(&on(d, &[3, 1], S::Float), o)
        },
        "output with shape [3, 1] doesn't match the broadcast shape [3, 4]",
    ),
    (
        "clamp_max_.Tensor broadcasting self",
        |d| ops::clamp_max_tensor_(&on(d, &[], S::Float), &on(d, &[3], S::Float)),
        "output with shape [] doesn't match the broadcast shape [3]",
    ),
];

#[test]
fn meta_functions_fail_with_pytorchs_errors() {
    assert_errors_on_meta_and_cpu(ERRORS);
}

/// The kernels' own errors, raised on the CPU only (PyTorch's meta functions pass these calls):
/// the dtype dispatch of the kernel the bounds select, and integral bounds out of range.
const KERNEL_ERRORS: &[ErrorCase] = &[
    (
        // A meta tensor has no memory to overlap.
        "clamp_ of an expanded tensor",
        |d| {
            let x = ops::expand(&on(d, &[1], S::Float), &[3])?;
            let o = ops::ClampInplaceOptions {
                max: Some(Scalar::Int(1)),
                ..Default::default()
            };
            ops::clamp_with_(&x, o)
        },
        "unsupported operation: more than one element of the written-to tensor refers to a \
         single memory location. Please clone() the tensor before performing the operation.",
    ),
    (
        "clamp of bool by bools",
        |d| {
            let o = ops::ClampOptions {
                min: Some(Scalar::Bool(false)),
                max: Some(Scalar::Bool(true)),
            };
            ops::clamp_with(&on(d, &[2], S::Bool), o)
        },
        "\"clamp_scalar_cpu\" not implemented for 'Bool'",
    ),
    (
        "clamp_min of bool",
        |d| ops::clamp_min(&on(d, &[2], S::Bool), false),
        "\"clamp_min_scalar_cpu\" not implemented for 'Bool'",
    ),
    (
        "clamp_max of bool",
        |d| ops::clamp_max(&on(d, &[2], S::Bool), true),
        "\"clamp_max_scalar_cpu\" not implemented for 'Bool'",
    ),
    (
        "clamp.Tensor of bool with both bounds",
        |d| {
            let b = on(d, &[1], S::Bool);
            ops::clamp_tensor_with(&on(d, &[2], S::Bool), tensor_bounds(Some(&b), Some(&b)))
        },
        "\"clamp_cpu\" not implemented for 'Bool'",
    ),
    (
        "clamp_min of int8 by 300",
        |d| ops::clamp_min(&on(d, &[1], S::Char), 300),
        "Clamp min value 300 is outside the representable range of Char",
    ),
    (
        "clamp_max of uint8 by -1",
        |d| ops::clamp_max(&on(d, &[1], S::Byte), -1),
        "Clamp max value -1 is outside the representable range of Byte",
    ),
];

#[test]
fn kernel_errors_on_the_cpu_only() {
    for (name, call, message) in KERNEL_ERRORS {
        assert!(call(Device::META).is_ok(), "{name}");
        assert_eq!(
            call(Device::CPU).unwrap_err().first_line(),
            *message,
            "{name}"
        );
    }
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_vec_as::<f64>().unwrap()
}

fn same(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x == y || (x.is_nan() && y.is_nan()))
}

/// The CPU kernels compute PyTorch's values into the outputs they are given.
#[test]
fn cpu_values_and_out_forms() {
    let nan = f64::NAN;
    let f = Tensor::from_vec(vec![1.0f32, 5.0, f32::NAN], &[3]).unwrap();
    let i = Tensor::from_vec(vec![1i64, 5, -3], &[3]).unwrap();
    // min > max gives max; a NaN element stays NaN.
    let r = ops::clamp_with(&f, int_bounds(Some(3), Some(1))).unwrap();
    assert!(same(&values(&r), &[1.0, 1.0, nan]));
    // A NaN Scalar bound fills every element with NaN.
    let r = ops::clamp_with(&i, bounds(Some(nan), None)).unwrap();
    assert_eq!(r.dtype(), S::Float);
    assert!(same(&values(&r), &[nan, nan, nan]));
    let r = ops::clamp_max(&f, nan).unwrap();
    assert!(same(&values(&r), &[nan, nan, nan]));
    // Promotion: an int tensor clamped by floats.
    let r = ops::clamp_with(&i, bounds(Some(0.5), Some(2.0))).unwrap();
    assert_eq!((r.dtype(), values(&r)), (S::Float, vec![1.0, 2.0, 0.5]));
    // An integral bound outside the dtype's range on the side that cannot bite is dropped.
    let u = Tensor::from_vec(vec![1u8, 200], &[2]).unwrap();
    assert_eq!(values(&ops::clamp_min(&u, -1).unwrap()), [1.0, 200.0]);
    // Tensor bounds propagate NaN elementwise; min > max gives max.
    let lo = Tensor::from_vec(vec![0.0f32, f32::NAN, 0.0], &[3]).unwrap();
    let hi = Tensor::scalar_tensor(1.0, S::Float);
    let r = ops::clamp_tensor_with(&f, tensor_bounds(Some(&lo), Some(&hi))).unwrap();
    assert!(same(&values(&r), &[1.0, nan, nan]));
    let r = ops::clamp_tensor_with(&f, tensor_bounds(Some(&hi), Some(&lo))).unwrap();
    assert!(same(&values(&r), &[0.0, nan, nan]));
    // Bool with one bool Tensor bound is maximum / minimum.
    let b = Tensor::from_vec(vec![true, false], &[2]).unwrap();
    let t = Tensor::from_vec(vec![true, true], &[2]).unwrap();
    let r = ops::clamp_min_tensor(&b, &t).unwrap();
    assert_eq!(r.to_vec::<bool>().unwrap(), [true, true]);
    // out= forms write into (and return) `out`; in-place forms into `self`.
    let out = Tensor::zeros(&[3], S::Float).unwrap();
    let r = ops::clamp_min_out(&i, 0.5, &out).unwrap();
    assert!(r.is_alias_of(&out));
    assert_eq!(values(&out), [1.0, 5.0, 0.5]);
    let out = Tensor::zeros(&[3], S::Double).unwrap();
    ops::clamp_max_tensor_out(&i, &hi, &out).unwrap();
    assert_eq!(values(&out), [1.0, 1.0, -3.0]);
    let x = Tensor::from_vec(vec![-2i64, 0, 7], &[3]).unwrap();
    let o = ops::ClampInplaceOptions {
        min: Some(Scalar::Int(-1)),
        max: Some(Scalar::Int(5)),
    };
    let r = ops::clamp_with_(&x, o).unwrap();
    assert!(r.is_alias_of(&x));
    assert_eq!(values(&x), [-1.0, 0.0, 5.0]);
    ops::clamp_max_tensor_(&x, &Tensor::scalar_tensor(4, S::Long)).unwrap();
    assert_eq!(values(&x), [-1.0, 0.0, 4.0]);
}

#[test]
fn meta_kernels_are_meta_functions() {
    let mut names = Vec::new();
    for op in ["clamp", "clamp_min", "clamp_max"] {
        for overload in ["", ".Tensor", ".out", ".Tensor_out"] {
            names.push(format!("aten::{op}{overload}"));
        }
        names.push(format!("aten::{op}_"));
        names.push(format!("aten::{op}_.Tensor"));
    }
    assert_eq!(names.len(), 18);
    common::assert_meta_kernels_are_meta_functions(names);
}

//! The structured reductions with indices and sorting operators against PyTorch 2.15 (values
//! recorded from `torch` on the CPU, whose C++ meta functions these are): `max.dim` /
//! `min.dim` (+ `.dim_max` / `.dim_min`), `sort.stable` (+ `.values_stable`, and the
//! composites `sort` / `sort.values`), `topk` (+ `.values`): output geometry, errors equal on
//! Meta and CPU, the `out=` forms, and Meta kernels that are meta functions. Also the
//! non-structured reductions' Meta path (Note [Meta path of unstructured kernels] in
//! switchboard-cpu).

mod common;

use switchboard_dispatcher::Result;
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{Device, ScalarType as S, Tensor};

use switchboard_cpu as _;
use switchboard_meta as _;

fn on(d: Device, sizes: &[i64], dtype: S) -> Tensor {
    Tensor::empty_on(sizes, dtype, d).unwrap()
}

fn f(sizes: &[i64]) -> Tensor {
    on(Device::META, sizes, S::Float)
}

fn pair(r: Result<(Tensor, Tensor)>) -> Result<Vec<Tensor>> {
    r.map(|(a, b)| vec![a, b])
}

/// `topk` of `k` along dim 1 of a `(4, 3, 2)` transposed view.
fn topk_of_transposed(k: i64) -> Result<Vec<Tensor>> {
    let x = f(&[2, 3, 4]).transpose(0, 2)?;
    pair(ops::topk_with(&x, k, ops::TopkOptions::default().dim(1)))
}

/// Expected `(sizes, strides, dtype)` of each output.
type Geometry = &'static [(&'static [i64], &'static [i64], S)];

type Case = (&'static str, fn() -> Result<Vec<Tensor>>, Geometry);

/// `(name, call, outputs)` as PyTorch 2.15 gives them.
const CASES: &[Case] = &[
    (
        "max.dim of a transposed tensor",
        || pair(ops::max_dim(&f(&[2, 3, 4]).transpose(0, 2)?, 1)),
        &[(&[4, 2], &[2, 1], S::Float), (&[4, 2], &[2, 1], S::Long)],
    ),
    (
        "max.dim keepdim",
        || {
            pair(ops::max_dim_with(
                &f(&[5, 3]).t()?,
                0,
                ops::MaxDimOptions::default().keepdim(true),
            ))
        },
        &[(&[1, 5], &[5, 1], S::Float), (&[1, 5], &[5, 1], S::Long)],
    ),
    (
        "max.dim of an empty tensor along a non-empty dim",
        || pair(ops::max_dim(&f(&[0, 3]), 1)),
        &[(&[0], &[1], S::Float), (&[0], &[1], S::Long)],
    ),
    (
        "min.dim of a 0-dim bool",
        || pair(ops::min_dim(&on(Device::META, &[], S::Bool), 0)),
        &[(&[], &[], S::Bool), (&[], &[], S::Long)],
    ),
    (
        "max.dim_max into empty outs",
        || {
            pair(ops::max_dim_max(
                &f(&[2, 3, 4]),
                0,
                &f(&[0]),
                &on(Device::META, &[0], S::Long),
            ))
        },
        &[(&[3, 4], &[4, 1], S::Float), (&[3, 4], &[4, 1], S::Long)],
    ),
    (
        "min.dim_min of int",
        || {
            pair(ops::min_dim_min(
                &on(Device::META, &[2, 3], S::Int),
                -1,
                &on(Device::META, &[0], S::Int),
                &on(Device::META, &[0], S::Long),
            ))
        },
        &[(&[2], &[1], S::Int), (&[2], &[1], S::Long)],
    ),
    (
        "sort.stable keeps a transposed layout",
        || {
            pair(ops::sort_stable_with(
                &f(&[2, 3, 4]).transpose(0, 2)?,
                Some(true),
                ops::SortStableOptions::default().dim(1),
            ))
        },
        &[
            (&[4, 3, 2], &[1, 4, 12], S::Float),
            (&[4, 3, 2], &[1, 4, 12], S::Long),
        ],
    ),
    (
        "sort.stable of channels_last",
        || {
            pair(ops::sort_stable_with(
                &common::channels_last(&[2, 3, 4, 5]),
                Some(true),
                ops::SortStableOptions::default().dim(1),
            ))
        },
        &[
            (&[2, 3, 4, 5], &[60, 1, 15, 3], S::Float),
            (&[2, 3, 4, 5], &[60, 1, 15, 3], S::Long),
        ],
    ),
    (
        "sort of an expanded tensor is dense",
        || pair(ops::sort(&f(&[3, 1]).expand(&[3, 4])?)),
        &[(&[3, 4], &[4, 1], S::Float), (&[3, 4], &[4, 1], S::Long)],
    ),
    (
        "sort of a strided slice is dense",
        || {
            pair(ops::sort(&ops::slice_with(
                &f(&[2, 3, 4]),
                ops::SliceOptions::default().dim(2).step(2),
            )?))
        },
        &[
            (&[2, 3, 2], &[6, 2, 1], S::Float),
            (&[2, 3, 2], &[6, 2, 1], S::Long),
        ],
    ),
    (
        "sort keeps a size-1 dim's stride",
        || {
            pair(ops::sort_with(
                &Tensor::empty_strided(&[3, 1], &[1, 7], S::Float, Device::META)?,
                ops::SortOptions::default().dim(0),
            ))
        },
        &[(&[3, 1], &[1, 7], S::Float), (&[3, 1], &[1, 7], S::Long)],
    ),
    (
        "sort of a 0-dim bool",
        || pair(ops::sort(&on(Device::META, &[], S::Bool))),
        &[(&[], &[], S::Bool), (&[], &[], S::Long)],
    ),
    (
        "sort.values into empty outs",
        || {
            pair(ops::sort_values(
                &f(&[2, 3, 4]).transpose(0, 1)?,
                &f(&[0]),
                &on(Device::META, &[0], S::Long),
            ))
        },
        &[
            (&[3, 2, 4], &[4, 12, 1], S::Float),
            (&[3, 2, 4], &[4, 12, 1], S::Long),
        ],
    ),
    (
        "topk of a transposed tensor is contiguous",
        || topk_of_transposed(2),
        &[
            (&[4, 2, 2], &[4, 2, 1], S::Float),
            (&[4, 2, 2], &[4, 2, 1], S::Long),
        ],
    ),
    (
        "topk k=0",
        || topk_of_transposed(0),
        &[
            (&[4, 0, 2], &[2, 2, 1], S::Float),
            (&[4, 0, 2], &[2, 2, 1], S::Long),
        ],
    ),
    (
        "topk of a 0-dim tensor",
        || pair(ops::topk(&f(&[]), 1)),
        &[(&[], &[], S::Float), (&[], &[], S::Long)],
    ),
    (
        "topk of bool (a CPU kernel error only)",
        || pair(ops::topk(&on(Device::META, &[3], S::Bool), 1)),
        &[(&[1], &[1], S::Bool), (&[1], &[1], S::Long)],
    ),
    (
        "topk.values into empty outs",
        || {
            pair(ops::topk_values(
                &f(&[2, 3, 4]),
                2,
                &f(&[0]),
                &on(Device::META, &[0], S::Long),
            ))
        },
        &[
            (&[2, 3, 2], &[6, 2, 1], S::Float),
            (&[2, 3, 2], &[6, 2, 1], S::Long),
        ],
    ),
    (
        "max() (not structured) on Meta",
        || Ok(vec![ops::max(&on(Device::META, &[2, 3], S::Int))?]),
        &[(&[], &[], S::Int)],
    ),
    (
        "prod() of int (not structured) on Meta",
        || Ok(vec![ops::prod(&on(Device::META, &[2, 3], S::Int))?]),
        &[(&[], &[], S::Long)],
    ),
    (
        "prod.out (not structured) on Meta",
        || {
            Ok(vec![ops::prod_out(
                &on(Device::META, &[2, 3], S::Int),
                &on(Device::META, &[0], S::Long),
            )?])
        },
        &[(&[], &[], S::Long)],
    ),
    (
        "var.correction (not structured) on Meta",
        || {
            Ok(vec![ops::var_correction_with(
                &f(&[2, 3]),
                ops::VarCorrectionOptions::default().dim(&[1]).keepdim(true),
            )?])
        },
        &[(&[2, 1], &[1, 1], S::Float)],
    ),
    (
        "sum.out (not structured) on Meta",
        || {
            Ok(vec![ops::sum_out(
                &on(Device::META, &[2, 3], S::Bool),
                &on(Device::META, &[0], S::Long),
            )?])
        },
        &[(&[], &[], S::Long)],
    ),
];

#[test]
fn meta_functions_give_pytorchs_geometry() {
    let mut failures = Vec::new();
    for (name, call, expected) in CASES {
        match call() {
            Ok(outs) => {
                let got: Vec<_> = outs
                    .iter()
                    .map(|t| (t.sizes(), t.strides(), t.dtype()))
                    .collect();
                let want: Vec<_> = expected.iter().map(|&(s, st, d)| (s, st, d)).collect();
                if got != want || outs.iter().any(|t| !t.is_meta() || t.has_data()) {
                    failures.push(format!("{name}: got {got:?}, PyTorch gives {want:?}"));
                }
            }
            Err(err) => failures.push(format!("{name}: {err}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

type ErrorCase = common::ErrorCase<Vec<Tensor>>;

/// PyTorch 2.15's messages (CPU), which Meta gives as well.
const ERRORS: &[ErrorCase] = &[
    (
        "max.dim over an empty dim",
        |d| pair(ops::max_dim(&on(d, &[0, 3], S::Float), 0)),
        "max(): Expected reduction dim 0 to have non-zero size.",
    ),
    (
        "max.dim over an empty dim, wrapped",
        |d| pair(ops::max_dim(&on(d, &[0, 3], S::Float), -2)),
        "max(): Expected reduction dim 0 to have non-zero size.",
    ),
    (
        "min.dim of a 0-dim tensor, dim 1",
        |d| pair(ops::min_dim(&on(d, &[], S::Float), 1)),
        "Dimension out of range (expected to be in range of [-1, 0], but got 1)",
    ),
    (
        "min.dim of complex",
        |d| pair(ops::min_dim(&on(d, &[3], S::ComplexFloat), 0)),
        "min(): does not support complex input",
    ),
    (
        "max.dim_max values of another dtype",
        |d| {
            pair(ops::max_dim_max(
                &on(d, &[2, 3], S::Float),
                0,
                &on(d, &[0], S::Double),
                &on(d, &[0], S::Long),
            ))
        },
        "Expected out tensor to have dtype float, but got double instead",
    ),
    (
        "min.dim_min indices of int",
        |d| {
            pair(ops::min_dim_min(
                &on(d, &[2, 3], S::Float),
                0,
                &on(d, &[0], S::Float),
                &on(d, &[0], S::Int),
            ))
        },
        "Expected out tensor to have dtype long int, but got int instead",
    ),
    (
        "sort dim",
        |d| {
            pair(ops::sort_with(
                &on(d, &[2, 3, 4], S::Float),
                ops::SortOptions::default().dim(3),
            ))
        },
        "Dimension out of range (expected to be in range of [-3, 2], but got 3)",
    ),
    (
        "sort.values_stable indices of int",
        |d| {
            pair(ops::sort_values_stable(
                &on(d, &[2, 3], S::Float),
                Some(true),
                &on(d, &[0], S::Float),
                &on(d, &[0], S::Int),
            ))
        },
        "Expected out tensor to have dtype long int, but got int instead",
    ),
    (
        "topk k too large",
        |d| pair(ops::topk(&on(d, &[2, 3, 4], S::Float), 5)),
        "selected index k out of range",
    ),
    (
        "topk k negative",
        |d| pair(ops::topk(&on(d, &[2, 3, 4], S::Float), -1)),
        "selected index k out of range",
    ),
    (
        "topk of a 0-dim tensor, k=2",
        |d| pair(ops::topk(&on(d, &[], S::Float), 2)),
        "selected index k out of range",
    ),
    (
        "topk dim",
        |d| {
            pair(ops::topk_with(
                &on(d, &[2, 3, 4], S::Float),
                1,
                ops::TopkOptions::default().dim(5),
            ))
        },
        "Dimension out of range (expected to be in range of [-3, 2], but got 5)",
    ),
    (
        "topk.values of another dtype",
        |d| {
            pair(ops::topk_values(
                &on(d, &[2, 3, 4], S::Float),
                2,
                &on(d, &[0], S::Int),
                &on(d, &[0], S::Long),
            ))
        },
        "Expected out tensor to have dtype float, but got int instead",
    ),
];

#[test]
fn meta_functions_fail_with_pytorchs_errors() {
    common::assert_errors_on_meta_and_cpu(ERRORS);
}

/// The CPU kernels compute into the outputs they are given (PyTorch's values).
#[test]
fn cpu_out_forms_compute_into_their_outputs() {
    let x = Tensor::from_vec(vec![1.0f32, 5.0, 7.0, 2.0], &[2, 2]).unwrap();
    let (v, i) = (
        Tensor::zeros(&[2], S::Float).unwrap(),
        Tensor::zeros(&[2], S::Long).unwrap(),
    );
    let (rv, ri) = ops::max_dim_max(&x, 1, &v, &i).unwrap();
    assert_eq!(v.to_vec::<f32>().unwrap(), [5.0, 7.0]);
    assert_eq!(i.to_vec::<i64>().unwrap(), [1, 0]);
    assert!(rv.is_alias_of(&v) && ri.is_alias_of(&i));
    let (v, i) = ops::min_dim_min(
        &x,
        0,
        &Tensor::zeros(&[0], S::Float).unwrap(),
        &Tensor::zeros(&[0], S::Long).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (v.to_vec::<f32>().unwrap(), i.to_vec::<i64>().unwrap()),
        (vec![1.0, 2.0], vec![0, 1])
    );
    // An out= of other strides is written through its own strides.
    let vt = Tensor::zeros(&[2, 2], S::Float).unwrap().t().unwrap();
    let it = Tensor::zeros(&[2, 2], S::Long).unwrap().t().unwrap();
    ops::sort_values_stable_with(
        &x,
        Some(true),
        &vt,
        &it,
        ops::SortValuesStableOptions::default().descending(true),
    )
    .unwrap();
    assert_eq!(
        vt.contiguous().unwrap().to_vec::<f32>().unwrap(),
        [5.0, 1.0, 7.0, 2.0]
    );
    assert_eq!(
        it.contiguous().unwrap().to_vec::<i64>().unwrap(),
        [1, 0, 0, 1]
    );
    let (v, i) = ops::sort_values(
        &x,
        &Tensor::zeros(&[0], S::Float).unwrap(),
        &Tensor::zeros(&[0], S::Long).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (v.to_vec::<f32>().unwrap(), i.to_vec::<i64>().unwrap()),
        (vec![1.0, 5.0, 2.0, 7.0], vec![0, 1, 1, 0])
    );
    // Sorting into its own input reads a copy.
    let y = x
        .contiguous()
        .unwrap()
        .to_vec::<f32>()
        .map(|v| Tensor::from_vec(v, &[2, 2]).unwrap())
        .unwrap();
    ops::sort_values_stable(&y, Some(true), &y, &Tensor::zeros(&[0], S::Long).unwrap()).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [1.0, 5.0, 2.0, 7.0]);
    let (v, i) = ops::topk_values(
        &x.reshape(&[4]).unwrap(),
        3,
        &Tensor::zeros(&[0], S::Float).unwrap(),
        &Tensor::zeros(&[0], S::Long).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (v.to_vec::<f32>().unwrap(), i.to_vec::<i64>().unwrap()),
        (vec![7.0, 5.0, 2.0], vec![2, 1, 3])
    );
    // Bool has no CPU kernel (PyTorch's NotImplementedError); its meta function accepts it.
    let b = Tensor::from_vec(vec![true, false], &[2]).unwrap();
    assert_eq!(
        ops::topk(&b, 1).unwrap_err().first_line(),
        "topk does not support bool dtypes on CPU"
    );
}

/// The Meta kernels of the structured families are their meta functions' glue; `sort` and
/// `sort.values` are composites over them.
#[test]
fn meta_kernels_are_meta_functions() {
    common::assert_meta_kernels_are_meta_functions([
        "aten::max.dim",
        "aten::max.dim_max",
        "aten::min.dim",
        "aten::min.dim_min",
        "aten::sort.stable",
        "aten::sort.values_stable",
        "aten::topk",
        "aten::topk.values",
        "aten::prod.dim_int",
    ]);
}

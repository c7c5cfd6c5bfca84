//! The dense path of the binary ops (Note [Dense binary loops]) against the general path:
//! same dtypes, sizes, strides, values and errors.

use proptest::prelude::*;
use switchboard_tensor::{Device, RawOps, Scalar, ScalarType, Tensor};

use super::*;
use crate::copy::cast;
use crate::iter::{scalar_operand, DenseBinary};
use crate::pow::pow_kernel;

/// A result as comparable data: sizes, strides, dtype and values (`Debug` of each element as
/// `f64`, so that NaNs compare equal), or the error message.
type Outcome = std::result::Result<(Vec<i64>, Vec<i64>, ScalarType, Vec<String>), String>;

/// The real dtypes (the binary kernels' dense paths do not take complex tensors).
fn real_dtypes() -> Vec<ScalarType> {
    ScalarType::ALL
        .into_iter()
        .filter(|d| !d.is_complex())
        .collect()
}

fn outcome(r: Result<Tensor>) -> Outcome {
    r.map(|t| {
        let values = t.to_vec_as::<f64>().unwrap();
        (
            t.sizes().to_vec(),
            t.strides().to_vec(),
            t.dtype(),
            values.iter().map(|v| format!("{v:?}")).collect(),
        )
    })
    .map_err(|e| e.to_string())
}

/// Runs the kernel `|it| body` on `a` and `b` by the dense path (`None` if it does not apply)
/// and by the general path.
macro_rules! both {
    ($a:expr, $b:expr, $int_to_float:expr, |$it:ident| $body:expr) => {{
        let (a, b): (&Tensor, &Tensor) = ($a, $b);
        let dense = DenseBinary::try_new(a, b, $int_to_float).unwrap().map(|d| {
            let $it = &d;
            let run = || -> Result<()> { $body };
            let done = run();
            outcome(done.and_then(|_| d.finish()))
        });
        let general = outcome(binary_general("op", a, b, None, $int_to_float, |$it| $body));
        (dense, general)
    }};
}

/// Every binary kernel of this module (and a few modes), through both paths.
fn all_ops(a: &Tensor, b: &Tensor) -> Vec<(&'static str, Option<Outcome>, Outcome)> {
    let mut r = Vec::new();
    let mut push = |name, (d, g): (Option<Outcome>, Outcome)| r.push((name, d, g));
    push(
        "add",
        both!(a, b, false, |it| add_kernel(it, Scalar::Int(1))),
    );
    push(
        "add2",
        both!(a, b, false, |it| add_kernel(it, Scalar::Int(2))),
    );
    push(
        "add_float_alpha",
        both!(a, b, false, |it| add_kernel(it, Scalar::Float(0.5))),
    );
    push(
        "sub",
        both!(a, b, false, |it| {
            sub_check(a, b)?;
            add_kernel(it, -Scalar::Int(1))
        }),
    );
    push("mul", both!(a, b, false, |it| mul_kernel(it, b)));
    push(
        "div",
        both!(a, b, true, |it| div_kernel(it, Rounding::True, b)),
    );
    push(
        "div_trunc",
        both!(a, b, false, |it| div_kernel(it, Rounding::Trunc, b)),
    );
    push(
        "div_floor",
        both!(a, b, false, |it| div_kernel(it, Rounding::Floor, b)),
    );
    push("pow", both!(a, b, false, |it| pow_kernel(it)));
    push("maximum", both!(a, b, false, |it| max_min_kernel(it, true)));
    push(
        "minimum",
        both!(a, b, false, |it| max_min_kernel(it, false)),
    );
    r
}

/// Checks that the dense path applies (`dense`) or not to `a`, `b`, and that it gives what the
/// general path gives, for every op.
fn check(a: &Tensor, b: &Tensor, dense: bool) {
    for (name, d, g) in all_ops(a, b) {
        match d {
            Some(d) => {
                assert!(dense, "{name}: the dense path was taken");
                assert_eq!(d, g, "{name} on {a:?} and {b:?}");
            }
            // int_to_float ops skip integer inputs.
            None => assert!(
                !dense || (name == "div" && !a.dtype().is_floating_point()),
                "{name}: the dense path was not taken"
            ),
        }
    }
}

/// `values` (cycled to `sizes`' numel) as a contiguous tensor of `dtype`.
fn tensor(values: &[f64], sizes: &[i64], dtype: ScalarType) -> Tensor {
    let n: i64 = sizes.iter().product();
    let v: Vec<f64> = (0..n as usize).map(|i| values[i % values.len()]).collect();
    cast(&Tensor::from_vec(v, sizes).unwrap(), dtype).unwrap()
}

#[test]
fn dense_matches_general_over_dtypes_and_shapes() {
    let xs = [3.0, -2.0, 0.0, 1.5, 7.0, -0.5];
    let ys = [2.0, 0.0, -3.0, 4.0, -1.5, 1.0];
    let shapes: [&[i64]; 7] = [&[], &[0], &[1], &[3], &[2, 3], &[0, 3], &[2, 1, 3]];
    for dt in real_dtypes() {
        for sizes in shapes {
            check(&tensor(&xs, sizes, dt), &tensor(&ys, sizes, dt), true);
        }
        // Contiguous with an odd stride on a size-1 dim.
        let a = tensor(&xs, &[2, 1, 3], dt)
            .as_strided(&[2, 1, 3], &[3, 7, 1], 0)
            .unwrap();
        check(&a, &tensor(&ys, &[2, 1, 3], dt), true);
    }
    // Large enough for parallel chunks.
    let big = |v: &[f64]| tensor(v, &[70000], ScalarType::Float);
    check(&big(&xs), &big(&ys), true);
    check(&big(&xs), &big(&xs), true);
}

#[test]
fn general_cases_are_not_dense() {
    let f = |s: &[i64]| tensor(&[1.0, 2.0, 3.0], s, ScalarType::Float);
    // Promotion, broadcasting, strided, zero-dim with a tensor, wrapped numbers, meta.
    check(&f(&[3]), &tensor(&[1.0], &[3], ScalarType::Long), false);
    check(&f(&[2, 3]), &f(&[3]), false);
    check(&f(&[3, 2]).t().unwrap(), &f(&[2, 3]), false);
    check(&f(&[3]), &f(&[]), false);
    check(&f(&[]), &Tensor::wrapped_scalar(2.5), false);
    let w = Tensor::wrapped_scalar(2.5);
    check(&w, &w, false);
    let m = Tensor::empty_on(&[2], ScalarType::Float, Device::META).unwrap();
    assert!(DenseBinary::try_new(&m, &m, false).unwrap().is_none());
}

#[test]
fn public_ops_take_the_dense_path_with_general_results() {
    let a = tensor(&[1.0, -2.0, 3.5], &[3], ScalarType::Float);
    let b = tensor(&[0.5, 4.0, -1.0], &[3], ScalarType::Float);
    let r = add_tensor(&a, &b, Scalar::Int(1)).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [1.5, 2.0, 2.5]);
    assert!(!r.is_alias_of(&a) && !r.is_alias_of(&b));
    assert_eq!(r.version(), 0);
    assert_eq!(r.key_set(), a.key_set());
    let i = tensor(&[7.0, -7.0], &[2], ScalarType::Int);
    let z = tensor(&[0.0, 2.0], &[2], ScalarType::Int);
    assert_eq!(
        div_tensor_mode(&i, &z, Some("floor"))
            .unwrap_err()
            .to_string(),
        "ZeroDivisionError"
    );
    assert_eq!(div_tensor(&i, &i).unwrap().dtype(), ScalarType::Float);
    // A storage being written cannot be read: the same error as the general path's.
    let guard = a.data_mut::<f32>().unwrap();
    let (d, g) = both!(&a, &b, false, |it| add_kernel(it, Scalar::Int(1)));
    assert!(d.as_ref().unwrap().is_err());
    assert_eq!(d.unwrap(), g);
    drop(guard);
}

#[test]
fn unwritten_dense_outputs_are_zeroed_and_loops_do_not_nest() {
    let a = tensor(&[1.0, 2.0], &[2], ScalarType::Float);
    let d = DenseBinary::try_new(&a, &a, false).unwrap().unwrap();
    assert!(d.for_each2(|x: f64, y: f64| x + y).is_err());
    assert_eq!(d.finish().unwrap().to_vec::<f32>().unwrap(), [0.0, 0.0]);
    let d = DenseBinary::try_new(&a, &a, false).unwrap().unwrap();
    d.for_each2(|x: f32, y: f32| x * y).unwrap();
    // A second loop rewrites the output.
    d.for_each2(|x: f32, y: f32| x + y).unwrap();
    assert_eq!(d.finish().unwrap().to_vec::<f32>().unwrap(), [2.0, 4.0]);
}

std::thread_local! {
    static LEAKED: std::cell::Cell<Option<&'static DenseBinary<'static>>> =
        const { std::cell::Cell::new(None) };
}

#[test]
fn a_dense_loop_cannot_start_inside_another() {
    let a: &'static Tensor = Box::leak(Box::new(tensor(&[1.0, 2.0], &[2], ScalarType::Float)));
    let d: &'static DenseBinary<'static> = Box::leak(Box::new(
        DenseBinary::try_new(a, a, false).unwrap().unwrap(),
    ));
    LEAKED.with(|c| c.set(Some(d)));
    d.for_each2(|x: f32, y: f32| {
        let inner = LEAKED.with(|c| c.get()).unwrap();
        assert!(inner.for_each2(|x: f32, y: f32| x * y).is_err());
        x + y
    })
    .unwrap();
    LEAKED.with(|c| c.set(None));
}

proptest! {
    #[test]
    fn dense_and_general_agree(
        sizes in prop::collection::vec(0i64..4, 0..4),
        dt in 0usize..10,
        xs in prop::collection::vec(-4i32..5, 1..8),
        ys in prop::collection::vec(-4i32..5, 1..8),
        layout in 0u8..4,
    ) {
        let dt = real_dtypes()[dt];
        let half = |v: &[i32]| v.iter().map(|x| *x as f64 / 2.0).collect::<Vec<_>>();
        let a = tensor(&half(&xs), &sizes, dt);
        let b = tensor(&half(&ys), &sizes, dt);
        match layout {
            0 => check(&a, &b, true),
            // Another dtype, a broadcast operand, a reversed layout: general only.
            1 => check(&a, &cast(&b, ScalarType::Double).unwrap(), dt == ScalarType::Double),
            2 => check(&a, &tensor(&half(&ys), &[1], dt), sizes == [1]),
            _ => {
                let r: Vec<i64> = (0..sizes.len() as i64).rev().collect();
                let p = tensor(&half(&xs), &sizes.iter().rev().copied().collect::<Vec<_>>(), dt)
                    .permute(&r)
                    .unwrap();
                check(&p, &b, p.is_contiguous());
            }
        }
    }
}

/// Runs the kernel `|it| body` in place on copies of `a` (with `b`, or with the copy itself
/// when `b` is `None`): by the dense in-place path (`None` if it does not apply) and by the
/// general path. Each outcome is the returned tensor's, then the written copy's values.
macro_rules! both_in_place {
    ($a:expr, $b:expr, $int_to_float:expr, |$it:ident| $body:expr) => {{
        let (a, b): (&Tensor, Option<&Tensor>) = ($a, $b);
        let run = |dense: bool| -> Option<InPlaceOutcome> {
            let x = a.deep_clone().unwrap();
            let y = b.unwrap_or(&x);
            let r = if dense {
                let d = DenseBinary::try_in_place(&x, y, $int_to_float)?;
                let $it = &d;
                let run = || -> Result<()> { $body };
                run().and_then(|_| d.finish())
            } else {
                binary_general("op", &x, y, Some(&x), $int_to_float, |$it| $body)
            };
            if let Ok(r) = &r {
                assert!(r.is_same(&x), "an in-place op returns its self");
            }
            Some((outcome(r), outcome(Ok(x))))
        };
        (run(true), run(false).unwrap())
    }};
}

/// What an in-place op gave: its result's outcome, then the written tensor's.
type InPlaceOutcome = (Outcome, Outcome);

/// The in-place kernels of this module through both paths, with `b` (or `a` itself).
fn all_in_place(
    a: &Tensor,
    b: Option<&Tensor>,
) -> Vec<(&'static str, Option<InPlaceOutcome>, InPlaceOutcome)> {
    let mut r = Vec::new();
    let mut push = |name, (d, g)| r.push((name, d, g));
    push(
        "add_",
        both_in_place!(a, b, false, |it| add_kernel(it, Scalar::Int(2))),
    );
    push(
        "sub_",
        both_in_place!(a, b, false, |it| {
            sub_check(a, b.unwrap_or(a))?;
            add_kernel(it, -Scalar::Int(1))
        }),
    );
    push(
        "mul_",
        both_in_place!(a, b, false, |it| mul_kernel(it, b.unwrap_or(a))),
    );
    push(
        "div_",
        both_in_place!(a, b, true, |it| div_kernel(
            it,
            Rounding::True,
            b.unwrap_or(a)
        )),
    );
    push(
        "div_floor_",
        both_in_place!(a, b, false, |it| div_kernel(
            it,
            Rounding::Floor,
            b.unwrap_or(a)
        )),
    );
    r
}

fn check_in_place(a: &Tensor, b: Option<&Tensor>, dense: bool) {
    for (name, d, g) in all_in_place(a, b) {
        match d {
            Some(d) => {
                assert!(dense, "{name}: the dense path was taken");
                assert_eq!(d, g, "{name} on {a:?} and {b:?}");
            }
            None => assert!(
                !dense || (name == "div_" && !a.dtype().is_floating_point()),
                "{name}: the dense path was not taken"
            ),
        }
    }
}

#[test]
fn dense_in_place_matches_general() {
    let xs = [3.0, -2.0, 0.0, 1.5, 7.0, -0.5];
    let ys = [2.0, 0.0, -3.0, 4.0, -1.5, 1.0];
    let shapes: [&[i64]; 5] = [&[], &[0], &[1], &[2, 3], &[2, 1, 3]];
    for dt in real_dtypes() {
        for sizes in shapes {
            let (a, b) = (tensor(&xs, sizes, dt), tensor(&ys, sizes, dt));
            check_in_place(&a, Some(&b), true);
            // `x op= x`: the same elements, read before written.
            check_in_place(&a, None, true);
        }
    }
    let big = |v: &[f64]| tensor(v, &[70000], ScalarType::Float);
    check_in_place(&big(&xs), Some(&big(&ys)), true);
    check_in_place(&big(&xs), None, true);
    // Broadcasting, promotion (an error in place), a wrapped number: general only.
    let f = |s: &[i64]| tensor(&xs, s, ScalarType::Float);
    check_in_place(&f(&[2, 3]), Some(&f(&[3])), false);
    check_in_place(
        &f(&[3]),
        Some(&tensor(&ys, &[3], ScalarType::Double)),
        false,
    );
    check_in_place(&f(&[]), Some(&Tensor::wrapped_scalar(2.5)), false);
}

#[test]
fn in_place_partial_overlap_takes_the_general_path() {
    let base = tensor(&[1.0, 2.0, 3.0, 4.0], &[4], ScalarType::Float);
    let (lo, hi) = (base.narrow(0, 0, 3).unwrap(), base.narrow(0, 1, 3).unwrap());
    assert!(DenseBinary::try_in_place(&lo, &hi, false).is_none());
    let err = add_(&lo, &hi, Scalar::Int(1)).unwrap_err().to_string();
    assert!(err.contains("refer to a single memory location"), "{err}");
    // Disjoint parts of one storage are not an overlap for the general path either.
    let (a, b) = (base.narrow(0, 0, 2).unwrap(), base.narrow(0, 2, 2).unwrap());
    assert!(DenseBinary::try_in_place(&a, &b, false).is_none());
    add_(&a, &b, Scalar::Int(1)).unwrap();
    assert_eq!(base.to_vec::<f32>().unwrap(), [4.0, 6.0, 3.0, 4.0]);
}

#[test]
fn public_in_place_ops_write_their_self() {
    let a = tensor(&[1.0, -2.0, 3.5], &[3], ScalarType::Float);
    let b = tensor(&[0.5, 4.0, -1.0], &[3], ScalarType::Float);
    let r = add_(&a, &b, Scalar::Int(2)).unwrap();
    assert!(r.is_same(&a));
    assert_eq!(a.to_vec::<f32>().unwrap(), [2.0, 6.0, 1.5]);
    let r = mul_out(&a, &b, &a).unwrap();
    assert!(r.is_same(&a));
    assert_eq!(a.to_vec::<f32>().unwrap(), [1.0, 24.0, -1.5]);
    sub_(&a, &a, Scalar::Int(1)).unwrap();
    assert_eq!(a.to_vec::<f32>().unwrap(), [0.0, 0.0, 0.0]);
    // A storage being read elsewhere cannot be written: the general path's error.
    let guard = a.data::<f32>().unwrap();
    let dense = DenseBinary::try_in_place(&a, &b, false).unwrap();
    let err = dense
        .for_each2(|x: f32, y: f32| x * y)
        .unwrap_err()
        .to_string();
    let general = mul_out(&a, &b, &a).unwrap_err().to_string();
    assert_eq!(err, general);
    drop(guard);
}

/// Runs `|it| body` on `a` and the wrapped number `b`, out of place and in place (on a
/// contiguous copy of `a`), by the dense scalar paths (where they apply) and by the general path,
/// and compares them; whether the out-of-place dense path applied.
macro_rules! both_scalar {
    ($a:expr, $b:expr, $int_to_float:expr, |$it:ident| $body:expr) => {{
        let (a, b): (&Tensor, &Tensor) = ($a, $b);
        let fresh = scalar_operand(a, b, $int_to_float).unwrap().map(|s| {
            let d = DenseBinary::with_scalar(a, &s).unwrap();
            let $it = &d;
            let run = || -> Result<()> { $body };
            outcome(run().and_then(|_| d.finish()))
        });
        let general = outcome(binary_general("op", a, b, None, $int_to_float, |$it| $body));
        let in_place = |dense: bool| -> Option<InPlaceOutcome> {
            let x = a.deep_clone().unwrap();
            let r = if dense {
                let s = scalar_operand(&x, b, $int_to_float).unwrap()?;
                let d = DenseBinary::in_place_with_scalar(&x, &s);
                let $it = &d;
                let run = || -> Result<()> { $body };
                run().and_then(|_| d.finish())
            } else {
                binary_general("op", &x, b, Some(&x), $int_to_float, |$it| $body)
            };
            Some((outcome(r), outcome(Ok(x))))
        };
        let (dense_in_place, general_in_place) = (in_place(true), in_place(false).unwrap());
        if let Some(d) = &fresh {
            assert_eq!(d, &general, "{a:?} op {b:?}");
        }
        if let Some(d) = &dense_in_place {
            assert_eq!(d, &general_in_place, "{a:?} op= {b:?}");
        }
        fresh.is_some()
    }};
}

/// Every binary kernel of this module with a wrapped number, through both paths; whether the
/// dense path applied (the same for all but true division of integers).
fn scalar_ops(a: &Tensor, b: &Tensor) -> bool {
    let dense = both_scalar!(a, b, false, |it| add_kernel(it, Scalar::Int(1)));
    assert_eq!(
        both_scalar!(a, b, false, |it| add_kernel(it, Scalar::Int(2))),
        dense
    );
    assert_eq!(both_scalar!(a, b, false, |it| mul_kernel(it, b)), dense);
    let div = both_scalar!(a, b, true, |it| div_kernel(it, Rounding::True, b));
    assert!(!div || dense);
    assert_eq!(
        both_scalar!(a, b, false, |it| div_kernel(it, Rounding::Floor, b)),
        dense
    );
    assert_eq!(both_scalar!(a, b, false, |it| pow_kernel(it)), dense);
    assert_eq!(
        both_scalar!(a, b, false, |it| max_min_kernel(it, true)),
        dense
    );
    dense
}

#[test]
fn dense_scalar_matches_general() {
    let xs = [3.0, -2.0, 0.0, 1.5, 7.0, -0.5];
    let numbers = [
        Scalar::Int(3),
        Scalar::Int(-2),
        Scalar::Int(0),
        Scalar::Float(2.5),
        Scalar::Float(-0.5),
        Scalar::Bool(true),
    ];
    let shapes: [&[i64]; 4] = [&[], &[0], &[1], &[2, 3]];
    for dt in real_dtypes() {
        for sizes in shapes {
            let a = tensor(&xs, sizes, dt);
            for &n in &numbers {
                let dense = scalar_ops(&a, &Tensor::wrapped_scalar(n));
                // A number promotes only a tensor of a lower category (PyTorch's rule).
                let promotes = match n {
                    Scalar::Float(_) => !dt.is_floating_point(),
                    Scalar::Int(_) => dt == ScalarType::Bool,
                    Scalar::Bool(_) => false,
                };
                assert_eq!(dense, !promotes, "{dt:?} with {n:?}");
            }
        }
    }
    // Parallel chunks.
    let big = tensor(&xs, &[70000], ScalarType::Float);
    assert!(scalar_ops(
        &big,
        &Tensor::wrapped_scalar(Scalar::Float(0.25))
    ));
    // A zero-dim tensor that is not a wrapped number, a strided tensor: general only.
    let f = tensor(&xs, &[3], ScalarType::Float);
    assert!(!scalar_ops(&f, &tensor(&[2.0], &[], ScalarType::Float)));
    let t = tensor(&xs, &[3, 2], ScalarType::Float).t().unwrap();
    assert!(!scalar_ops(&t, &Tensor::wrapped_scalar(2.0)));
}

#[test]
fn public_scalar_ops_take_the_dense_path() {
    let a = tensor(&[1.0, -2.0, 3.5], &[3], ScalarType::Float);
    let r = mul_scalar(&a, Scalar::Float(2.0)).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [2.0, -4.0, 7.0]);
    assert_eq!((r.dtype(), r.sizes()), (ScalarType::Float, &[3][..]));
    let r = add_scalar_(&a, Scalar::Int(1), Scalar::Int(2)).unwrap();
    assert!(r.is_same(&a));
    assert_eq!(a.to_vec::<f32>().unwrap(), [3.0, 0.0, 5.5]);
    // An integer tensor in place with a float number: PyTorch's cast error, from the general path.
    let i = tensor(&[1.0, 2.0], &[2], ScalarType::Long);
    assert_eq!(
        mul_scalar_(&i, Scalar::Float(0.5)).unwrap_err().to_string(),
        "result type Float can't be cast to the desired output type Long"
    );
}

use super::*;
use switchboard_tensor::Element;
use switchboard_tensor::{Device, DimVec, RawOps};

#[test]
fn coalesces_contiguous_and_transposed() {
    let g = coalesce(
        &[2, 3, 4],
        &[DimVec::from_slice(&[12, 4, 1])],
        &reorder_dims(&[2, 3, 4], &[&[12, 4, 1]]),
    );
    assert_eq!(&g.sizes[..], &[24]);
    // A transposed operand keeps two dims; perm puts its stride-1 dim first.
    let st = [DimVec::from_slice(&[1, 3])];
    let perm = reorder_dims(&[3, 2], &[&st[0]]);
    assert_eq!(&perm[..], &[0, 1]);
    let g = coalesce(&[3, 2], &st, &perm);
    assert_eq!(&g.sizes[..], &[6]);
    assert_eq!(&g.strides[0][..], &[1]);
}

#[test]
fn output_follows_input_layout() {
    let a = Tensor::arange(0, 6, 1, Some(ScalarType::Float))
        .unwrap()
        .view(&[2, 3])
        .unwrap()
        .t()
        .unwrap();
    let iter = IterConfig::new("neg").input(&a).build().unwrap();
    iter.for_each1(|x: f32| -x).unwrap();
    let out = iter.finish().unwrap();
    assert_eq!(out.strides(), &[1, 3]);
    assert_eq!(
        out.to_vec::<f32>().unwrap(),
        [-0.0, -3.0, -1.0, -4.0, -2.0, -5.0]
    );
}

#[test]
fn overlap_errors() {
    let t = Tensor::arange(0, 5, 1, Some(ScalarType::Float)).unwrap();
    let a = t.narrow(0, 0, 4).unwrap();
    let b = t.narrow(0, 1, 4).unwrap();
    let err = IterConfig::new("add").out(&b).input(&a).input(&a).build();
    assert!(err
        .err()
        .unwrap()
        .to_string()
        .contains("some elements of the input"));
    let e = Tensor::zeros(&[1], ScalarType::Float)
        .unwrap()
        .expand(&[3])
        .unwrap();
    let err = IterConfig::new("add")
        .out(&e)
        .input(&a.narrow(0, 0, 3).unwrap())
        .build();
    assert!(err
        .err()
        .unwrap()
        .to_string()
        .contains("more than one element"));
}

#[test]
fn large_loops_stream_and_match() {
    // 3 x 4 B x 6M = 72 MB moved: above STREAM_BYTES, parallel, streamed output.
    let n = 6_000_000usize;
    let a = Tensor::from_vec((0..n).map(|i| (i % 1000) as f32).collect(), &[n as i64]);
    let a = a.unwrap();
    let iter = IterConfig::new("add").input(&a).input(&a).build().unwrap();
    assert!(iter.numel() * 12 >= STREAM_BYTES);
    iter.for_each2(|x: f32, y: f32| x + y).unwrap();
    let out = iter.finish().unwrap().to_vec::<f32>().unwrap();
    assert!(out
        .iter()
        .enumerate()
        .all(|(i, v)| *v == 2.0 * (i % 1000) as f32));
}

#[test]
fn meta_propagates_metadata_only() {
    let m = Tensor::zeros_on(&[2, 1], ScalarType::Int, Device::META).unwrap();
    let s = Tensor::scalar_tensor(1.5, ScalarType::Double);
    let iter = IterConfig::new("add").input(&m).input(&s).build().unwrap();
    assert!(!iter.computes());
    let out = iter.finish().unwrap();
    assert_eq!(out.dtype(), ScalarType::Double);
    assert!(out.is_meta());
}

/// A two-input config over `ins` (into `out` when given).
fn config<'a>(ins: &[&'a Tensor], out: Option<&'a Tensor>) -> IterConfig<'a> {
    let mut c = IterConfig::new("add").maybe_out(out);
    for t in ins {
        c = c.input(t);
    }
    c
}

type Outcome = (Vec<i64>, Vec<i64>, ScalarType, Vec<f64>, Vec<f64>);

/// Builds `a + b` (into `out`) by the fast path or the general path, runs it and returns the
/// result's sizes, strides, dtype and values, and `a`'s values after (for in-place).
fn run_add(
    make: &dyn Fn() -> (Tensor, Tensor, Option<Tensor>),
    fast: bool,
) -> Result<Option<Outcome>> {
    let (a, b, out) = make();
    let iter = if fast {
        match config(&[&a, &b], out.as_ref()).try_fast_path()? {
            Some(iter) => iter,
            None => return Ok(None),
        }
    } else {
        config(&[&a, &b], out.as_ref()).build_general()?
    };
    if iter.computes() {
        crate::dispatch_all_types_and_bool!(iter.common_dtype(), "add", T => {
            iter.for_each2(|x: T, y: T| T::from_f64(x.to_f64() + y.to_f64()))
        })?;
    }
    let r = iter.finish()?;
    let values = |t: &Tensor| {
        if t.has_data() {
            t.to_vec_as::<f64>().unwrap()
        } else {
            vec![]
        }
    };
    Ok(Some((
        r.sizes().to_vec(),
        r.strides().to_vec(),
        r.dtype(),
        values(&r),
        values(&a),
    )))
}

/// Checks whether the fast path applies to `make()`'s operands, and that it gives what the
/// general path gives (or the same error).
fn same_as_general(make: impl Fn() -> (Tensor, Tensor, Option<Tensor>), fast: bool) {
    let f = run_add(&make, true);
    let g = run_add(&make, false);
    match (f, g) {
        (Err(fe), Err(ge)) => assert_eq!(fe.to_string(), ge.to_string()),
        (Ok(Some(f)), Ok(Some(g))) => {
            assert!(fast, "the fast path was taken");
            assert_eq!(f, g);
        }
        (Ok(None), _) => assert!(!fast, "the fast path was not taken"),
        (f, g) => panic!("fast {f:?} vs general {g:?}"),
    }
}

fn floats(n: i64, sizes: &[i64]) -> Tensor {
    Tensor::arange(0, n, 1, Some(ScalarType::Float))
        .unwrap()
        .view(sizes)
        .unwrap()
}

#[test]
fn fast_path_matches_general_path() {
    let f = |sizes: &'static [i64]| {
        move || {
            let n = sizes.iter().product();
            (floats(n, sizes), floats(n, sizes), None)
        }
    };
    same_as_general(f(&[1]), true);
    same_as_general(f(&[2, 3]), true);
    same_as_general(f(&[]), true);
    same_as_general(f(&[0, 3]), true);
    same_as_general(f(&[2, 1, 3]), true);
    same_as_general(f(&[40000]), true);
    // Long inputs, a Bool pair, a size-1 dim with an odd stride (still contiguous).
    same_as_general(
        || {
            (
                Tensor::arange(0, 6, 1, None).unwrap(),
                Tensor::arange(1, 7, 1, None).unwrap(),
                None,
            )
        },
        true,
    );
    same_as_general(
        || {
            (
                Tensor::ones(&[3], ScalarType::Bool).unwrap(),
                Tensor::zeros(&[3], ScalarType::Bool).unwrap(),
                None,
            )
        },
        true,
    );
    same_as_general(
        || {
            let a = floats(6, &[2, 1, 3])
                .as_strided(&[2, 1, 3], &[3, 7, 1], 0)
                .unwrap();
            (a.clone(), a, None)
        },
        true,
    );
    // Out of the fast path: promotion, broadcasting, strided, wrapped numbers, meta.
    same_as_general(
        || {
            (
                floats(3, &[3]),
                Tensor::arange(0, 3, 1, None).unwrap(),
                None,
            )
        },
        false,
    );
    same_as_general(|| (floats(6, &[2, 3]), floats(3, &[3]), None), false);
    same_as_general(
        || (floats(6, &[2, 3]).t().unwrap(), floats(6, &[3, 2]), None),
        false,
    );
    same_as_general(
        || (floats(1, &[]), Tensor::wrapped_scalar(2.5), None),
        false,
    );
    same_as_general(
        || {
            let m = Tensor::empty_on(&[2], ScalarType::Float, Device::META).unwrap();
            (m.clone(), m, None)
        },
        false,
    );
}

#[test]
fn fast_path_with_out_matches_general_path() {
    let out = |sizes: &[i64], dt| Some(Tensor::full(sizes, 7, dt).unwrap());
    same_as_general(
        || {
            (
                floats(6, &[2, 3]),
                floats(6, &[2, 3]),
                out(&[2, 3], ScalarType::Float),
            )
        },
        true,
    );
    // In place (out is an input), and an out aliasing an input without being it.
    same_as_general(
        || {
            let a = floats(6, &[2, 3]);
            (a.clone(), floats(6, &[2, 3]), Some(a))
        },
        true,
    );
    same_as_general(
        || {
            let a = floats(6, &[2, 3]);
            let v = a.view(&[2, 3]).unwrap();
            (a, floats(6, &[2, 3]), Some(v))
        },
        true,
    );
    // Partial overlap and an empty out overlapping itself: the same errors.
    same_as_general(
        || {
            let t = floats(5, &[5]);
            (
                t.narrow(0, 0, 4).unwrap(),
                floats(4, &[4]),
                Some(t.narrow(0, 1, 4).unwrap()),
            )
        },
        true,
    );
    same_as_general(
        || {
            let e = Tensor::zeros(&[1], ScalarType::Float)
                .unwrap()
                .as_strided(&[0, 3], &[0, 0], 0)
                .unwrap();
            (floats(0, &[0, 3]), floats(0, &[0, 3]), Some(e))
        },
        true,
    );
    // Other dtype, other shape, strided out: general path.
    same_as_general(
        || {
            (
                floats(3, &[3]),
                floats(3, &[3]),
                out(&[3], ScalarType::Double),
            )
        },
        false,
    );
    same_as_general(
        || {
            (
                floats(3, &[3]),
                floats(3, &[3]),
                out(&[1, 3], ScalarType::Float),
            )
        },
        false,
    );
    same_as_general(
        || {
            (
                floats(4, &[2, 2]),
                floats(4, &[2, 2]),
                Some(floats(4, &[2, 2]).t().unwrap()),
            )
        },
        false,
    );
}

#[test]
fn unwritten_fresh_outputs_are_zeroed() {
    for n in [1i64, 100] {
        let a = floats(n, &[n]);
        let iter = IterConfig::new("add").input(&a).input(&a).build().unwrap();
        // A loop with the wrong element types fails before writing anything.
        assert!(iter.for_each2(|x: f64, y: f64| x + y).is_err());
        let out = iter.finish().unwrap();
        assert!(out.to_vec::<f32>().unwrap().iter().all(|v| *v == 0.0));
    }
    // Comparisons write a fresh Bool output.
    let (a, b) = (
        floats(3, &[3]),
        Tensor::full(&[3], 1.0, ScalarType::Float).unwrap(),
    );
    let iter = IterConfig::new("lt")
        .input(&a)
        .input(&b)
        .out_dtype(ScalarType::Bool)
        .build()
        .unwrap();
    iter.for_each2(|x: f32, y: f32| x < y).unwrap();
    assert_eq!(
        iter.finish().unwrap().to_vec::<bool>().unwrap(),
        [true, false, false]
    );
}

std::thread_local! {
    static LEAKED: std::cell::Cell<Option<&'static TensorIter>> = const { std::cell::Cell::new(None) };
}

#[test]
fn a_loop_cannot_start_inside_another() {
    // The element closure reaches the iterator through a thread-local (Note [Private
    // outputs]): the nested loop must not write the private output the outer one writes.
    let a = floats(8, &[8]);
    let iter: &'static TensorIter = Box::leak(Box::new(
        IterConfig::new("add").input(&a).input(&a).build().unwrap(),
    ));
    LEAKED.with(|c| c.set(Some(iter)));
    let nested = std::sync::atomic::AtomicUsize::new(0);
    iter.for_each2(|x: f32, y: f32| {
        let inner = LEAKED.with(|c| c.get()).unwrap();
        assert!(inner.for_each2(|x: f32, y: f32| x * y).is_err());
        nested.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        x + y
    })
    .unwrap();
    assert_eq!(nested.into_inner(), 8);
    // Loops run again once the first one is over, with a given output too.
    iter.for_each2(|x: f32, y: f32| x * y).unwrap();
    let o = floats(8, &[8]);
    let given = IterConfig::new("add")
        .out(&o)
        .input(&a)
        .input(&a)
        .build()
        .unwrap();
    given.for_each2(|x: f32, y: f32| x - y).unwrap();
    assert!(o.to_vec::<f32>().unwrap().iter().all(|v| *v == 0.0));
    LEAKED.with(|c| c.set(None));
}

//! Property tests: views agree with references computed by index arithmetic, reshape/view
//! round-trips, broadcasting symmetry, strided copies.

use proptest::prelude::*;
use switchboard_tensor::RawOps;
use switchboard_tensor::{
    compute_view_stride, copy_strided, infer_size, ScalarType, StridedOffsets, Tensor,
};

/// A contiguous tensor holding 0..numel.
fn iota(sizes: &[i64]) -> Tensor {
    let n: i64 = sizes.iter().product();
    Tensor::from_vec((0..n).collect::<Vec<i64>>(), sizes).unwrap()
}

/// All multi-indices of `sizes` in row-major order.
fn indices(sizes: &[i64]) -> Vec<Vec<i64>> {
    let mut out = vec![vec![]];
    for &s in sizes {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                (0..s).map(move |i| {
                    let mut p = prefix.clone();
                    p.push(i);
                    p
                })
            })
            .collect();
    }
    out
}

/// Row-major flat position of `idx` in `sizes`.
fn flat(idx: &[i64], sizes: &[i64]) -> i64 {
    idx.iter().zip(sizes).fold(0, |acc, (i, s)| acc * s + i)
}

fn shape() -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(0i64..5, 0..5)
}

fn nonempty_shape() -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(1i64..5, 1..5)
}

proptest! {
    #[test]
    fn transpose_matches_reference(sizes in nonempty_shape(), a in 0usize..4, b in 0usize..4) {
        let (a, b) = (a % sizes.len(), b % sizes.len());
        let t = iota(&sizes).transpose(a as i64, b as i64).unwrap();
        let mut tsizes = sizes.clone();
        tsizes.swap(a, b);
        prop_assert_eq!(t.sizes(), &tsizes[..]);
        let expected: Vec<i64> = indices(&tsizes)
            .into_iter()
            .map(|mut i| { i.swap(a, b); flat(&i, &sizes) })
            .collect();
        prop_assert_eq!(t.to_vec::<i64>().unwrap(), expected.clone());
        prop_assert_eq!(t.contiguous().unwrap().to_vec::<i64>().unwrap(), expected);
    }

    #[test]
    fn permute_matches_reference(sizes in nonempty_shape(), seed in any::<u64>()) {
        let n = sizes.len();
        let mut perm: Vec<usize> = (0..n).collect();
        let mut s = seed;
        for i in (1..n).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            perm.swap(i, (s >> 33) as usize % (i + 1));
        }
        let dims: Vec<i64> = perm.iter().map(|&d| d as i64).collect();
        let t = iota(&sizes).permute(&dims).unwrap();
        let psizes: Vec<i64> = perm.iter().map(|&d| sizes[d]).collect();
        let expected: Vec<i64> = indices(&psizes)
            .into_iter()
            .map(|i| {
                let mut orig = vec![0; n];
                for (k, &d) in perm.iter().enumerate() { orig[d] = i[k]; }
                flat(&orig, &sizes)
            })
            .collect();
        prop_assert_eq!(t.to_vec::<i64>().unwrap(), expected);
    }

    #[test]
    fn select_and_slice_match_reference(
        sizes in nonempty_shape(), dim in 0usize..4, start in -6i64..6, end in -6i64..8, step in 1i64..4,
    ) {
        let dim = dim % sizes.len();
        let base = iota(&sizes);
        // slice
        let s = base.slice(dim as i64, Some(start), Some(end), step).unwrap();
        let size = sizes[dim];
        let clamp = |v: i64| if v < 0 { (v + size).max(0) } else { v.min(size) };
        let (lo, hi) = (clamp(start), clamp(end).max(clamp(start)));
        let picked: Vec<i64> = (lo..hi).step_by(step as usize).collect();
        let mut ssizes = sizes.clone();
        ssizes[dim] = picked.len() as i64;
        prop_assert_eq!(s.sizes(), &ssizes[..]);
        let expected: Vec<i64> = indices(&ssizes)
            .into_iter()
            .map(|mut i| { i[dim] = picked[i[dim] as usize]; flat(&i, &sizes) })
            .collect();
        prop_assert_eq!(s.to_vec::<i64>().unwrap(), expected);
        // select
        let index = start.rem_euclid(size);
        let sel = base.select(dim as i64, index).unwrap();
        let mut rsizes = sizes.clone();
        rsizes.remove(dim);
        let expected: Vec<i64> = indices(&rsizes)
            .into_iter()
            .map(|mut i| { i.insert(dim, index); flat(&i, &sizes) })
            .collect();
        prop_assert_eq!(sel.to_vec::<i64>().unwrap(), expected);
    }

    #[test]
    fn reshape_round_trips(sizes in shape(), a in 0usize..4, b in 0usize..4) {
        let base = iota(&sizes);
        let t = if sizes.is_empty() {
            base
        } else {
            base.transpose((a % sizes.len()) as i64, (b % sizes.len()) as i64).unwrap()
        };
        let values = t.to_vec::<i64>().unwrap();
        let flat_t = t.reshape(&[-1]).unwrap();
        prop_assert_eq!(flat_t.to_vec::<i64>().unwrap(), values.clone());
        let back = flat_t.reshape(t.sizes()).unwrap();
        prop_assert_eq!(back.sizes(), t.sizes());
        prop_assert_eq!(back.to_vec::<i64>().unwrap(), values.clone());
        // view works exactly when compute_view_stride finds strides, and agrees with reshape.
        let n = t.numel();
        match compute_view_stride(t.sizes(), t.strides(), &[n]) {
            Some(_) => {
                let v = t.view(&[n]).unwrap();
                prop_assert!(v.is_alias_of(&t));
                prop_assert_eq!(v.to_vec::<i64>().unwrap(), values);
            }
            None => prop_assert!(t.view(&[n]).is_err()),
        }
    }

    #[test]
    fn views_into_split_dims(sizes in nonempty_shape(), d in 0usize..4) {
        // Splitting one dimension of a contiguous tensor into (1, size) is always a view.
        let d = d % sizes.len();
        let t = iota(&sizes);
        let mut split = sizes.clone();
        split.insert(d, 1);
        let v = t.view(&split).unwrap();
        prop_assert_eq!(v.to_vec::<i64>().unwrap(), t.to_vec::<i64>().unwrap());
        let squeezed = v.squeeze_dim(d as i64).unwrap();
        prop_assert_eq!(squeezed.sizes(), t.sizes());
        let unsqueezed = t.unsqueeze(d as i64).unwrap();
        prop_assert_eq!(unsqueezed.strides(), v.strides());
    }

    #[test]
    fn broadcasting_is_symmetric(a in shape(), b in shape()) {
        let ab = infer_size(&a, &b);
        let ba = infer_size(&b, &a);
        prop_assert_eq!(ab.is_ok(), ba.is_ok());
        if let (Ok(ab), Ok(ba)) = (ab, ba) {
            prop_assert_eq!(&ab, &ba);
            // Expanding to the result gives each element of the source at the broadcast index.
            let t = iota(&a).expand(&ab).unwrap();
            let off = ab.len() - a.len();
            let expected: Vec<i64> = indices(&ab)
                .into_iter()
                .map(|i| {
                    let src: Vec<i64> = i[off..].iter().zip(&a).map(|(x, s)| if *s == 1 { 0 } else { *x }).collect();
                    flat(&src, &a)
                })
                .collect();
            prop_assert_eq!(t.to_vec::<i64>().unwrap(), expected);
        }
    }

    #[test]
    fn as_strided_stays_in_bounds(
        sizes in prop::collection::vec(0i64..4, 0..4),
        strides in prop::collection::vec(0i64..6, 4),
        offset in 0i64..10,
        n in 1i64..40,
    ) {
        let base = iota(&[n]);
        let strides = &strides[..sizes.len()];
        match base.as_strided(&sizes, strides, offset) {
            Ok(v) => {
                let expected: Vec<i64> = StridedOffsets::new(&sizes, strides).map(|o| o + offset).collect();
                prop_assert!(expected.iter().all(|&o| o < n));
                prop_assert_eq!(v.to_vec::<i64>().unwrap(), expected);
            }
            Err(_) => {
                let numel: i64 = sizes.iter().product();
                let last = offset + sizes.iter().zip(strides).map(|(s, st)| (s - 1) * st).sum::<i64>();
                prop_assert!(numel > 0 && last >= n);
            }
        }
    }

    #[test]
    fn copy_into_permuted_destination(sizes in nonempty_shape()) {
        let src = iota(&sizes);
        let n = sizes.len() as i64;
        let rev: Vec<i64> = (0..n).rev().collect();
        let rsizes: Vec<i64> = sizes.iter().rev().copied().collect();
        let dst = Tensor::zeros(&rsizes, ScalarType::Double).unwrap().permute(&rev).unwrap();
        copy_strided(&src, &dst).unwrap();
        prop_assert_eq!(dst.to_vec_as::<i64>().unwrap(), src.to_vec::<i64>().unwrap());
    }

    #[test]
    fn printing_never_fails(values in prop::collection::vec(prop_oneof![
        any::<f32>(), Just(f32::NAN), Just(f32::INFINITY), Just(0.0f32), -1e3f32..1e3
    ], 0..40)) {
        let n = values.len() as i64;
        let t = Tensor::from_vec(values, &[n]).unwrap();
        let s = t.to_string();
        prop_assert!(s.starts_with("tensor(") && s.ends_with(')'));
    }
}

fn interesting() -> impl Strategy<Value = i64> {
    prop_oneof![
        -6i64..7,
        Just(i64::MIN),
        Just(i64::MAX),
        Just(i64::MAX / 2),
        Just(-(1i64 << 40)),
        Just(1i64 << 40),
    ]
}

proptest! {
    /// No public view or constructor panics, whatever the arguments: bad input is an error.
    #[test]
    fn bad_arguments_are_errors_not_panics(
        sizes in prop::collection::vec(prop_oneof![0i64..4, interesting()], 0..4),
        strides in prop::collection::vec(interesting(), 0..5),
        args in prop::collection::vec(interesting(), 4),
        op in 0usize..16,
    ) {
        let base = iota(&[24]);
        let t = base
            .as_strided(&sizes, &strides, args[3].rem_euclid(30))
            .or_else(|_| Tensor::zeros(&sizes, ScalarType::Float))
            .unwrap_or(base);
        let (a, b, c) = (args[0], args[1], args[2]);
        // Keep requests that would succeed small: this test is about errors, not allocations.
        let small = |n: i128| n.abs() <= 1 << 20;
        if op == 12 && c != 0 && !small((b as i128 - a as i128) / c as i128) {
            return Ok(());
        }
        if op == 14 && args[0] >= 0 && args[1] >= 0 && !small(args[0] as i128 * args[1] as i128) {
            return Ok(());
        }
        let r = match op {
            0 => t.view(&args[..2]),
            1 => t.reshape(&args[..3]),
            2 => t.transpose(a, b),
            3 => t.permute(&args[..t.dim().min(4)]),
            4 => t.expand(&args[..3]),
            5 => t.squeeze_dim(a),
            6 => t.unsqueeze(a),
            7 => t.select(a, b),
            8 => t.slice(a, Some(b), Some(c), args[3]),
            9 => t.narrow(a, b, c),
            10 => t.flatten(a, b),
            11 => t.as_strided(&args[..2], &args[2..], a),
            12 => Tensor::arange(a, b, c, None),
            13 => Tensor::empty_strided(&args[..2], &args[2..], ScalarType::Float, switchboard_tensor::Device::META),
            14 => Tensor::full(&args[..2], 1.0, ScalarType::Half),
            _ => t.contiguous(),
        };
        if let Ok(v) = r {
            // Anything built is in bounds: reading it back works.
            if v.has_data() && v.numel() < 100_000 {
                prop_assert_eq!(v.to_vec_as::<f64>().unwrap().len() as i64, v.numel());
                let _ = v.to_string();
            }
        }
        let _ = StridedOffsets::new(&args[..2], &args[2..]).take(10).count();
    }
}

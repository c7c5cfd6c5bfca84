//! Values recorded from torch 2.15 (`torch.ops.aten._embedding_bag` and its backwards).

use switchboard_tensor::{RawOps, Tensor};

use crate::nn_testutil::assert_close;
use crate::{_embedding_bag, _embedding_bag_backward, _embedding_bag_per_sample_weights_backward};

fn weight() -> Tensor {
    Tensor::from_vec((0..15).map(f64::from).collect::<Vec<_>>(), &[5, 3]).unwrap()
}

fn longs(v: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len() as i64]).unwrap()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_vec_as::<f64>().unwrap()
}

/// Bags `[0, 2]`, `[]`, `[4, 1, 3]` of `arange(15).reshape(5, 3)`.
fn bag(mode: i64, padding_idx: i64) -> (Tensor, Tensor, Tensor, Tensor) {
    let (i, o) = (longs(&[0, 2, 4, 1, 3]), longs(&[0, 2, 2]));
    _embedding_bag(
        &weight(),
        &i,
        &o,
        false,
        mode,
        false,
        None,
        false,
        padding_idx,
    )
    .unwrap()
}

#[test]
fn modes_and_outputs_match_pytorch() {
    let (out, o2b, size, max) = bag(0, -1);
    assert_eq!(f64s(&out), [6., 8., 10., 0., 0., 0., 24., 27., 30.]);
    // float64 weights are off PyTorch's fast path: offset2bag is filled.
    assert_eq!(f64s(&o2b), [0., 0., 2., 2., 2.]);
    assert_eq!((f64s(&size), f64s(&max)), (vec![0.; 3], vec![0.; 3]));
    let (out, _, size, max) = bag(1, -1);
    assert_eq!(f64s(&out), [3., 4., 5., 0., 0., 0., 8., 9., 10.]);
    assert_eq!(
        (f64s(&size), f64s(&max)),
        (vec![2., 0., 3.], vec![2., 0., 3.])
    );
    let (out, _, size, _) = bag(1, 2);
    assert_eq!(f64s(&out), [0., 1., 2., 0., 0., 0., 8., 9., 10.]);
    assert_eq!(f64s(&size), [1., 0., 3.]);
    let (out, _, _, max) = bag(2, -1);
    assert_eq!(f64s(&out), [6., 7., 8., 0., 0., 0., 12., 13., 14.]);
    assert_eq!(f64s(&max), [2., 2., 2., 0., 0., 0., 4., 4., 4.]);
    let (out, _, size, max) = bag(2, 2);
    assert_eq!(f64s(&out), [0., 1., 2., 0., 0., 0., 12., 13., 14.]);
    assert_eq!(f64s(&size), [1., 0., 3.]);
    assert_eq!(f64s(&max), [0., 0., 0., 0., 0., 0., 4., 4., 4.]);
}

#[test]
fn float_sum_skips_offset2bag_and_names_bad_indices() {
    let w = Tensor::from_vec((0..15).map(|v| v as f32).collect::<Vec<_>>(), &[5, 3]).unwrap();
    let (i, o) = (longs(&[0, 2, 4, 1, 3]), longs(&[0, 2, 2]));
    let r = _embedding_bag(&w, &i, &o, false, 0, false, None, false, -1).unwrap();
    assert_eq!(r.1.numel(), 0);
    // Off the fast path (rows not unit-strided), PyTorch fills offset2bag.
    let wt = Tensor::from_vec((0..15).map(|v| v as f32).collect::<Vec<_>>(), &[3, 5])
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    let r = _embedding_bag(&wt, &i, &o, false, 0, false, None, false, -1).unwrap();
    assert_eq!(f64s(&r.1), [0., 0., 2., 2., 2.]);
    assert_eq!(f64s(&r.0), [2., 12., 22., 0., 0., 0., 8., 23., 38.]);
    let bad = longs(&[0, 5]);
    let e = _embedding_bag(&w, &bad, &longs(&[0]), false, 0, false, None, false, -1);
    assert_eq!(
        e.unwrap_err().to_string(),
        "Index 1 of input takes value 5 which is not in the valid range [0, 5)"
    );
    let bad = longs(&[0, -1]);
    let e = _embedding_bag(&w, &bad, &longs(&[0]), false, 2, false, None, false, -1);
    assert_eq!(
        e.unwrap_err().to_string(),
        "embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be -1"
    );
    let e = _embedding_bag(&w, &i, &longs(&[0, 3, 2]), false, 0, false, None, false, -1);
    assert!(e.unwrap_err().to_string().contains("non-decreasing"));
}

#[test]
fn backwards_match_pytorch() {
    let w = weight();
    let (i, o) = (longs(&[0, 2, 4, 1, 3, 4]), longs(&[0, 2, 2]));
    let g = Tensor::from_vec((1..10).map(f64::from).collect::<Vec<_>>(), &[3, 3]).unwrap();
    #[rustfmt::skip]
    let cases: [(i64, i64, bool, [f64; 15]); 4] = [
        (0, -1, false, [1., 2., 3., 7., 8., 9., 1., 2., 3., 7., 8., 9., 14., 16., 18.]),
        (1, 4, false, [0.5, 1., 1.5, 3.5, 4., 4.5, 0.5, 1., 1.5, 3.5, 4., 4.5, 0., 0., 0.]),
        (1, -1, true, [0.5, 1., 1.5, 1.75, 2., 2.25, 0.5, 1., 1.5, 1.75, 2., 2.25, 1.75, 2., 2.25]),
        (2, -1, false, [0., 0., 0., 0., 0., 0., 1., 2., 3., 0., 0., 0., 7., 8., 9.]),
    ];
    for (mode, pad, freq, want) in cases {
        let (_, o2b, size, max) =
            _embedding_bag(&w, &i, &o, false, mode, false, None, false, pad).unwrap();
        let gw = _embedding_bag_backward(
            &g, &i, &o, &o2b, &size, &max, 5, freq, mode, false, None, pad,
        )
        .unwrap();
        assert_close(&f64s(&gw), &want, 1e-12);
    }
    let psw = Tensor::from_vec(vec![0.5f64, -1.0, 2.0, 1.0, 3.0, 0.25], &[6]).unwrap();
    let (out, o2b, size, max) =
        _embedding_bag(&w, &i, &o, false, 0, false, Some(&psw), false, -1).unwrap();
    assert_close(
        &f64s(&out),
        &[-6., -6.5, -7., 0., 0., 0., 57., 63.25, 69.5],
        1e-12,
    );
    let gw = _embedding_bag_backward(
        &g,
        &i,
        &o,
        &o2b,
        &size,
        &max,
        5,
        false,
        0,
        false,
        Some(&psw),
        -1,
    )
    .unwrap();
    #[rustfmt::skip]
    let want = [0.5, 1., 1.5, 7., 8., 9., -1., -2., -3., 21., 24., 27., 15.75, 18., 20.25];
    assert_close(&f64s(&gw), &want, 1e-12);
    let gp = _embedding_bag_per_sample_weights_backward(&g, &w, &i, &o, &o2b, 0, 4).unwrap();
    assert_close(&f64s(&gp), &[8., 44., 0., 98., 242., 0.], 1e-12);
    // An empty offset2bag (the forward's fast path) is recomputed from the offsets.
    let empty = longs(&[]);
    let gp = _embedding_bag_per_sample_weights_backward(&g, &w, &i, &o, &empty, 0, -1).unwrap();
    assert_close(&f64s(&gp), &[8., 44., 314., 98., 242., 314.], 1e-12);
}

//! 3-d max pooling against values recorded from PyTorch 2.15 (`torch.ops.aten` on the same
//! input): padding, ceil mode, dilation, and the indices of ties (the first maximum wins).

use switchboard_tensor::Tensor;

use super::*;

/// `((i * 7) % 11) - 5` for `i` in `0..60`, as a `[1, 1, 3, 4, 5]` float tensor (many ties).
fn grid() -> Tensor {
    let v = (0..60).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    Tensor::from_vec(v, &[1, 1, 3, 4, 5]).unwrap()
}

#[test]
fn values_and_indices_as_pytorch() {
    let (v, i) =
        max_pool3d_with_indices(&grid(), &[2, 2, 2], &[1, 2, 2], &[1, 1, 0], &[1], true).unwrap();
    assert_eq!(v.sizes(), [1, 1, 4, 3, 3]);
    assert_eq!(
        v.to_vec::<f32>().unwrap()[..12],
        [2.0, 5.0, 1.0, 4.0, 2.0, 5.0, 1.0, 4.0, -4.0, 3.0, 5.0, 1.0]
    );
    assert_eq!(
        i.to_vec::<i64>().unwrap(),
        [
            1, 3, 4, 6, 12, 14, 15, 17, 19, 20, 3, 4, 25, 28, 14, 36, 17, 39, 20, 42, 24, 25, 47,
            34, 36, 58, 39, 40, 42, 44, 50, 47, 54, 56, 58, 59
        ]
    );
    let (v, i) = max_pool3d_with_indices(&grid(), &[2], &[1], &[0], &[2], false).unwrap();
    assert_eq!(v.sizes(), [1, 1, 1, 2, 3]);
    assert_eq!(v.to_vec::<f32>().unwrap(), [4.0, 5.0, 5.0, 5.0, 5.0, 5.0]);
    assert_eq!(i.to_vec::<i64>().unwrap(), [50, 3, 14, 47, 58, 47]);
}

#[test]
fn backward_refuses_indices_outside_the_plane() {
    let x = Tensor::zeros(&[1, 1, 2, 2, 2], ScalarType::Float).unwrap();
    let go = Tensor::ones(&[1, 1, 1, 1, 1], ScalarType::Float).unwrap();
    let idx = Tensor::from_vec(vec![8i64], &[1, 1, 1, 1, 1]).unwrap();
    let err = max_pool3d_with_indices_backward(&go, &x, &[2], &[2], &[0], &[1], false, &idx)
        .unwrap_err()
        .to_string();
    assert!(err.contains("index out of range [0, 8)"), "{err}");
}

/// A window wholly in the padding (its dilation steps over the input) gives PyTorch's -inf and
/// the index of its first position past the padding, in one dim or all.
#[test]
fn windows_in_the_padding_as_pytorch() {
    let x = Tensor::from_vec((0..8).map(|v| v as f32).collect(), &[1, 1, 2, 2, 2]).unwrap();
    let (v, i) = max_pool3d_with_indices(&x, &[2], &[1], &[1], &[3], false).unwrap();
    assert_eq!(v.to_vec::<f32>().unwrap(), [f32::NEG_INFINITY]);
    assert_eq!(i.to_vec::<i64>().unwrap(), [14]);
    let x = Tensor::from_vec((0..32).map(|v| v as f32).collect(), &[1, 1, 2, 4, 4]).unwrap();
    let (v, i) =
        max_pool3d_with_indices(&x, &[2, 1, 1], &[1], &[1, 0, 0], &[3, 1, 1], false).unwrap();
    assert_eq!(v.sizes(), [1, 1, 1, 4, 4]);
    assert!(v
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .all(|&m| m == f32::NEG_INFINITY));
    assert_eq!(i.to_vec::<i64>().unwrap(), (32..48).collect::<Vec<i64>>());
}

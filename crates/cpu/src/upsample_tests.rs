//! Upsampling against values recorded from PyTorch 2.15 (`torch.ops.aten` on the same inputs):
//! nearest and bilinear, with and without scales, align_corners, and the backwards.

use switchboard_tensor::Tensor;

use super::*;

/// `arange(len)` shaped `shape`.
fn ramp(shape: &[i64]) -> Tensor {
    let n: i64 = shape.iter().product();
    Tensor::from_vec((0..n).map(|v| v as f32).collect(), shape).unwrap()
}

fn rounded(t: &Tensor) -> Vec<f32> {
    let v = t.to_vec::<f32>().unwrap();
    v.iter().map(|x| (x * 1e4).round() / 1e4).collect()
}

/// Asserts `got` within 1e-4 of PyTorch's (4-decimal) values.
fn assert_near(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1.5e-4, "element {i}: {g} vs {w}");
    }
}

#[test]
fn nearest_as_pytorch() {
    let x = ramp(&[1, 1, 3, 4]);
    let y = upsample_nearest2d(&x, &[5, 7], None, None).unwrap();
    assert_eq!(
        rounded(&y)[..14],
        [0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0]
    );
    assert_eq!(rounded(&y)[28..], [8.0, 8.0, 9.0, 9.0, 10.0, 10.0, 11.0]);
    // Given scales replace in / out in the source index.
    let y = upsample_nearest2d(&x, &[5, 7], Some(0.7), Some(1.9)).unwrap();
    assert_eq!(
        rounded(&y)[..21],
        [
            0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 4.0, 4.0, 5.0, 5.0, 6.0, 6.0, 7.0, 8.0, 8.0, 9.0,
            9.0, 10.0, 10.0, 11.0
        ]
    );
    let g = upsample_nearest2d_backward(&ramp(&[1, 1, 5, 7]), &[5, 7], &[1, 1, 3, 4], None, None)
        .unwrap();
    assert_eq!(
        rounded(&g),
        [16.0, 24.0, 32.0, 19.0, 72.0, 80.0, 88.0, 47.0, 57.0, 61.0, 65.0, 34.0]
    );
}

#[test]
fn bilinear_as_pytorch() {
    let x = ramp(&[1, 1, 3, 4]);
    let y = upsample_bilinear2d(&x, &[5, 7], false, Some(0.7), Some(1.9)).unwrap();
    assert_near(
        &rounded(&y)[..14],
        &[
            0.8571, 1.1466, 1.6729, 2.1992, 2.7256, 3.2519, 3.7782, 6.5714, 6.8609, 7.3872, 7.9135,
            8.4398, 8.9662, 9.4925,
        ],
    );
    let y = upsample_bilinear2d(&x, &[2, 3], true, None, None).unwrap();
    assert_eq!(rounded(&y), [0.0, 1.5, 3.0, 8.0, 9.5, 11.0]);
    let go = ramp(&[1, 1, 5, 7]);
    let g = upsample_bilinear2d_backward(&go, &[5, 7], &[1, 1, 3, 4], false, None, None).unwrap();
    assert_near(
        &rounded(&g),
        &[
            8.4571, 13.4429, 18.7, 22.4, 44.6143, 51.6857, 57.6, 60.3, 70.8571, 78.4429, 83.7, 84.8,
        ],
    );
    let g =
        upsample_bilinear2d_backward(&go, &[5, 7], &[1, 1, 3, 4], true, Some(0.3), None).unwrap();
    assert_eq!(
        rounded(&g),
        [6.0, 13.0, 19.0, 18.0, 43.0, 64.0, 72.0, 59.0, 58.5, 83.0, 89.0, 70.5]
    );
}

#[test]
fn bad_sizes_give_pytorchs_errors() {
    let err = |r: Result<Tensor>| r.unwrap_err().to_string();
    assert_eq!(
        err(upsample_nearest2d(&ramp(&[3, 4, 5]), &[2, 2], None, None)),
        "It is expected input_size equals to 4, but got size 3"
    );
    assert_eq!(
        err(upsample_bilinear2d(
            &ramp(&[1, 1, 4, 5]),
            &[0, 2],
            false,
            None,
            None
        )),
        "Input and output sizes should be greater than 0, but got input (H: 4, W: 5) output \
         (H: 0, W: 2)"
    );
    assert_eq!(
        err(upsample_nearest2d(
            &ramp(&[2, 0, 4, 5]),
            &[2, 2],
            None,
            None
        )),
        "Non-empty 4D data tensor expected but got a tensor with sizes [2, 0, 4, 5]"
    );
    assert_eq!(
        err(upsample_nearest2d_backward(
            &ramp(&[1, 1, 8, 7]),
            &[8, 8],
            &[1, 1, 4, 4],
            None,
            None
        )),
        "Expected grad_output to have the same shape as output; output.size(3) = 8 but got \
         grad_output.size(3) = 7"
    );
}

//! Average pooling against values recorded from PyTorch 2.15 (`torch.ops.aten` on the same
//! inputs): padding counted or not, ceil mode, divisor override, adaptive windows.

use switchboard_tensor::Tensor;

use super::*;

/// `arange(25)` as a `[1, 1, 5, 5]` float tensor.
fn grid() -> Tensor {
    Tensor::from_vec((0..25).map(|v| v as f32).collect(), &[1, 1, 5, 5]).unwrap()
}

fn rounded(t: &Tensor) -> Vec<f32> {
    let v = t.to_vec::<f32>().unwrap();
    v.iter().map(|x| (x * 1e4).round() / 1e4).collect()
}

#[test]
fn padding_ceil_mode_and_divisor_as_pytorch() {
    let pool = |count_include_pad, divisor| {
        avg_pool2d(
            &grid(),
            &[2, 2],
            &[2, 2],
            &[1, 1],
            true,
            count_include_pad,
            divisor,
        )
        .unwrap()
    };
    assert_eq!(
        rounded(&pool(false, None)),
        [0.0, 1.5, 3.5, 7.5, 9.0, 11.0, 17.5, 19.0, 21.0]
    );
    assert_eq!(
        rounded(&pool(true, None)),
        [0.0, 0.75, 1.75, 3.75, 9.0, 11.0, 8.75, 19.0, 21.0]
    );
    assert_eq!(
        rounded(&pool(true, Some(3))),
        [0.0, 1.0, 2.3333, 5.0, 12.0, 14.6667, 11.6667, 25.3333, 28.0]
    );
    // The gradient is each output's share spread over its window: all ones back through the
    // divisor-3 windows give 1/3 per covered input.
    let ones = Tensor::from_vec(vec![1.0f32; 9], &[1, 1, 3, 3]).unwrap();
    let g = avg_pool2d_backward(
        &ones,
        &grid(),
        &[2, 2],
        &[2, 2],
        &[1, 1],
        true,
        true,
        Some(3),
    )
    .unwrap();
    assert!(rounded(&g).iter().all(|&v| v == 0.3333));
}

#[test]
fn adaptive_windows_as_pytorch() {
    let y = crate::_adaptive_avg_pool2d(&grid(), &[3, 2]).unwrap();
    assert_eq!(rounded(&y), [3.5, 5.5, 11.0, 13.0, 18.5, 20.5]);
    let e = crate::_adaptive_avg_pool2d(&grid(), &[2])
        .unwrap_err()
        .to_string();
    assert_eq!(e, "adaptive_avg_pool2d: output_size must be 2");
}

#[test]
fn backward_with_padding_ceil_mode_excluded_padding_as_pytorch() {
    let (kernel, stride, padding) = ([3, 2], [2, 1], [1, 1]);
    let y = avg_pool2d(&grid(), &kernel, &stride, &padding, true, false, None).unwrap();
    assert_eq!(y.sizes(), [1, 1, 3, 6]);
    let go = Tensor::from_vec((0..18).map(|v| v as f32).collect(), &[1, 1, 3, 6]).unwrap();
    let gi =
        avg_pool2d_backward(&go, &grid(), &kernel, &stride, &padding, true, false, None).unwrap();
    let torch = [
        0.25, 0.75, 1.25, 1.75, 3.5, 3.4167, 3.25, 4.0833, 4.9167, 8.8333, 3.1667, 2.5, 2.8333,
        3.1667, 5.3333, 12.4167, 9.25, 10.0833, 10.9167, 17.8333, 9.25, 6.75, 7.25, 7.75, 12.5,
    ];
    assert_eq!(rounded(&gi), torch);
}

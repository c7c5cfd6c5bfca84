//! 3-d average pooling against values recorded from PyTorch 2.15 (`torch.ops.aten` on the
//! same inputs): padding counted or not, ceil mode, divisor override, adaptive windows.

use switchboard_tensor::Tensor;

use super::*;

/// `arange(60)` as a `[1, 1, 3, 4, 5]` float tensor.
fn grid() -> Tensor {
    Tensor::from_vec((0..60).map(|v| v as f32).collect(), &[1, 1, 3, 4, 5]).unwrap()
}

fn rounded(t: &Tensor) -> Vec<f32> {
    let v = t.to_vec::<f32>().unwrap();
    v.iter().map(|x| (x * 1e4).round() / 1e4).collect()
}

#[test]
fn padding_ceil_mode_and_divisor_as_pytorch() {
    let pool = |count_include_pad| {
        avg_pool3d(
            &grid(),
            &[2, 3, 2],
            &[2, 2, 1],
            &[1, 1, 0],
            true,
            count_include_pad,
            None,
        )
        .unwrap()
    };
    assert_eq!(
        rounded(&pool(false))[..12],
        [3.0, 4.0, 5.0, 6.0, 10.5, 11.5, 12.5, 13.5, 15.5, 16.5, 17.5, 18.5]
    );
    assert_eq!(
        rounded(&pool(true))[..12],
        [1.0, 1.3333, 1.6667, 2.0, 5.25, 5.75, 6.25, 6.75, 3.875, 4.125, 4.375, 4.625]
    );
    let y = avg_pool3d(&grid(), &[2], &[2], &[1], false, true, Some(7)).unwrap();
    assert_eq!(
        rounded(&y)[..9],
        [0.0, 0.4286, 1.0, 2.1429, 5.1429, 6.2857, 2.1429, 4.7143, 5.2857]
    );
}

#[test]
fn adaptive_windows_as_pytorch() {
    let y = crate::_adaptive_avg_pool3d(&grid(), &[2, 3, 2]).unwrap();
    assert_eq!(
        rounded(&y),
        [13.5, 15.5, 18.5, 20.5, 23.5, 25.5, 33.5, 35.5, 38.5, 40.5, 43.5, 45.5]
    );
    let g = Tensor::from_vec((0..12).map(|v| v as f32).collect(), &[1, 1, 2, 3, 2]).unwrap();
    let gi = crate::_adaptive_avg_pool3d_backward(&g, &grid()).unwrap();
    assert_eq!(
        rounded(&gi)[..12],
        [0.0, 0.0, 0.0833, 0.0833, 0.0833, 0.1667, 0.1667, 0.5, 0.3333, 0.3333, 0.5, 0.5]
    );
}

#[test]
fn bad_arguments_give_pytorchs_errors() {
    let err = |r: Result<Tensor>| r.unwrap_err().to_string();
    assert_eq!(
        err(avg_pool3d(&grid(), &[5], &[], &[0], false, true, None)),
        "input image (T: 3 H: 4 W: 5) smaller than kernel size (kT: 5 kH: 5 kW: 5)"
    );
    let empty = Tensor::zeros(&[2, 0, 4, 5, 6], switchboard_tensor::ScalarType::Float).unwrap();
    assert_eq!(
        err(avg_pool3d(&empty, &[2], &[], &[0], false, true, None)),
        "avg_pool3d(): Expected input to have non-zero size for non-batch dimensions, but input \
         has sizes [2, 0, 4, 5, 6] with dimension 1 being empty"
    );
}

#[test]
fn backward_with_padding_ceil_mode_excluded_padding_as_pytorch() {
    let (kernel, stride, padding) = ([2, 3, 2], [2, 2, 1], [1, 1, 0]);
    let y = avg_pool3d(&grid(), &kernel, &stride, &padding, true, false, None).unwrap();
    assert_eq!(y.sizes(), [1, 1, 2, 3, 4]);
    let go = Tensor::from_vec((0..24).map(|v| v as f32).collect(), &[1, 1, 2, 3, 4]).unwrap();
    let gi =
        avg_pool3d_backward(&go, &grid(), &kernel, &stride, &padding, true, false, None).unwrap();
    let torch = [
        0.0, 0.25, 0.75, 1.25, 0.75, 0.6667, 1.75, 2.5833, 3.4167, 1.9167, 0.6667, 1.5, 1.8333,
        2.1667, 1.1667, 4.6667, 10.0, 11.3333, 12.6667, 6.6667, 1.5, 3.125, 3.375, 3.625, 1.875,
        2.8333, 5.875, 6.2917, 6.7083, 3.4583, 1.3333, 2.75, 2.9167, 3.0833, 1.5833, 6.3333, 13.0,
        13.6667, 14.3333, 7.3333, 1.5, 3.125, 3.375, 3.625, 1.875, 2.8333, 5.875, 6.2917, 6.7083,
        3.4583, 1.3333, 2.75, 2.9167, 3.0833, 1.5833, 6.3333, 13.0, 13.6667, 14.3333, 7.3333,
    ];
    assert_eq!(rounded(&gi), torch);
}

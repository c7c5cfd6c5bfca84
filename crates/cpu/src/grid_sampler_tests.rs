use switchboard_tensor::Tensor;

use super::*;
use crate::nn_testutil::assert_close;

/// (interpolation, padding, align_corners, output, grad_input, grad_grid), recorded from
/// torch 2.15 for the input, grid and output gradient of [`case`].
type Case = (
    i64,
    i64,
    bool,
    &'static [f64],
    &'static [f64],
    &'static [f64],
);

#[rustfmt::skip]
const RECORDED: &[Case] = &[
        (0, 0, false, &[0.455, 0.7175, -0.0975, 0.0375], &[0.52, 0.595, -0.945, 0.73, 1.05, 0.065], &[1.95, 0.35, -6.3, -2.05, 0.1125, 0.24375, -6.1875, 3.525]),
        (0, 0, true, &[1.035, 0.295, -0.5525, -0.1], &[0.615, 0.21, -0.81, 0.885, 1.1325, 0.2925], &[1.15, 0.45, -5.2, 0.55, -0.425, 0.1625, -4.125, 1.8]),
        (0, 1, false, &[1.3, 1.025, -0.75, 0.0375], &[0.65, 0.4, -1.35, 1.25, 1.05, 0.5], &[-0.0, 1.0, -9.0, 0.0, 0.0, 0.0, -6.1875, 3.525]),
        (0, 1, true, &[1.15, 0.295, -0.65, -0.1], &[0.65, 0.21, -0.81, 0.95, 1.14, 0.36], &[-0.0, 0.5, -5.2, 0.55, -0.5, 0.0, -4.125, 1.8]),
        (0, 2, false, &[1.3, 1.025, -0.75, 0.0375], &[0.65, 0.4, -1.35, 1.25, 1.05, 0.5], &[-0.0, 1.0, -9.0, 0.0, 0.0, 0.0, -6.1875, 3.525]),
        (0, 2, true, &[1.01625, 0.295, -0.2975, -0.1], &[0.615, 0.2525, -0.7425, 0.885, 1.1975, 0.2925], &[1.3375, 0.5125, -5.2, 0.55, -0.2, 0.5875, -4.125, 1.8]),
        (1, 0, false, &[0.0, 2.0, 0.0, -1.0], &[0.0, 3.0, -2.0, 0.0, 0.0, 0.0], &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
        (1, 0, true, &[1.5, -1.0, -0.75, -1.0], &[0.0, 1.0, 0.0, 1.0, 0.0, 0.5], &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
        (1, 1, false, &[1.5, 2.0, -0.75, -1.0], &[0.0, 3.0, -2.0, 1.0, 0.0, 0.5], &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
        (1, 1, true, &[1.5, -1.0, -0.75, -1.0], &[0.0, 1.0, 0.0, 1.0, 0.0, 0.5], &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
        (1, 2, false, &[1.5, 2.0, -0.75, -1.0], &[0.0, 3.0, -2.0, 1.0, 0.0, 0.5], &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
        (1, 2, true, &[1.5, -1.0, -0.75, -1.0], &[0.0, 1.0, 0.0, 1.0, 0.0, 0.5], &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
        (2, 0, false, &[0.5793396875, 1.08338564551, -0.162244875, -0.0645703125], &[0.748562353516, 0.872752603516, -1.54445305664, 0.930585841797, 1.4938528418, 0.0589725488281], &[2.964965625, 0.123284765625, -9.19465066406, -2.41719597656, 0.167023125, 0.54174046875, -8.86728515625, 6.56971875]),
        (2, 0, true, &[1.34634999023, 0.303933554688, -0.840114699219, -0.2434375], &[0.940685144531, 0.322703730469, -1.24305240234, 1.13259017578, 1.51695919922, 0.202061425781], &[0.468720996094, 0.441711035156, -7.671121875, 0.53133984375, -0.254278828125, -0.0569039648438, -4.742578125, 3.1775625]),
        (2, 1, false, &[1.4012760625, 1.16923074585, -0.93755325, -0.101625], &[0.723746533203, 0.439920033203, -1.72016656641, 1.2799175293, 1.2201034043, 0.556479066406], &[0.484036875, 0.975219609375, -12.2841180176, 0.158908374023, 0.02003625, 0.335330625, -6.3534375, 5.47171875]),
        (2, 1, true, &[1.24805648828, 0.137319296875, -0.873163525391, -0.229], &[0.804881902344, 0.147562816406, -0.99614784375, 0.984680597656, 1.27949968359, 0.27952284375], &[-0.629953242187, 0.537338320312, -6.419165625, 0.442258007812, -0.507975732422, -0.212155517578, -3.36375, 2.683125]),
        (2, 2, false, &[1.54478875, 1.24073951416, -1.332525, -0.101625], &[0.748319199219, 0.395355449219, -1.84267464844, 1.36625111328, 1.12390236328, 0.708846523437], &[0.436725, 0.9477703125, -12.904800293, 0.908047851562, -0.24975, 0.7723125, -6.3534375, 5.47171875]),
        (2, 2, true, &[1.18933345313, 0.40554278125, -0.575391265625, -0.196], &[0.77402803125, 0.2354255, -1.14132853125, 1.00553446875, 1.3450745, 0.28126603125], &[0.56087296875, 0.70455328125, -8.17455375, 0.45027984375, -0.075475546875, 0.509358515625, -4.23, 3.564]),
];

fn case() -> (Tensor, Tensor, Tensor) {
    let x = Tensor::from_vec(vec![0.5f64, -1.0, 2.0, 1.5, 0.25, -0.75], &[1, 1, 2, 3]).unwrap();
    let g = Tensor::from_vec(
        vec![-1.1f64, 0.3, 0.45, -0.8, 0.9, 1.3, -0.2, 0.0],
        &[1, 2, 2, 2],
    )
    .unwrap();
    let go = Tensor::from_vec(vec![1.0f64, -2.0, 0.5, 3.0], &[1, 1, 2, 2]).unwrap();
    (x, g, go)
}

#[test]
fn every_mode_matches_pytorch() {
    let (x, g, go) = case();
    for &(interpolation, padding, align, out, grad_input, grad_grid) in RECORDED {
        let y = grid_sampler_2d(&x, &g, interpolation, padding, align).unwrap();
        assert_close(&y.to_vec::<f64>().unwrap(), out, 1e-9);
        let (gi, gg) =
            grid_sampler_2d_backward(&go, &x, &g, interpolation, padding, align, &[true, true])
                .unwrap();
        assert_close(&gi.to_vec::<f64>().unwrap(), grad_input, 1e-9);
        assert_close(&gg.to_vec::<f64>().unwrap(), grad_grid, 1e-9);
    }
}

fn as_f32(t: &Tensor) -> Tensor {
    let v: Vec<f32> = t
        .to_vec::<f64>()
        .unwrap()
        .iter()
        .map(|&v| v as f32)
        .collect();
    Tensor::from_vec(v, t.sizes()).unwrap()
}

#[test]
fn float32_and_masked_input_gradient() {
    let (x, g, go) = case();
    let (xf, gf, gof) = (as_f32(&x), as_f32(&g), as_f32(&go));
    let (_, _, _, out, _, grad_grid) = RECORDED[12];
    let y = grid_sampler_2d(&xf, &gf, 2, 0, false).unwrap();
    let y: Vec<f64> = y
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|&v| v as f64)
        .collect();
    assert_close(&y, out, 1e-5);
    let (gi, gg) = grid_sampler_2d_backward(&gof, &xf, &gf, 2, 0, false, &[false, true]).unwrap();
    assert_eq!(gi.numel(), 0);
    let gg: Vec<f64> = gg
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|&v| v as f64)
        .collect();
    assert_close(&gg, grad_grid, 1e-4);
}

#[test]
fn bad_modes_are_errors() {
    let (x, g, go) = case();
    let e = grid_sampler_2d(&x, &g, 5, 0, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("interpolation_mode"), "{e}");
    let e = grid_sampler_2d(&x, &g, 0, -1, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("padding_mode"), "{e}");
    let e = grid_sampler_2d_backward(&go, &x, &g, 3, 0, false, &[true, true])
        .unwrap_err()
        .to_string();
    assert!(e.contains("interpolation_mode"), "{e}");
}

/// NaN, infinite and huge grid values, as torch 2.15 samples them (`(NaN, 0)` and `(inf,
/// 1e30)` per mode: NaN weights with zeros padding and bicubic; NaN clipped to 0).
#[test]
fn non_finite_grid_values() {
    let (x, _, _) = case();
    let g = Tensor::from_vec(vec![f64::NAN, 0.0, f64::INFINITY, 1e30], &[1, 1, 2, 2]).unwrap();
    let nan = f64::NAN;
    #[rustfmt::skip]
    let recorded: [(i64, i64, [f64; 2]); 9] = [
        (0, 0, [nan, nan]), (0, 1, [1.0, -0.75]), (0, 2, [1.0, 0.5]),
        (1, 0, [0.0, 0.0]), (1, 1, [0.5, -0.75]), (1, 2, [0.5, 0.5]),
        (2, 0, [nan, nan]), (2, 1, [nan, nan]), (2, 2, [nan, nan]),
    ];
    for (interpolation, padding, want) in recorded {
        let y = grid_sampler_2d(&x, &g, interpolation, padding, false).unwrap();
        assert_close(&y.to_vec::<f64>().unwrap(), &want, 1e-12);
    }
}

//! LayerNorm and MaxPool2d against values recorded from PyTorch 2.15 (`torch.nn` with the
//! same inputs).

use switchboard_cpu as _;
use switchboard_nn::{LayerNorm, MaxPool2d, Module};
use switchboard_tensor::Tensor;

fn close(a: &[f32], b: &[f64]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((*x as f64 - y).abs() < 1e-5, "{a:?} vs {b:?}");
    }
}

#[test]
fn layer_norm_matches_pytorch() {
    // x = torch.arange(8.).reshape(2, 4) * torch.tensor([1., 2., -1., 0.5]); nn.LayerNorm(4)(x)
    let x = Tensor::from_vec(vec![0.0f32, 2.0, -2.0, 1.5, 4.0, 10.0, -6.0, 3.5], &[2, 4]).unwrap();
    let m = LayerNorm::new(&[4]).unwrap();
    close(
        &m.forward(&x).unwrap().to_vec::<f32>().unwrap(),
        &[
            -0.24096530675888062,
            1.0441830158233643,
            -1.526113510131836,
            0.7228959202766418,
            0.1964428573846817,
            1.2441381216049194,
            -1.5497158765792847,
            0.10913491994142532,
        ],
    );
    let names: Vec<_> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["weight", "bias"]);
    assert_eq!(
        m.describe(),
        "LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)"
    );
    let plain = LayerNorm::with_options(&[2, 4], 1e-5, false, false).unwrap();
    assert!(plain.parameters().is_empty());
    assert_eq!(
        plain.describe(),
        "LayerNorm((2, 4), eps=1e-05, elementwise_affine=False, bias=False)"
    );
    let no_bias = LayerNorm::with_options(&[4], 1e-5, true, false).unwrap();
    assert_eq!(no_bias.parameters().len(), 1);
    // The input's last dims must be normalized_shape.
    let e = m
        .forward(&Tensor::from_vec(vec![0.0f32; 6], &[2, 3]).unwrap())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("normalized_shape"), "{e}");
}

#[test]
fn max_pool2d_matches_pytorch() {
    // x = torch.sin(torch.arange(32.).reshape(1, 2, 4, 4) * 1.3)
    let v: Vec<f32> = (0..32).map(|i| (i as f32 * 1.3).sin()).collect();
    let x = Tensor::from_vec(v, &[1, 2, 4, 4]).unwrap();
    let m = MaxPool2d::new(2, None, 0);
    assert_eq!(
        m.describe(),
        "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    );
    let y = m.forward(&x).unwrap();
    assert_eq!(y.sizes(), [1, 2, 2, 2]);
    close(
        &y.to_vec::<f32>().unwrap(),
        &[
            0.9635581970214844,
            0.9985433220863342,
            0.10775422304868698,
            0.9867720603942871,
            0.9287955164909363,
            -0.3199385106563568,
            0.8838704228401184,
            0.9637953639030457,
        ],
    );
    let padded = MaxPool2d::new(3, Some(1.into()), 1);
    let y = padded.forward(&x).unwrap();
    assert_eq!(y.sizes(), [1, 2, 4, 4]);
    close(
        &y.to_vec::<f32>().unwrap()[..6],
        &[
            0.9635581970214844,
            0.9985433220863342,
            0.9985433220863342,
            0.9985433220863342,
            0.9635581970214844,
            0.9985433220863342,
        ],
    );
}

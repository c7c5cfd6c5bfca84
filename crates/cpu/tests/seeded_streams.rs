//! Seeded random streams against PyTorch's (Note [Matching PyTorch's random streams] in
//! switchboard-cpu) where the dtype changes how samples are drawn: float16/bfloat16
//! `uniform_`/`normal_` and `bernoulli_` with a tensor `p`. The expected values were recorded
//! from PyTorch 2.15 on the CPU with `torch.Generator().manual_seed(0)`.

use switchboard_ops::handles;
use switchboard_tensor::{Generator, ScalarType, Tensor};

use switchboard_cpu as _;

fn uniform(dtype: ScalarType, n: i64, from: f64, to: f64) -> Vec<f64> {
    let t = Tensor::zeros(&[n], dtype).unwrap();
    handles::uniform_()
        .call((&t, from, to, Some(&Generator::new(0))))
        .unwrap();
    t.to_vec_as::<f64>().unwrap()
}

fn normal(dtype: ScalarType, n: i64) -> Vec<f64> {
    let t = Tensor::zeros(&[n], dtype).unwrap();
    handles::normal_()
        .call((&t, 0.0, 1.0, Some(&Generator::new(0))))
        .unwrap();
    t.to_vec_as::<f64>().unwrap()
}

#[test]
fn reduced_float_uniform_rounds_a_float_sample() {
    let half = [
        0.496337890625,
        0.76806640625,
        0.0885009765625,
        0.132080078125,
        0.307373046875,
    ];
    assert_eq!(uniform(ScalarType::Half, 5, 0.0, 1.0), half);
    let bf16 = [
        0.49609375,
        0.76953125,
        0.08837890625,
        0.1318359375,
        0.306640625,
    ];
    assert_eq!(uniform(ScalarType::BFloat16, 5, 0.0, 1.0), bf16);
    // `from`/`to` stay floats (0.1 and 0.7 are not float16 values).
    let half = [
        0.397705078125,
        0.56103515625,
        0.153076171875,
        0.17919921875,
        0.284423828125,
    ];
    assert_eq!(uniform(ScalarType::Half, 5, 0.1, 0.7), half);
    let bf16 = [0.3984375, 0.5625, 0.1533203125, 0.1796875, 0.28515625];
    assert_eq!(uniform(ScalarType::BFloat16, 5, 0.1, 0.7), bf16);
}

#[test]
fn reduced_float_normal() {
    // Fewer than 16 elements: one double Box-Muller sample per element, rounded.
    let half = [
        1.541015625,
        -0.29345703125,
        -2.1796875,
        0.568359375,
        -1.0849609375,
    ];
    assert_eq!(normal(ScalarType::Half, 5), half);
    // 16 elements: PyTorch's float32 `normal_fill`, rounded.
    let half = [
        -1.1259765625,
        -1.15234375,
        -0.25048828125,
        -0.433837890625,
        0.8486328125,
        0.69189453125,
        -0.31591796875,
        -2.115234375,
        0.322265625,
        -1.263671875,
        0.35009765625,
        0.30810546875,
        0.11981201171875,
        1.2373046875,
        1.1171875,
        -0.247314453125,
    ];
    assert_eq!(normal(ScalarType::Half, 16), half);
    let bf16 = [
        -1.125,
        -1.15625,
        -0.25,
        -0.43359375,
        0.84765625,
        0.69140625,
        -0.31640625,
        -2.109375,
        0.322265625,
        -1.265625,
        0.349609375,
        0.30859375,
        0.11962890625,
        1.234375,
        1.1171875,
        -0.2470703125,
    ];
    assert_eq!(normal(ScalarType::BFloat16, 16), bf16);
}

/// `torch.linspace(0.05, 0.95, 12)` (float32).
fn probabilities() -> Vec<f32> {
    vec![
        0.05, 0.13181818, 0.21363635, 0.29545453, 0.37727273, 0.4590909, 0.5409091, 0.6227273,
        0.70454544, 0.7863636, 0.8681818, 0.95,
    ]
}

fn bernoulli(p: &Tensor) -> Vec<f64> {
    let t = Tensor::zeros(&[12], ScalarType::Float).unwrap();
    handles::bernoulli_tensor_()
        .call((&t, p, Some(&Generator::new(0))))
        .unwrap();
    t.to_vec_as::<f64>().unwrap()
}

#[test]
fn bernoulli_draws_by_the_dtype_of_p() {
    let p32 = Tensor::from_vec(probabilities(), &[12]).unwrap();
    // A float32 (or float16) `p`: one float uniform (a 32-bit draw) per element.
    let float = [0., 0., 1., 1., 1., 0., 1., 0., 1., 1., 1., 1.];
    assert_eq!(bernoulli(&p32), float);
    let p16: Vec<_> = probabilities()
        .into_iter()
        .map(switchboard_tensor::f16::from_f32)
        .collect();
    assert_eq!(bernoulli(&Tensor::from_vec(p16, &[12]).unwrap()), float);
    // A float64 `p`: one double uniform (a 64-bit draw) per element.
    let p64: Vec<f64> = probabilities().into_iter().map(f64::from).collect();
    let double = [0., 0., 0., 0., 0., 0., 1., 1., 1., 1., 1., 1.];
    assert_eq!(bernoulli(&Tensor::from_vec(p64, &[12]).unwrap()), double);
}

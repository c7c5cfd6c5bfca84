//! scaled_dot_product_attention and MultiheadAttention against values recorded from PyTorch
//! 2.15 (`torch.nn.functional.scaled_dot_product_attention`, `nn.MultiheadAttention(4, 2,
//! batch_first=True)` after `torch.manual_seed(0)`) on the same inputs.

use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_nn::{scaled_dot_product_attention as sdpa, Module, MultiheadAttention};
use switchboard_ops as ops;
use switchboard_tensor::{Generator, Tensor};

fn seq(n: usize, f: impl Fn(f32) -> f32, shape: &[i64]) -> Tensor {
    Tensor::from_vec((0..n).map(|i| f(i as f32)).collect(), shape).unwrap()
}

/// q = sin(0.3 i), k = cos(0.5 i), v = sin(0.9 i + 1), each `[1, 2, 3, 4]`.
fn qkv() -> (Tensor, Tensor, Tensor) {
    let s = [1, 2, 3, 4];
    (
        seq(24, |i| (i * 0.3).sin(), &s),
        seq(24, |i| (i * 0.5).cos(), &s),
        seq(24, |i| (i * 0.9 + 1.0).sin(), &s),
    )
}

fn close(a: &Tensor, b: &[f64]) {
    let a = a.to_vec::<f32>().unwrap();
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((*x as f64 - y).abs() < 2e-6, "{a:?} vs {b:?}");
    }
}

#[test]
fn sdpa_matches_pytorch() {
    let (q, k, v) = qkv();
    close(
        &sdpa(&q, &k, &v, None, 0.0, false, None, false).unwrap(),
        &[
            0.6185476, 0.436708, -0.0756238, -0.5307247, 0.7725682, 0.7221596, 0.1252348,
            -0.5664649, 0.4454978, 0.4253828, 0.0833463, -0.3217646, 0.1884127, -0.1540859,
            -0.3799755, -0.3183066, 0.1894844, -0.002769, -0.1929268, -0.2370809, -0.1204738,
            0.2941563, 0.4861747, 0.3102663,
        ],
    );
    close(
        &sdpa(&q, &k, &v, None, 0.0, true, None, false).unwrap(),
        &[
            0.841471, 0.9463001, 0.3349882, -0.529836, 0.7233954, 0.8400196, 0.3209337, -0.4410284,
            0.4454978, 0.4253828, 0.0833463, -0.3217646, -0.6935256, 0.1332318, 0.8591615,
            0.934895, 0.211872, -0.4947619, -0.8269701, -0.5333431, -0.1204738, 0.2941563,
            0.4861747, 0.3102663,
        ],
    );
    // A boolean mask keeps where true; the second query's row is all masked: zeros.
    let mask = Tensor::from_vec(
        vec![true, false, true, false, false, false, true, true, true],
        &[3, 3],
    )
    .unwrap();
    close(
        &sdpa(&q, &k, &v, Some(&mask), 0.0, false, None, false).unwrap(),
        &[
            0.8915122, 0.6300997, -0.1081601, -0.7645661, 0.0, 0.0, 0.0, 0.0, 0.4454978, 0.4253828,
            0.0833463, -0.3217646, -0.0518333, 0.692, 0.9121416, 0.4419932, 0.0, 0.0, 0.0, 0.0,
            -0.1204738, 0.2941563, 0.4861747, 0.3102663,
        ],
    );
    // A float mask is added; an explicit scale.
    let float_mask = Tensor::from_vec(
        vec![0.0f32, -1.0, 0.5, 0.2, 0.0, 0.0, -2.0, 0.0, 1.0],
        &[3, 3],
    )
    .unwrap();
    close(
        &sdpa(&q, &k, &v, Some(&float_mask), 0.0, false, Some(0.5), false).unwrap(),
        &[
            0.8185833, 0.4970123, -0.200688, -0.7465112, 0.7820867, 0.7531234, 0.1542111,
            -0.5614048, 0.4559781, 0.1162253, -0.311485, -0.5034692, 0.1129363, 0.3048761,
            0.2660919, 0.0259352, 0.1781953, -0.0010302, -0.1794762, -0.2220975, 0.1443284,
            0.6240563, 0.6315113, 0.1610516,
        ],
    );
}

#[test]
fn sdpa_errors_as_pytorch() {
    let (q, k, v) = qkv();
    let err = |r: switchboard_dispatcher::Result<Tensor>| r.err().unwrap().to_string();
    let mask = ops::ones(&[3, 3]).unwrap();
    assert!(err(sdpa(&q, &k, &v, Some(&mask), 0.0, true, None, false))
        .contains("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True"));
    let k64 = ops::_to_copy_with(
        &k,
        ops::ToCopyOptions::default().dtype(switchboard_tensor::ScalarType::Double),
    )
    .unwrap();
    assert!(
        err(sdpa(&q, &k64, &v, None, 0.0, false, None, false)).contains(
            "Expected query, key, and value to have the same dtype, but got query.dtype: float \
         key.dtype: double and value.dtype: float instead."
        )
    );
    let one = ops::ones(&[4]).unwrap();
    assert!(err(sdpa(&one, &one, &one, None, 0.0, false, None, false)).contains(
        "Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: 1 \
         key.dim: 1 and value.dim: 1 instead."
    ));
    assert!(err(sdpa(&q, &k, &v, None, 1.5, false, None, false))
        .contains("dropout probability has to be between 0 and 1, but got 1.5"));
    // Mismatched feature sizes: the matmul's error, not a panic.
    let k5 = ops::ones(&[1, 2, 3, 5]).unwrap();
    assert!(sdpa(&q, &k5, &v, None, 0.0, false, None, false).is_err());
}

#[test]
fn multihead_attention_matches_pytorch() {
    let m = MultiheadAttention::new(4, 2, &Generator::new(0)).unwrap();
    let names: Vec<_> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "in_proj_weight",
            "in_proj_bias",
            "out_proj.weight",
            "out_proj.bias"
        ]
    );
    close(
        &ops::narrow(&ops::flatten(&m.in_proj_weight).unwrap(), 0, 0, 8).unwrap(),
        &[
            0.2224242, 0.5085067, -0.1260264, 0.4582455, -0.0987042, 0.0647976, 0.5544887,
            -0.5680798,
        ],
    );
    close(
        &ops::select(&m.out_proj.weight, 0, 0).unwrap(),
        &[-0.0037434, 0.2682218, -0.4115226, -0.3679695],
    );
    let x = seq(12, |i| (i * 0.7).cos(), &[1, 3, 4]);
    let y = m.forward(&x).unwrap();
    close(
        &y,
        &[
            -0.163813, -0.0066457, -0.0687399, -0.0680298, -0.0160446, -0.0453259, -0.0158937,
            -0.027113, -0.1730611, -0.0162548, -0.0743193, -0.068706,
        ],
    );
    // Causal (PyTorch: attn_mask = triu(ones(3, 3), 1).bool()).
    close(
        &m.self_attention(&x, true).unwrap(),
        &[
            -0.2501796, -0.0491893, -0.1136088, -0.2732374, 0.1443456, -0.0175757, 0.0556184,
            -0.0195556, -0.1730611, -0.0162548, -0.0743193, -0.068706,
        ],
    );
    // Gradients reach every parameter.
    ops::sum(&y).unwrap().backward().unwrap();
    assert!(m.parameters().iter().all(|p| p.grad().is_some()));
    assert!(MultiheadAttention::new(5, 2, &Generator::new(0)).is_err());
}

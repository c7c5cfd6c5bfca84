//! `scaled_dot_product_attention` on CPU takes PyTorch's fused flash kernel when
//! `use_flash_attention_cpp` allows, and the math composite otherwise: the backend choice of
//! each case PyTorch 2.15 was observed on, the flash results and gradients against the math
//! path's, and the double-backward error. The autograd node of each branch and the global
//! `enable_flash_sdp` flag are tested in `attention_flash_flag.rs`, a process of their own,
//! since turning the flag off would send this file's concurrent tests down the math path.

use switchboard_autograd::{grad, AutogradTensor};
use switchboard_cpu as _;
use switchboard_nn::{scaled_dot_product_attention as sdpa, sdp_backend, SdpBackend};
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{Device, ScalarType, Tensor};

/// Deterministic values in about [-2, 2] of `shape`.
fn rand(shape: &[i64], seed: u64) -> Tensor {
    let n = shape.iter().product::<i64>() as usize;
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let v: Vec<f32> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0) as f32
        })
        .collect();
    Tensor::from_vec(v, shape).unwrap()
}

fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    let d = ops::abs(&ops::sub(a, b).unwrap()).unwrap();
    ops::max(&d).unwrap().item().unwrap().to_f64()
}

/// PyTorch's math path as `scaled_dot_product_attention` calls it: a boolean mask made
/// additive first, then `_scaled_dot_product_attention_math`.
fn sdpa_math(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>, causal: bool) -> Tensor {
    let additive = mask.map(|m| {
        if m.dtype() != ScalarType::Bool {
            return m.clone();
        }
        let zeros = ops::zeros_with(
            m.sizes(),
            ops::ZerosOptions {
                dtype: Some(q.dtype()),
                ..Default::default()
            },
        )
        .unwrap();
        ops::masked_fill(&zeros, &ops::logical_not(m).unwrap(), f64::NEG_INFINITY).unwrap()
    });
    let options = ops::ScaledDotProductAttentionMathOptions {
        attn_mask: additive.as_ref(),
        is_causal: causal,
        ..Default::default()
    };
    ops::_scaled_dot_product_attention_math_with(q, k, v, options)
        .unwrap()
        .0
}

fn leaf(t: &Tensor) -> Tensor {
    t.detach().requires_grad_(true).unwrap()
}

/// The output of `sdpa` (which takes flash) and of the math path, and their gradients with
/// respect to q, k, v.
fn compare(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>, causal: bool, tol: f64) {
    assert_eq!(
        sdp_backend(q, k, v, mask, 0.0, false, false).unwrap(),
        SdpBackend::Flash
    );
    let mut out_shape = q.sizes().to_vec();
    *out_shape.last_mut().unwrap() = v.sizes()[v.dim() - 1];
    let dout = rand(&out_shape, 7);
    let run = |f: &dyn Fn(&Tensor, &Tensor, &Tensor) -> Tensor| {
        let (q, k, v) = (leaf(q), leaf(k), leaf(v));
        let out = f(&q, &k, &v);
        let g = grad(
            std::slice::from_ref(&out),
            &[q, k, v],
            &[Some(dout.clone())],
            false,
            false,
        )
        .unwrap();
        (out, g.into_iter().map(|g| g.unwrap()).collect::<Vec<_>>())
    };
    let (flash, fg) = run(&|q, k, v| sdpa(q, k, v, mask, 0.0, causal, None, false).unwrap());
    let (math, mg) = run(&|q, k, v| sdpa_math(q, k, v, mask, causal));
    assert!(
        max_diff(&flash, &math) <= tol,
        "out {}",
        max_diff(&flash, &math)
    );
    for (name, a, b) in [
        ("dq", &fg[0], &mg[0]),
        ("dk", &fg[1], &mg[1]),
        ("dv", &fg[2], &mg[2]),
    ] {
        assert!(max_diff(a, b) <= tol, "{name} {}", max_diff(a, b));
    }
}

#[test]
fn flash_matches_the_math_path_with_gradients() {
    let (b, h, l, e) = (2, 4, 128, 64);
    let (q, k, v) = (
        rand(&[b, h, l, e], 1),
        rand(&[b, h, l, e], 2),
        rand(&[b, h, l, e], 3),
    );
    compare(&q, &k, &v, None, true, 1e-5);
    compare(&q, &k, &v, None, false, 1e-5);
    // A boolean 2-d mask (converted to -inf / 0) and a float 4-d one.
    let tril = ops::ge(
        &ops::unsqueeze(&ops::arange(l).unwrap(), 1).unwrap(),
        &ops::unsqueeze(&ops::arange(l).unwrap(), 0).unwrap(),
    )
    .unwrap();
    compare(&q, &k, &v, Some(&tril), false, 1e-5);
    let float_mask = rand(&[b, 1, l, l], 4);
    compare(&q, &k, &v, Some(&float_mask), false, 1e-5);
    // BLHE views of one projection, as a multi-head attention makes them.
    let view = |t: &Tensor| {
        ops::transpose(
            &ops::contiguous(&ops::transpose(t, 1, 2).unwrap()).unwrap(),
            1,
            2,
        )
        .unwrap()
    };
    compare(&view(&q), &view(&k), &view(&v), None, true, 1e-5);
}

#[test]
fn three_dimensional_inputs_take_flash_through_a_batch_of_one() {
    let (q, k, v) = (
        rand(&[4, 16, 8], 1),
        rand(&[4, 16, 8], 2),
        rand(&[4, 16, 8], 3),
    );
    assert_eq!(
        sdp_backend(&q, &k, &v, None, 0.0, false, false).unwrap(),
        SdpBackend::Flash
    );
    compare(&q, &k, &v, None, true, 1e-5);
    let mask = rand(&[4, 16, 16], 5);
    assert_eq!(
        sdp_backend(&q, &k, &v, Some(&mask), 0.0, false, false).unwrap(),
        SdpBackend::Flash
    );
    compare(&q, &k, &v, Some(&mask), false, 1e-5);
    assert_eq!(
        sdpa(&q, &k, &v, None, 0.0, false, None, false)
            .unwrap()
            .sizes(),
        &[4, 16, 8]
    );
}

#[test]
fn a_fully_masked_row_gives_zeros_and_zero_gradients() {
    let (q, k, v) = (
        leaf(&rand(&[1, 2, 4, 8], 1)),
        leaf(&rand(&[1, 2, 4, 8], 2)),
        leaf(&rand(&[1, 2, 4, 8], 3)),
    );
    let keep: Vec<bool> = (0..16).map(|i| i / 4 != 1).collect();
    let mask = Tensor::from_vec(keep, &[4, 4]).unwrap();
    assert_eq!(
        sdp_backend(&q, &k, &v, Some(&mask), 0.0, false, false).unwrap(),
        SdpBackend::Flash
    );
    let out = sdpa(&q, &k, &v, Some(&mask), 0.0, false, None, false).unwrap();
    let row = ops::select(&out, 2, 1).unwrap();
    assert_eq!(
        ops::max(&ops::abs(&row).unwrap())
            .unwrap()
            .item()
            .unwrap()
            .to_f64(),
        0.0
    );
    out.sum().unwrap().backward().unwrap();
    let dq_row = ops::select(&q.grad().unwrap(), 2, 1).unwrap();
    assert_eq!(
        ops::max(&ops::abs(&dq_row).unwrap())
            .unwrap()
            .item()
            .unwrap()
            .to_f64(),
        0.0
    );
    for g in [q.grad(), k.grad(), v.grad()] {
        let g = g.unwrap();
        assert!(!ops::any(&ops::isnan(&g).unwrap())
            .unwrap()
            .item()
            .unwrap()
            .to_bool());
    }
}

#[test]
fn backend_choice_follows_use_flash_attention_cpp() {
    let q = rand(&[2, 4, 16, 8], 1);
    let flash = |q: &Tensor, k: &Tensor, v: &Tensor, m: Option<&Tensor>, p: f64| {
        sdp_backend(q, k, v, m, p, false, false).unwrap()
    };
    use SdpBackend::{Flash, Math};
    assert_eq!(flash(&q, &q, &q, None, 0.0), Flash);
    let cast = |t: &Tensor, d: ScalarType| {
        ops::_to_copy_with(
            t,
            ops::ToCopyOptions {
                dtype: Some(d),
                ..Default::default()
            },
        )
        .unwrap()
    };
    for d in [ScalarType::Double, ScalarType::BFloat16, ScalarType::Half] {
        let t = cast(&q, d);
        assert_eq!(flash(&t, &t, &t, None, 0.0), Flash, "{d:?}");
    }
    let long = cast(&q, ScalarType::Long);
    assert_eq!(flash(&long, &long, &long, None, 0.0), Math);
    // Masks: 2-d, 4-d broadcasting; not 3-d with 4-d inputs, nor requiring grad, nor [B, 2].
    for (shape, want) in [
        (vec![16, 16], Flash),
        (vec![2, 1, 16, 16], Flash),
        (vec![1, 1, 16, 16], Flash),
        (vec![2, 4, 1, 16], Flash),
        (vec![1, 16, 16], Math),
        (vec![2, 2, 16, 16], Math),
    ] {
        let m = rand(&shape, 2);
        assert_eq!(flash(&q, &q, &q, Some(&m), 0.0), want, "{shape:?}");
    }
    let m = leaf(&rand(&[16, 16], 2));
    assert_eq!(flash(&q, &q, &q, Some(&m), 0.0), Math);
    // Dropout, ranks 2 and 5, Ev != E, batch or head mismatch, strides, empty sequences.
    assert_eq!(flash(&q, &q, &q, None, 0.1), Math);
    let two = rand(&[16, 8], 1);
    assert_eq!(flash(&two, &two, &two, None, 0.0), Math);
    let five = rand(&[1, 2, 4, 16, 8], 1);
    assert_eq!(flash(&five, &five, &five, None, 0.0), Math);
    let v4 = rand(&[2, 4, 16, 4], 1);
    assert_eq!(flash(&q, &q, &v4, None, 0.0), Math);
    let k1 = rand(&[1, 4, 16, 8], 1);
    assert_eq!(flash(&q, &k1, &k1, None, 0.0), Math);
    let h2 = rand(&[2, 2, 16, 8], 1);
    assert_eq!(flash(&q, &h2, &h2, None, 0.0), Math);
    let strided = ops::transpose(&rand(&[2, 4, 8, 16], 1), 2, 3).unwrap();
    assert_eq!(flash(&strided, &q, &q, None, 0.0), Math);
    let empty = rand(&[2, 4, 0, 8], 1);
    assert_eq!(flash(&empty, &q, &q, None, 0.0), Math);
    // Meta tensors run the math path (`_fused_sdp_choice_meta`).
    let meta = Tensor::empty_on(&[2, 4, 16, 8], ScalarType::Float, Device::META).unwrap();
    assert_eq!(flash(&meta, &meta, &meta, None, 0.0), Math);
}

#[test]
fn flash_has_no_double_backward() {
    let q = leaf(&rand(&[1, 2, 8, 4], 1));
    let out = sdpa(&q, &q, &q, None, 0.0, true, None, false).unwrap();
    let g = grad(
        &[out.sum().unwrap()],
        std::slice::from_ref(&q),
        &[None],
        true,
        true,
    )
    .unwrap();
    let err = g[0]
        .as_ref()
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains(
            "derivative for aten::_scaled_dot_product_flash_attention_for_cpu_backward is not \
             implemented"
        ),
        "{err}"
    );
}

#[test]
fn sdpa_rejects_an_integer_mask_as_pytorch() {
    let q = rand(&[1, 2, 4, 8], 1);
    let long_mask = ops::zeros_with(
        &[4, 4],
        ops::ZerosOptions {
            dtype: Some(ScalarType::Long),
            ..Default::default()
        },
    )
    .unwrap();
    let err = sdpa(&q, &q, &q, Some(&long_mask), 0.0, false, None, false)
        .err()
        .unwrap();
    assert!(
        err.to_string().contains(
            "Expected attn_mask dtype to be bool or float or to match query dtype, but got \
         attn_mask.dtype: long int and  query.dtype: float instead."
        ),
        "{err}"
    );
}

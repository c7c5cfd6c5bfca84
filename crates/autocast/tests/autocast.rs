//! The CPU policy against PyTorch 2.15's `torch.autocast("cpu")`: each list kind, nesting,
//! the region state, autograd through the casts.

// The expected values are PyTorch's, printed in full (exact in bfloat16 and float16).
#![allow(clippy::excessive_precision)]

use switchboard_autocast::{
    autocast, autocast_with, get_autocast_dtype, is_autocast_enabled, AutocastGuard,
    AutocastOptions,
};
use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_dispatcher::{DispatchError, Dispatcher, Result};
use switchboard_keys::{DeviceType, DispatchKey};
use switchboard_meta as _;
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{Device, ScalarType, Tensor};

use ScalarType::{BFloat16, Double, Float, Half, Long};

fn t(values: &[f32], sizes: &[i64]) -> Tensor {
    Tensor::from_vec(values.to_vec(), sizes).unwrap()
}

fn a() -> Tensor {
    t(&[0.5, -1.25, 2.0, 3.0, 0.125, -0.75], &[2, 3])
}

fn b() -> Tensor {
    ops::div(
        &ops::arange(12)
            .unwrap()
            .to(Float)
            .unwrap()
            .view(&[3, 4])
            .unwrap(),
        &t(&[7.0], &[]),
    )
    .unwrap()
}

fn bf16(x: &Tensor) -> Tensor {
    x.to(BFloat16).unwrap()
}

fn cpu_bf16<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    autocast(Device::CPU, BFloat16, f)
}

fn f32s(x: &Tensor) -> Vec<f32> {
    x.to(Float).unwrap().to_vec::<f32>().unwrap()
}

#[test]
fn lower_precision_list_runs_in_the_region_dtype() -> Result<()> {
    let (a, b) = (a(), b());
    let c = cpu_bf16(|| ops::mm(&a, &b))?;
    assert_eq!(c.dtype(), BFloat16);
    // The same as casting by hand: the inputs are cast, the kernel runs in bfloat16.
    assert_eq!(f32s(&c), f32s(&ops::mm(&bf16(&a), &bf16(&b))?));
    // float16 inputs are cast to the region's dtype too.
    assert_eq!(cpu_bf16(|| ops::mm(&a.to(Half)?, &b))?.dtype(), BFloat16);
    // Every lower-precision operator we have.
    let x3 = ops::ones(&[2, 2, 3])?;
    let y3 = ops::ones(&[2, 3, 4])?;
    cpu_bf16(|| {
        assert_eq!(ops::bmm(&x3, &y3)?.dtype(), BFloat16);
        assert_eq!(ops::matmul(&a, &b)?.dtype(), BFloat16);
        assert_eq!(ops::addmm(&ops::ones(&[4])?, &a, &b)?.dtype(), BFloat16);
        assert_eq!(ops::linear(&a, &ops::ones(&[5, 3])?)?.dtype(), BFloat16);
        let img = ops::ones(&[1, 2, 5, 5])?;
        assert_eq!(
            ops::conv2d(&img, &ops::ones(&[3, 2, 3, 3])?)?.dtype(),
            BFloat16
        );
        let seq = ops::ones(&[1, 2, 7])?;
        assert_eq!(
            ops::conv1d(&seq, &ops::ones(&[3, 2, 3])?)?.dtype(),
            BFloat16
        );
        // Attention: the operator is cast as a whole (its fused kernel then runs in bfloat16).
        let q = ops::ones(&[1, 2, 4, 8])?;
        assert_eq!(
            ops::scaled_dot_product_attention(&q, &q, &q)?.dtype(),
            BFloat16
        );
        Ok(())
    })
}

#[test]
fn only_eligible_arguments_are_cast() -> Result<()> {
    let (a, b) = (a(), b());
    // Integers are not floating: not cast, the result stays int64.
    let ia = ops::ones_with(&[2, 3], ops::OnesOptions::default().dtype(Long))?;
    let ib = ops::ones_with(&[3, 4], ops::OnesOptions::default().dtype(Long))?;
    assert_eq!(cpu_bf16(|| ops::mm(&ia, &ib))?.dtype(), Long);
    // float64 is never cast: mm(double, bfloat16) fails in the kernel, as in PyTorch
    // ("expected m1 and m2 to have the same dtype, but got: double != c10::BFloat16").
    assert!(cpu_bf16(|| ops::mm(&a.to(Double)?, &b)).is_err());
    // Meta tensors have no Autocast key: untouched.
    let m = ops::empty_with(&[2, 3], ops::EmptyOptions::default().device(Device::META))?;
    let n = ops::empty_with(&[3, 4], ops::EmptyOptions::default().device(Device::META))?;
    assert_eq!(cpu_bf16(|| ops::mm(&m, &n))?.dtype(), Float);
    Ok(())
}

#[test]
fn fp32_list_runs_in_float32() -> Result<()> {
    let x = bf16(&a());
    let loss = cpu_bf16(|| ops::mse_loss(&x, &x))?;
    assert_eq!(loss.dtype(), Float);
    // float64 is left alone: mse_loss(float32 (cast from half), double) promotes to double.
    let d = cpu_bf16(|| ops::mse_loss(&a().to(Half)?, &a().to(Double)?))?;
    assert_eq!(d.dtype(), Double);
    let logits = bf16(&a());
    let target = Tensor::from_vec(vec![2i64, 0], &[2])?;
    cpu_bf16(|| {
        assert_eq!(ops::cross_entropy_loss(&logits, &target)?.dtype(), Float);
        let logp = ops::log_softmax(&logits.to(Float)?, 1)?.to(BFloat16)?;
        assert_eq!(ops::nll_loss(&logp, &target)?.dtype(), Float);
        Ok(())
    })
}

#[test]
fn promote_list_runs_in_the_widest_dtype() -> Result<()> {
    let x = a();
    let cat = |ts: Vec<Tensor>| cpu_bf16(|| ops::cat(&ts));
    assert_eq!(cat(vec![bf16(&x), x.clone()])?.dtype(), Float);
    assert_eq!(cat(vec![bf16(&x), bf16(&x)])?.dtype(), BFloat16);
    assert_eq!(cat(vec![x.to(Double)?, x.clone()])?.dtype(), Double);
    assert_eq!(cat(vec![x.to(Double)?, bf16(&x)])?.dtype(), Double);
    let ints = ops::ones_with(&[2, 3], ops::OnesOptions::default().dtype(Long))?;
    assert_eq!(cat(vec![ints, bf16(&x)])?.dtype(), BFloat16);
    for pair in [vec![bf16(&x), x.to(Half)?], vec![x.to(Half)?, x.to(Half)?]] {
        let e = cat(pair).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Unexpected floating ScalarType in at::autocast::prioritize"
        );
    }
    let s = cpu_bf16(|| ops::stack(&[bf16(&x), x.clone()]))?;
    assert_eq!((s.dtype(), s.sizes()), (Float, &[2, 2, 3][..]));
    Ok(())
}

#[test]
fn other_operators_fall_through() -> Result<()> {
    let x = a();
    cpu_bf16(|| {
        assert_eq!(x.relu()?.dtype(), Float);
        assert_eq!(ops::add(&bf16(&x), &x)?.dtype(), Float); // ordinary type promotion
        Ok(())
    })?;
    let d = Dispatcher::global();
    assert!(d.has_kernel_for_dispatch_key("aten::mm", DispatchKey::AutocastCPU)?);
    assert!(!d.has_kernel_for_dispatch_key("aten::relu", DispatchKey::AutocastCPU)?);
    assert!(d.has_backend_fallback_for_dispatch_key(DispatchKey::AutocastCPU));
    assert!(d
        .dump_table("aten::relu")
        .contains("AutocastCPU: fallthrough"));
    Ok(())
}

#[test]
fn regions_nest_and_restore() -> Result<()> {
    let (a, b) = (a(), b());
    assert!(!is_autocast_enabled(DeviceType::CPU));
    assert_eq!(get_autocast_dtype(DeviceType::CPU)?, BFloat16); // the default
    {
        let _outer = AutocastGuard::with_options(Device::CPU, AutocastOptions::default())?;
        assert!(is_autocast_enabled(DeviceType::CPU));
        assert!(!is_autocast_enabled(DeviceType::CUDA));
        assert_eq!(ops::mm(&a, &b)?.dtype(), BFloat16);
        autocast_with(
            Device::CPU,
            AutocastOptions::default().enabled(false),
            || {
                assert!(!is_autocast_enabled(DeviceType::CPU));
                assert_eq!(ops::mm(&a, &b)?.dtype(), Float);
                Ok::<_, DispatchError>(())
            },
        )?;
        autocast(Device::CPU, Half, || {
            assert_eq!(get_autocast_dtype(DeviceType::CPU)?, Half);
            assert_eq!(ops::mm(&a, &b)?.dtype(), Half);
            // Under float16, bfloat16 is the odd one out.
            assert!(ops::cat(&[bf16(&a), a.to(Half)?]).is_err());
            Ok::<_, DispatchError>(())
        })?;
        assert!(is_autocast_enabled(DeviceType::CPU));
        assert_eq!(get_autocast_dtype(DeviceType::CPU)?, BFloat16);
        assert_eq!(ops::mm(&a, &b)?.dtype(), BFloat16);
    }
    assert!(!is_autocast_enabled(DeviceType::CPU));
    assert_eq!(ops::mm(&a, &b)?.dtype(), Float);
    Ok(())
}

#[test]
fn unsupported_dtype_disables_and_unknown_device_fails() -> Result<()> {
    let (a, b) = (a(), b());
    // PyTorch warns "In CPU autocast, but the target dtype is not supported. Disabling autocast."
    let c = autocast(Device::CPU, Double, || {
        assert!(!is_autocast_enabled(DeviceType::CPU));
        ops::mm(&a, &b)
    })?;
    assert_eq!(c.dtype(), Float);
    let e = AutocastGuard::new(Device::META, BFloat16).err().unwrap();
    assert_eq!(
        e.to_string(),
        "User specified an unsupported autocast device_type 'meta'"
    );
    Ok(())
}

#[test]
fn regions_are_per_thread() -> Result<()> {
    let _region = AutocastGuard::new(Device::CPU, BFloat16)?;
    let other = std::thread::spawn(|| {
        (
            is_autocast_enabled(DeviceType::CPU),
            ops::mm(&a(), &b()).unwrap().dtype(),
        )
    })
    .join()
    .unwrap();
    assert_eq!(other, (false, Float));
    Ok(())
}

/// Gradients flow through the casts back to the float32 weight, with PyTorch's values
/// (recorded from `torch.autocast("cpu", dtype=...)`; `linear` then `mse_loss` against zeros).
#[test]
fn autograd_through_casts_matches_pytorch() -> Result<()> {
    let x = ops::div(&ops::arange(6)?.to(Float)?.view(&[2, 3])?, &t(&[7.0], &[]))?;
    let w0 = ops::sub(
        &ops::div(
            &ops::arange(12)?.to(Float)?.view(&[4, 3])?,
            &t(&[11.0], &[]),
        )?,
        &t(&[0.5], &[]),
    )?;
    #[rustfmt::skip]
    let cases: [(ScalarType, [f32; 8], f32, [f32; 12]); 2] = [
        (BFloat16,
         [-0.1494140625, -0.032470703125, 0.08447265625, 0.201171875, -0.67578125, -0.2080078125, 0.259765625, 0.7265625],
         0.14578792452812195,
         [-0.072265625, -0.1015625, -0.1318359375, -0.022216796875, -0.03076171875, -0.03955078125, 0.02783203125, 0.0400390625, 0.052490234375, 0.07763671875, 0.11083984375, 0.14453125]),
        (Half,
         [-0.1492919921875, -0.032440185546875, 0.08441162109375, 0.2012939453125, -0.67529296875, -0.207763671875, 0.259765625, 0.72705078125],
         0.14578154683113098,
         [-0.07232666015625, -0.101806640625, -0.1312255859375, -0.0222625732421875, -0.0308380126953125, -0.0394287109375, 0.02783203125, 0.04010009765625, 0.05242919921875, 0.077880859375, 0.11102294921875, 0.1441650390625]),
    ];
    for (dtype, y_expected, loss_expected, grad_expected) in cases {
        let w = w0.detach().requires_grad_(true)?;
        let (y, loss) = autocast(Device::CPU, dtype, || {
            let y = ops::linear(&x, &w)?;
            let loss = ops::mse_loss(&y, &ops::zeros(&[2, 4])?)?;
            Ok::<_, DispatchError>((y, loss))
        })?;
        assert_eq!((y.dtype(), loss.dtype()), (dtype, Float));
        assert_eq!(f32s(&y), y_expected);
        assert!((loss.to_vec::<f32>()?[0] - loss_expected).abs() < 1e-6);
        loss.backward()?;
        let g = w.grad().unwrap();
        assert_eq!(g.dtype(), Float);
        for (got, want) in g.to_vec::<f32>()?.iter().zip(grad_expected) {
            assert!(
                (got - want).abs() <= 1e-3 * want.abs().max(1e-2),
                "{got} vs {want}"
            );
        }
    }
    Ok(())
}

//! Which dtypes each operator takes, and its message when it refuses one, against PyTorch 2.15
//! on the CPU (every expected message was recorded from it).

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_ops::options::{CrossEntropyLossOptions, LayerNormOptions};
use switchboard_tensor::{ScalarType as S, Tensor};

use switchboard_cpu as _;

fn err<T: std::fmt::Debug>(r: Result<T>) -> String {
    match r {
        Ok(t) => panic!("expected an error, got {t:?}"),
        Err(e) => e.to_string(),
    }
}

fn ones(sizes: &[i64], dtype: S) -> Tensor {
    Tensor::ones(sizes, dtype).unwrap()
}

#[test]
fn bool_inputs_of_numeric_ops() {
    let b = ones(&[2, 3], S::Bool);
    assert_eq!(err(ops::abs(&b)), "\"abs_cpu\" not implemented for 'Bool'");
    assert_eq!(
        err(ops::argmax(&b)),
        "argmax(): does not support bool input"
    );
    assert_eq!(
        err(ops::argmin(&b)),
        "argmin(): does not support bool input"
    );
    assert_eq!(err(ops::relu(&b)), "Boolean inputs not supported for relu");
    // max.dim/min.dim (which also return the values) and amax take bools.
    assert!(ops::max_dim(&b, 1).is_ok() && ops::amax(&b).is_ok());
    assert!(ops::abs(&ones(&[2], S::Byte)).is_ok());
}

#[test]
fn softmax_backward_input_dtype() {
    let f = ones(&[2, 3], S::Float);
    for (name, r) in [
        ("softmax", ops::_softmax_backward_data(&f, &f, 1, S::Half)),
        (
            "log_softmax",
            ops::_log_softmax_backward_data(&f, &f, 1, S::Half),
        ),
    ] {
        // PyTorch's meta function makes the result Half, which its CPU kernel refuses to write.
        assert_eq!(
            err(r),
            "expected scalar type Float but found Half",
            "{name}"
        );
    }
    // Any other input dtype leaves the gradient's dtype.
    let r = ops::_log_softmax_backward_data(&f, &f, 1, S::Double).unwrap();
    assert_eq!(r.dtype(), S::Float);
    let h = ones(&[2, 3], S::Half);
    let r = ops::_softmax_backward_data(&h, &h, 1, S::Float).unwrap();
    assert_eq!(r.dtype(), S::Half);
    let d = ones(&[2, 3], S::Double);
    assert_eq!(
        err(ops::_log_softmax_backward_data(&f, &d, 1, S::Float)),
        "expected scalar type Float but found Double"
    );
    let l = ones(&[2, 3], S::Long);
    assert_eq!(
        err(ops::_softmax_backward_data(&l, &l, 1, S::Long)),
        "\"softmax_backward_lastdim_kernel_impl\" not implemented for 'Long'"
    );
}

#[test]
fn nll_loss_target_dtypes() {
    let logp = ops::log_softmax(&ones(&[2, 3], S::Float), 1).unwrap();
    let target = |dt| Tensor::zeros(&[2], dt).unwrap();
    for dt in [S::Float, S::Int, S::Bool] {
        let name = dt.c10_name();
        assert_eq!(
            err(ops::nll_loss(&logp, &target(dt))),
            format!("expected target dtype to be Long or Byte, but got {name}")
        );
        let (one, two) = (
            ones(&[], S::Float),
            Tensor::full(&[], 2.0, S::Float).unwrap(),
        );
        let grad = ops::nll_loss_backward(&one, &logp, &target(dt), None, 1, -100, &two);
        assert_eq!(
            err(grad),
            format!("expected scalar type Long but found {name}")
        );
    }
    assert!(ops::nll_loss(&logp, &target(S::Byte)).is_ok());
    // The target is checked before the input's dtype.
    assert_eq!(
        err(ops::nll_loss(&ones(&[2, 3], S::Long), &target(S::Float))),
        "expected target dtype to be Long or Byte, but got Float"
    );
    let logp4 = ones(&[1, 3, 2, 2], S::Float);
    let target4 = |dt| Tensor::zeros(&[1, 2, 2], dt).unwrap();
    assert_eq!(
        err(ops::nll_loss2d(&logp4, &target4(S::Float))),
        "expected target dtype to be Long or Byte, but got Float"
    );
    assert_eq!(
        err(ops::nll_loss2d(&logp4, &target4(S::Byte))),
        "expected scalar type Long but found Byte"
    );
}

#[test]
fn layer_norm_parameter_dtypes() {
    let ln = |x: S, w: S| {
        let weight = ones(&[3], w);
        let options = LayerNormOptions {
            weight: Some(&weight),
            ..Default::default()
        };
        ops::layer_norm_with(&ones(&[2, 3], x), &[3], options).map(|t| t.dtype())
    };
    let float_only = "mixed dtype (CPU): expect parameter to have scalar type of Float";
    assert_eq!(err(ln(S::Float, S::Double)), float_only);
    assert_eq!(err(ln(S::Float, S::Half)), float_only);
    assert_eq!(err(ln(S::Half, S::BFloat16)), float_only);
    assert_eq!(
        err(ln(S::Double, S::Float)),
        "mixed dtype (CPU): all inputs must share same datatype."
    );
    assert_eq!(ln(S::Half, S::Float).unwrap(), S::Half);
    assert_eq!(ln(S::BFloat16, S::BFloat16).unwrap(), S::BFloat16);
    let (h, f) = (ones(&[3], S::Half), ones(&[3], S::Float));
    assert_eq!(
        err(ops::native_layer_norm(
            &ones(&[2, 3], S::Half),
            &[3],
            Some(&h),
            Some(&f),
            1e-5
        )),
        "expected scalar type Half but found Float"
    );
}

#[test]
fn convolution_operand_dtypes() {
    let x = ones(&[1, 1, 3, 3], S::Float);
    let w = ones(&[1, 1, 2, 2], S::Double);
    assert_eq!(
        err(ops::conv2d(&x, &w)),
        "expected scalar type Float but found Double"
    );
    let wf = ones(&[1, 1, 2, 2], S::Float);
    let b = ones(&[1], S::Double);
    let options = switchboard_ops::options::Conv2dOptions {
        bias: Some(&b),
        ..Default::default()
    };
    assert_eq!(
        err(ops::conv2d_with(&x, &wf, options)),
        "Input type (float) and bias type (double) should be the same"
    );
}

#[test]
fn masks_and_conditions() {
    let f = ones(&[2, 3], S::Float);
    assert_eq!(
        err(ops::masked_fill(&f, &f, 1)),
        "masked_fill_ only supports boolean masks, but got mask with dtype float"
    );
    assert_eq!(
        err(ops::masked_fill(&f, &ones(&[2, 3], S::Byte), 1)),
        "masked_fill_ only supports boolean masks, but got mask with dtype unsigned char"
    );
    // A uint8 `where` condition is deprecated (a warning) but taken as bool.
    let c = Tensor::from_vec(vec![1u8, 0], &[2]).unwrap();
    let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    let r = ops::r#where(&c, &a, &ops::neg(&a).unwrap()).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [1.0, -2.0]);
    assert_eq!(
        err(ops::r#where(&f, &f, &f)),
        "where expected condition to be a boolean tensor, but got a tensor with dtype Float"
    );
}

#[test]
fn embedding_backward_takes_every_dtype() {
    let idx = Tensor::from_vec(vec![0i64, 1, 1], &[3]).unwrap();
    for dt in [S::Byte, S::Char, S::Int, S::Long] {
        let g = ones(&[3, 2], dt);
        let r = ops::embedding_dense_backward(&g, &idx, 3, -1, false).unwrap();
        assert_eq!(r.to_vec_as::<i64>().unwrap(), [1, 1, 2, 2, 0, 0], "{dt:?}");
        // Scaled by frequency: 1/2 truncates to 0 in an integer type.
        let r = ops::embedding_dense_backward(&g, &idx, 3, -1, true).unwrap();
        assert_eq!(r.to_vec_as::<i64>().unwrap(), [1, 1, 0, 0, 0, 0], "{dt:?}");
    }
    let g = ones(&[3, 2], S::Bool);
    for scale in [false, true] {
        let r = ops::embedding_dense_backward(&g, &idx, 3, -1, scale).unwrap();
        assert_eq!(
            r.to_vec::<bool>().unwrap(),
            [true, true, true, true, false, false]
        );
    }
}

#[test]
fn cross_entropy_nan_label_smoothing_is_no_smoothing() {
    let x = Tensor::from_vec(vec![0.5f32, -1.0, 2.0, 0.1, 0.2, 0.3], &[2, 3]).unwrap();
    let target = Tensor::from_vec(vec![2i64, 0], &[2]).unwrap();
    let with = |label_smoothing: f64, target: &Tensor| {
        let options = CrossEntropyLossOptions {
            label_smoothing,
            ..Default::default()
        };
        ops::cross_entropy_loss_with(&x, target, options)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    };
    // PyTorch 2.15: 0.7216271162033081 for both.
    assert_eq!(with(f64::NAN, &target), with(0.0, &target));
    assert!((with(f64::NAN, &target)[0] - 0.721_627_1).abs() < 1e-6);
    // Class probabilities: the same rule.
    let probs = Tensor::from_vec(vec![0.0f32, 0.0, 1.0, 1.0, 0.0, 0.0], &[2, 3]).unwrap();
    assert_eq!(with(f64::NAN, &probs), with(0.0, &probs));
    assert_eq!(
        ops::cross_entropy_loss_with(
            &x,
            &target,
            CrossEntropyLossOptions {
                label_smoothing: 1.5,
                ..Default::default()
            }
        )
        .unwrap_err()
        .to_string(),
        "label_smoothing must be between 0.0 and 1.0. Got: 1.5"
    );
}

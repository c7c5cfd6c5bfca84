//! PyTorch's other overloads (`.out`, `.Scalar_out`, in-place, Tensor and functional forms):
//! each against its functional form, on CPU and (shapes) on Meta.

use switchboard::ops::{self, TensorOps};
use switchboard::prelude::*;
use switchboard::tensor::Generator;

mod common;
use common::*;

fn f(v: &[f64], shape: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

fn empty(dtype: ScalarType) -> Tensor {
    Tensor::zeros(&[0], dtype).unwrap()
}

fn empty_f() -> Tensor {
    empty(ScalarType::Double)
}

/// A meta tensor shaped like `t`.
fn meta(t: &Tensor) -> Tensor {
    ops::empty_with(
        t.sizes(),
        ops::EmptyOptions::default()
            .dtype(t.dtype())
            .device(Device::META),
    )
    .unwrap()
}

/// Calls an out= form with an `out` of `want`'s shape and dtype and compares the result.
fn same_out(call: impl Fn(&Tensor) -> Result<Tensor, DispatchError>, want: &Tensor, what: &str) {
    let out = Tensor::zeros(want.sizes(), want.dtype()).unwrap();
    let got = call(&out).unwrap();
    same(&got, want, what);
    // An out tensor of another shape is resized, as PyTorch's resize_output does.
    if let Ok(resized) = call(&empty(want.dtype())) {
        same(&resized, want, what);
    }
}

/// Asserts equal shapes, dtypes and values.
fn same(got: &Tensor, want: &Tensor, what: &str) {
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    assert_close(got, want, what);
}

#[test]
fn pointwise_out_and_scalar_forms() {
    let a = f(&[1.0, -2.0, 3.5, 0.0], &[2, 2]);
    let b = f(&[2.0, 4.0, -1.0, 3.0], &[2, 2]);
    same_out(
        |o| ops::add_scalar_out(&a, 2, o),
        &ops::add_scalar(&a, 2).unwrap(),
        "add.Scalar_out",
    );
    same_out(
        |o| ops::sub_scalar_out(&a, 2, o),
        &ops::sub_scalar(&a, 2).unwrap(),
        "sub.Scalar_out",
    );
    same_out(
        |o| ops::mul_scalar_out(&a, 3, o),
        &ops::mul_scalar(&a, 3).unwrap(),
        "mul.Scalar_out",
    );
    same_out(
        |o| ops::div_scalar_out(&a, 4, o),
        &ops::div_scalar(&a, 4).unwrap(),
        "div.Scalar_out",
    );
    let floor = ops::div_scalar_mode_out(
        &a,
        2,
        Some("floor"),
        &Tensor::zeros(&[2, 2], ScalarType::Double).unwrap(),
    )
    .unwrap();
    assert_eq!(vals(&floor), [0.0, -1.0, 1.0, 0.0]);
    // rsub: other - alpha * self.
    let r = ops::rsub_scalar_with(&a, 10, ops::RsubScalarOptions::default().alpha(2)).unwrap();
    assert_eq!(vals(&r), [8.0, 14.0, 3.0, 10.0]);
    same_out(
        |o| ops::rsub_tensor_out(&a, &b, o),
        &ops::rsub(&a, &b).unwrap(),
        "rsub.Tensor_out",
    );
    same_out(
        |o| ops::rsub_scalar_out(&a, 10, o),
        &ops::rsub_scalar(&a, 10).unwrap(),
        "rsub.Scalar_out",
    );
    same_out(
        |o| ops::pow_scalar_out(2, &a, o),
        &ops::pow_scalar(2, &a).unwrap(),
        "pow.Scalar_out",
    );
    same_out(|o| ops::relu_out(&a, o), &a.relu().unwrap(), "relu.out");
    // In-place rounding divisions.
    let c = ops::clone(&a).unwrap();
    c.div_tensor_mode_(&b, Some("trunc")).unwrap();
    same(
        &c,
        &ops::div_tensor_mode(&a, &b, Some("trunc")).unwrap(),
        "div_.Tensor_mode",
    );
    let c = ops::clone(&a).unwrap();
    c.div_scalar_mode_(3, Some("floor")).unwrap();
    same(
        &c,
        &ops::div_scalar_mode(&a, 3, Some("floor")).unwrap(),
        "div_.Scalar_mode",
    );
    // out= casts a float result only to a float dtype.
    let e = ops::add_scalar_out(&a, 1, &Tensor::zeros(&[2, 2], ScalarType::Long).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("result type Double can't be cast to the desired output type Long"),
        "{e}"
    );
    let e = ops::relu_out(&a, &empty(ScalarType::Long))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("result type Double can't be cast to the desired output type Long"),
        "{e}"
    );
}

#[test]
fn comparisons_out_and_in_place() {
    let a = f(&[1.0, 2.0, 3.0], &[3]);
    let b = f(&[3.0, 2.0, 1.0], &[3]);
    let bool_out = || Tensor::zeros(&[3], ScalarType::Bool).unwrap();
    type Forms = (
        fn(&Tensor, &Tensor) -> Result<Tensor, DispatchError>,
        fn(&Tensor, &Tensor, &Tensor) -> Result<Tensor, DispatchError>,
        fn(&Tensor, f64, &Tensor) -> Result<Tensor, DispatchError>,
    );
    let forms: [(&str, Forms); 6] = [
        (
            "eq",
            (ops::eq, ops::eq_tensor_out, |x, s, o| {
                ops::eq_scalar_out(x, s, o)
            }),
        ),
        (
            "ne",
            (ops::ne, ops::ne_tensor_out, |x, s, o| {
                ops::ne_scalar_out(x, s, o)
            }),
        ),
        (
            "lt",
            (ops::lt, ops::lt_tensor_out, |x, s, o| {
                ops::lt_scalar_out(x, s, o)
            }),
        ),
        (
            "le",
            (ops::le, ops::le_tensor_out, |x, s, o| {
                ops::le_scalar_out(x, s, o)
            }),
        ),
        (
            "gt",
            (ops::gt, ops::gt_tensor_out, |x, s, o| {
                ops::gt_scalar_out(x, s, o)
            }),
        ),
        (
            "ge",
            (ops::ge, ops::ge_tensor_out, |x, s, o| {
                ops::ge_scalar_out(x, s, o)
            }),
        ),
    ];
    for (name, (func, tensor_out, scalar_out)) in forms {
        let want = func(&a, &b).unwrap();
        let got = tensor_out(&a, &b, &bool_out()).unwrap();
        assert_eq!(
            got.to_vec::<bool>().unwrap(),
            want.to_vec::<bool>().unwrap(),
            "{name}.Tensor_out"
        );
        let got = scalar_out(&a, 2.0, &bool_out()).unwrap();
        let want = func(&a, &f(&[2.0], &[])).unwrap();
        assert_eq!(
            got.to_vec::<bool>().unwrap(),
            want.to_vec::<bool>().unwrap(),
            "{name}.Scalar_out"
        );
    }
    // In place: 0/1 in self's dtype.
    let c = ops::clone(&a).unwrap();
    c.lt_tensor_(&b).unwrap();
    assert_eq!(vals(&c), [1.0, 0.0, 0.0]);
    let c = ops::clone(&a).unwrap();
    c.ge_(2).unwrap();
    assert_eq!(vals(&c), [0.0, 1.0, 1.0]);
    type Scalar_ = fn(&Tensor, Scalar) -> Result<Tensor, DispatchError>;
    type Tensor_ = fn(&Tensor, &Tensor) -> Result<Tensor, DispatchError>;
    let scalar_forms: [(&str, Scalar_, Tensor_, [f64; 3]); 6] = [
        (
            "eq",
            |t, s| t.eq_(s),
            |t, o| t.eq_tensor_(o),
            [0.0, 1.0, 0.0],
        ),
        (
            "ne",
            |t, s| t.ne_(s),
            |t, o| t.ne_tensor_(o),
            [1.0, 0.0, 1.0],
        ),
        (
            "lt",
            |t, s| t.lt_(s),
            |t, o| t.lt_tensor_(o),
            [1.0, 0.0, 0.0],
        ),
        (
            "le",
            |t, s| t.le_(s),
            |t, o| t.le_tensor_(o),
            [1.0, 1.0, 0.0],
        ),
        (
            "gt",
            |t, s| t.gt_(s),
            |t, o| t.gt_tensor_(o),
            [0.0, 0.0, 1.0],
        ),
        (
            "ge",
            |t, s| t.ge_(s),
            |t, o| t.ge_tensor_(o),
            [0.0, 1.0, 1.0],
        ),
    ];
    // a = [1, 2, 3] against 2 and against b = [3, 2, 1]: the same answers.
    for (name, scalar_, tensor_, want) in scalar_forms {
        let c = ops::clone(&a).unwrap();
        scalar_(&c, Scalar::Int(2)).unwrap();
        assert_eq!(vals(&c), want, "{name}_.Scalar");
        let c = ops::clone(&a).unwrap();
        tensor_(&c, &b).unwrap();
        assert_eq!(vals(&c), want, "{name}_.Tensor");
    }
}

#[test]
fn where_masked_fill_and_clamp_forms() {
    let cond = Tensor::from_vec(vec![true, false, true], &[3]).unwrap();
    let w = ops::where_scalar(&cond, 1.5, 2).unwrap();
    assert_eq!(w.dtype(), ScalarType::Float);
    assert_eq!(w.to_vec::<f32>().unwrap(), [1.5, 2.0, 1.5]);
    let a = f(&[1.0, -2.0, 3.0], &[3]);
    same_out(
        |o| ops::masked_fill_scalar_out(&a, &cond, 9, o),
        &ops::masked_fill(&a, &cond, 9).unwrap(),
        "masked_fill.Scalar_out",
    );
    let v = f(&[7.0], &[]);
    same_out(
        |o| ops::masked_fill_tensor_out(&a, &cond, &v, o),
        &ops::masked_fill_tensor(&a, &cond, &v).unwrap(),
        "masked_fill.Tensor_out",
    );
    let lo = f(&[0.0, 0.0, 4.0], &[3]);
    let hi = f(&[0.5, 1.0, 5.0], &[3]);
    let clamp_t = |min: Option<&Tensor>, max: Option<&Tensor>| {
        ops::clamp_tensor_with(&a, ops::ClampTensorOptions { min, max }).unwrap()
    };
    same(
        &ops::clamp_min_tensor(&a, &lo).unwrap(),
        &clamp_t(Some(&lo), None),
        "clamp_min.Tensor",
    );
    same(
        &ops::clamp_max_tensor(&a, &hi).unwrap(),
        &clamp_t(None, Some(&hi)),
        "clamp_max.Tensor",
    );
    same_out(
        |o| ops::clamp_min_out(&a, 0, o),
        &ops::clamp_min(&a, 0).unwrap(),
        "clamp_min.out",
    );
    same_out(
        |o| ops::clamp_max_out(&a, 0, o),
        &ops::clamp_max(&a, 0).unwrap(),
        "clamp_max.out",
    );
    same_out(
        |o| ops::clamp_min_tensor_out(&a, &lo, o),
        &clamp_t(Some(&lo), None),
        "clamp_min.Tensor_out",
    );
    same_out(
        |o| ops::clamp_max_tensor_out(&a, &hi, o),
        &clamp_t(None, Some(&hi)),
        "clamp_max.Tensor_out",
    );
    same(
        &ops::clamp_tensor_out_with(
            &a,
            &Tensor::zeros(&[3], ScalarType::Double).unwrap(),
            ops::ClampTensorOutOptions {
                min: Some(&lo),
                max: Some(&hi),
            },
        )
        .unwrap(),
        &clamp_t(Some(&lo), Some(&hi)),
        "clamp.Tensor_out",
    );
    let c = ops::clone(&a).unwrap();
    ops::clamp_min_(&c, 0).unwrap();
    same(&c, &ops::clamp_min(&a, 0).unwrap(), "clamp_min_");
    let c = ops::clone(&a).unwrap();
    ops::clamp_max_(&c, 0).unwrap();
    same(&c, &ops::clamp_max(&a, 0).unwrap(), "clamp_max_");
    let c = ops::clone(&a).unwrap();
    ops::clamp_min_tensor_(&c, &lo).unwrap();
    same(&c, &clamp_t(Some(&lo), None), "clamp_min_.Tensor");
    let c = ops::clone(&a).unwrap();
    ops::clamp_max_tensor_(&c, &hi).unwrap();
    same(&c, &clamp_t(None, Some(&hi)), "clamp_max_.Tensor");
    let c = ops::clone(&a).unwrap();
    ops::clamp_tensor_with_(
        &c,
        ops::ClampTensorInplaceOptions {
            min: Some(&lo),
            max: Some(&hi),
        },
    )
    .unwrap();
    same(&c, &clamp_t(Some(&lo), Some(&hi)), "clamp_.Tensor");
}

#[test]
fn reduction_out_forms() {
    let a = r(&[3, 4], 1, -2.0, 2.0);
    same_out(|o| ops::sum_out(&a, o), &a.sum().unwrap(), "sum.out");
    same_out(
        |o| ops::mean_dtype_out(&a, o),
        &a.mean().unwrap(),
        "mean.dtype_out",
    );
    let amax =
        ops::amax_out_with(&a, &empty_f(), ops::AmaxOutOptions::default().dim(&[1])).unwrap();
    same(
        &amax,
        &ops::amax_with(&a, ops::AmaxOptions::default().dim(&[1])).unwrap(),
        "amax.out",
    );
    let amin = ops::amin_out_with(
        &a,
        &empty_f(),
        ops::AminOutOptions::default().dim(&[0]).keepdim(true),
    )
    .unwrap();
    same(
        &amin,
        &ops::amin_with(&a, ops::AminOptions::default().dim(&[0]).keepdim(true)).unwrap(),
        "amin.out",
    );
    same_out(
        |o| ops::max_unary_out(&a, o),
        &a.max().unwrap(),
        "max.unary_out",
    );
    same_out(
        |o| ops::min_unary_out(&a, o),
        &a.min().unwrap(),
        "min.unary_out",
    );
    let b = r(&[3, 4], 2, -2.0, 2.0);
    same(
        &ops::max_other(&a, &b).unwrap(),
        &ops::maximum(&a, &b).unwrap(),
        "max.other",
    );
    same(
        &ops::min_other(&a, &b).unwrap(),
        &ops::minimum(&a, &b).unwrap(),
        "min.other",
    );
    same_out(
        |o| ops::max_out(&a, &b, o),
        &ops::maximum(&a, &b).unwrap(),
        "max.out",
    );
    same_out(
        |o| ops::min_out(&a, &b, o),
        &ops::minimum(&a, &b).unwrap(),
        "min.out",
    );
    let (v, i) = ops::max_dim_max(&a, 1, &empty_f(), &empty(ScalarType::Long)).unwrap();
    let (wv, wi) = ops::max_dim(&a, 1).unwrap();
    same(&v, &wv, "max.dim_max values");
    same(&i, &wi, "max.dim_max indices");
    let (v, i) = ops::min_dim_min(&a, 0, &empty_f(), &empty(ScalarType::Long)).unwrap();
    let (wv, wi) = ops::min_dim(&a, 0).unwrap();
    same(&v, &wv, "min.dim_min values");
    same(&i, &wi, "min.dim_min indices");
    same(
        &ops::argmax_out(&a, &empty(ScalarType::Long)).unwrap(),
        &a.argmax().unwrap(),
        "argmax.out",
    );
    same(
        &ops::argmin_out(&a, &empty(ScalarType::Long)).unwrap(),
        &a.argmin().unwrap(),
        "argmin.out",
    );
    same_out(
        |o| ops::var_out(&a, Some(&[1]), o),
        &ops::var_dim(&a, Some(&[1])).unwrap(),
        "var.out",
    );
    same_out(
        |o| ops::var_correction_out(&a, o),
        &ops::var_correction(&a).unwrap(),
        "var.correction_out",
    );
    // Exact-dtype outs name both dtypes as PyTorch's meta function for amax does.
    let e = ops::amax_out(&a, &empty(ScalarType::Float))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "Expected the dtype for input and out to match, but got Double for input's dtype \
             and Float for out's dtype."
        ),
        "{e}"
    );
}

#[test]
fn nn_out_forms() {
    let x = r(&[2, 5], 3, -2.0, 2.0);
    same_out(
        |o| ops::_softmax_out(&x, 1, false, o),
        &ops::_softmax(&x, 1, false).unwrap(),
        "_softmax.out",
    );
    same_out(
        |o| ops::_log_softmax_out(&x, 1, false, o),
        &ops::_log_softmax(&x, 1, false).unwrap(),
        "_log_softmax.out",
    );
    same_out(
        |o| ops::softmax_int_out(&x, 0, o),
        &ops::softmax(&x, 0).unwrap(),
        "softmax.int_out",
    );
    same_out(
        |o| ops::log_softmax_int_out(&x, 1, o),
        &ops::log_softmax(&x, 1).unwrap(),
        "log_softmax.int_out",
    );
    let y = ops::_softmax(&x, 1, false).unwrap();
    let g = r(&[2, 5], 4, -1.0, 1.0);
    same_out(
        |o| ops::_softmax_backward_data_out(&g, &y, 1, ScalarType::Double, o),
        &ops::_softmax_backward_data(&g, &y, 1, ScalarType::Double).unwrap(),
        "_softmax_backward_data.out",
    );
    same_out(
        |o| ops::_log_softmax_backward_data_out(&g, &y, 1, ScalarType::Double, o),
        &ops::_log_softmax_backward_data(&g, &y, 1, ScalarType::Double).unwrap(),
        "_log_softmax_backward_data.out",
    );
    let logp = ops::log_softmax(&x, 1).unwrap();
    let target = long(&[4, 1], &[2]);
    same_out(
        |o| ops::nll_loss_out(&logp, &target, o),
        &ops::nll_loss(&logp, &target).unwrap(),
        "nll_loss.out",
    );
    let (o, tw) =
        ops::nll_loss_forward_output(&logp, &target, None, 2, -100, &empty_f(), &empty_f())
            .unwrap();
    let (wo, wtw) = ops::nll_loss_forward(&logp, &target, None, 2, -100).unwrap();
    same(&o, &wo, "nll_loss_forward.output");
    same(&tw, &wtw, "nll_loss_forward.output total_weight");
    let go = f(&[1.5], &[]);
    same_out(
        |o| ops::nll_loss_backward_grad_input(&go, &logp, &target, None, 2, -100, &wtw, o),
        &ops::nll_loss_backward(&go, &logp, &target, None, 2, -100, &wtw).unwrap(),
        "nll_loss_backward.grad_input",
    );
    let x4 = r(&[2, 3, 2, 2], 5, -2.0, 0.0);
    let t3 = long(&[0, 1, 2, 0, 1, 1, 2, 0], &[2, 2, 2]);
    same_out(
        |o| ops::nll_loss2d_out(&x4, &t3, o),
        &ops::nll_loss2d(&x4, &t3).unwrap(),
        "nll_loss2d.out",
    );
    let (o, tw) =
        ops::nll_loss2d_forward_output(&x4, &t3, None, 1, -100, &empty_f(), &empty_f()).unwrap();
    let (wo, wtw) = ops::nll_loss2d_forward(&x4, &t3, None, 1, -100).unwrap();
    same(&o, &wo, "nll_loss2d_forward.output");
    same(&tw, &wtw, "nll_loss2d_forward.output total_weight");
    same_out(
        |o| ops::nll_loss2d_backward_grad_input(&go, &x4, &t3, None, 1, -100, &wtw, o),
        &ops::nll_loss2d_backward(&go, &x4, &t3, None, 1, -100, &wtw).unwrap(),
        "nll_loss2d_backward.grad_input",
    );
    let t = r(&[2, 5], 6, -1.0, 1.0);
    same_out(
        |o| ops::mse_loss_out(&x, &t, o),
        &ops::mse_loss(&x, &t).unwrap(),
        "mse_loss.out",
    );
    same_out(
        |o| ops::mse_loss_backward_grad_input(&go, &x, &t, 1, o),
        &ops::mse_loss_backward(&go, &x, &t, 1).unwrap(),
        "mse_loss_backward.grad_input",
    );
    same_out(
        |o| ops::threshold_backward_grad_input(&g, &x, 0, o),
        &ops::threshold_backward(&g, &x, 0).unwrap(),
        "threshold_backward.grad_input",
    );
    same_out(
        |o| ops::sigmoid_backward_grad_input(&g, &y, o),
        &ops::sigmoid_backward(&g, &y).unwrap(),
        "sigmoid_backward.grad_input",
    );
    same_out(
        |o| ops::tanh_backward_grad_input(&g, &y, o),
        &ops::tanh_backward(&g, &y).unwrap(),
        "tanh_backward.grad_input",
    );
    same_out(
        |o| ops::gelu_backward_grad_input(&g, &x, o),
        &ops::gelu_backward(&g, &x).unwrap(),
        "gelu_backward.grad_input",
    );
    same_out(
        |o| ops::silu_backward_grad_input(&g, &x, o),
        &ops::silu_backward(&g, &x).unwrap(),
        "silu_backward.grad_input",
    );
    // dropout_: unchanged when not training, zeroed or scaled by 1/(1-p) when training.
    let d = ops::clone(&x).unwrap();
    ops::dropout_(&d, 0.5, false).unwrap();
    same(&d, &x, "dropout_ eval");
    let d = ops::clone(&x).unwrap();
    ops::dropout_(&d, 0.5, true).unwrap();
    for (got, orig) in vals(&d).iter().zip(vals(&x)) {
        assert!(
            *got == 0.0 || (got - 2.0 * orig).abs() < 1e-12,
            "dropout_ {got} from {orig}"
        );
    }
    let e = ops::dropout_(&d, 1.5, true).unwrap_err().to_string();
    assert!(
        e.contains("dropout probability has to be between 0 and 1, but got 1.5"),
        "{e}"
    );
}

#[test]
fn shape_index_and_conversion_forms() {
    let a = r(&[3, 4], 7, -1.0, 1.0);
    let start = long(&[1], &[]);
    same(
        &ops::narrow_tensor(&a, 1, &start, 2).unwrap(),
        &ops::narrow(&a, 1, 1, 2).unwrap(),
        "narrow.Tensor",
    );
    let e = ops::narrow_tensor(&a, 1, &long(&[1, 2], &[2]), 2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("start must be an 0-dim integral Tensor."), "{e}");
    same_out(|o| ops::clone_out(&a, o), &a, "clone.out");
    let b = r(&[3, 4], 8, -1.0, 1.0);
    same_out(
        |o| ops::stack_out(&[a.clone(), b.clone()], o),
        &ops::stack(&[a.clone(), b.clone()]).unwrap(),
        "stack.out",
    );
    let idx = long(&[2, 0], &[2]);
    same_out(
        |o| ops::index_select_out(&a, 0, &idx, o),
        &ops::index_select(&a, 0, &idx).unwrap(),
        "index_select.out",
    );
    let gidx = long(&[0, 1, 2, 3, 3, 2, 1, 0, 1, 1, 1, 1], &[3, 4]);
    same_out(
        |o| ops::gather_out(&a, 1, &gidx, o),
        &ops::gather(&a, 1, &gidx).unwrap(),
        "gather.out",
    );
    let sidx = long(&[0, 1, 0, 1, 2, 2, 2, 2, 1, 1, 0, 0], &[3, 4]);
    let want = ops::scatter_add(&a, 0, &sidx, &b).unwrap();
    same_out(
        |o| ops::scatter_add_out(&a, 0, &sidx, &b, o),
        &want,
        "scatter_add.out",
    );
    let c = ops::clone(&a).unwrap();
    c.scatter_add_(0, &sidx, &b).unwrap();
    same(&c, &want, "scatter_add_");
    let src = r(&[2, 4], 9, -1.0, 1.0);
    let want = ops::index_add(&a, 0, &idx, &src).unwrap();
    same_out(
        |o| ops::index_add_out(&a, 0, &idx, &src, o),
        &want,
        "index_add.out",
    );
    let c = ops::clone(&a).unwrap();
    c.index_add_(0, &idx, &src).unwrap();
    same(&c, &want, "index_add_");
    // to.dtype_layout and to.other, as to.dtype.
    let t = a
        .to_dtype_layout_with(ops::ToDtypeLayoutOptions {
            dtype: Some(ScalarType::Float),
            ..Default::default()
        })
        .unwrap();
    same(&t, &a.to(ScalarType::Float).unwrap(), "to.dtype_layout");
    let same_tensor = a
        .to_dtype_layout_with(ops::ToDtypeLayoutOptions::default())
        .unwrap();
    assert!(
        same_tensor.is_alias_of(&a),
        "to.dtype_layout without changes aliases"
    );
    let other = long(&[1], &[1]);
    same(
        &a.to_other(&other).unwrap(),
        &a.to(ScalarType::Long).unwrap(),
        "to.other",
    );
    let m = a
        .to_dtype_layout_with(ops::ToDtypeLayoutOptions {
            device: Some(Device::META),
            ..Default::default()
        })
        .unwrap();
    assert!(m.device().is_meta());
}

#[test]
fn factory_and_fill_forms() {
    let z = ops::zeros_out(&[2, 3], &empty_f()).unwrap();
    same(
        &z,
        &ops::zeros_with(
            &[2, 3],
            ops::ZerosOptions::default().dtype(ScalarType::Double),
        )
        .unwrap(),
        "zeros.out",
    );
    let o = ops::ones_out(&[4], &empty(ScalarType::Long)).unwrap();
    assert_eq!(o.to_vec::<i64>().unwrap(), [1, 1, 1, 1]);
    let fl = ops::full_out(&[2], 2.5, &empty_f()).unwrap();
    assert_eq!(vals(&fl), [2.5, 2.5]);
    let a = r(&[2, 3], 10, -1.0, 1.0);
    let filled = ops::fill(&a, 4).unwrap();
    assert_eq!(vals(&filled), [4.0; 6]);
    assert_eq!(
        vals(&a)[0],
        vals(&r(&[2, 3], 10, -1.0, 1.0))[0],
        "fill.Scalar leaves self"
    );
    assert_eq!(
        vals(&ops::fill_tensor(&a, &f(&[-1.0], &[])).unwrap()),
        [-1.0; 6]
    );
    assert_eq!(vals(&ops::zero(&a).unwrap()), [0.0; 6]);
    // Random forms: the same draws as the in-place forms from the same generator.
    let draws = |fill: &dyn Fn(&Generator) -> Tensor| vals(&fill(&Generator::new(7)));
    let want = draws(&|g| {
        let t = ops::clone(&a).unwrap();
        ops::uniform_with_(
            &t,
            ops::UniformInplaceOptions {
                from: -2.0,
                to: 2.0,
                generator: Some(g),
            },
        )
        .unwrap()
    });
    assert_eq!(
        draws(&|g| ops::uniform_with(
            &a,
            ops::UniformOptions {
                from: -2.0,
                to: 2.0,
                generator: Some(g)
            }
        )
        .unwrap()),
        want,
        "uniform"
    );
    let want = draws(&|g| {
        let t = ops::clone(&a).unwrap();
        ops::normal_with_(
            &t,
            ops::NormalInplaceOptions {
                mean: 1.0,
                std: 3.0,
                generator: Some(g),
            },
        )
        .unwrap()
    });
    assert_eq!(
        draws(&|g| ops::normal_functional_with(
            &a,
            ops::NormalFunctionalOptions {
                mean: 1.0,
                std: 3.0,
                generator: Some(g)
            }
        )
        .unwrap()),
        want,
        "normal_functional"
    );
    let want = draws(&|g| {
        ops::rand_with(&[5], ops::RandOptions::default().dtype(ScalarType::Double))
            .map(|_| ())
            .and_then(|_| {
                let t =
                    ops::empty_with(&[5], ops::EmptyOptions::default().dtype(ScalarType::Double))
                        .unwrap();
                ops::uniform_with_(
                    &t,
                    ops::UniformInplaceOptions {
                        generator: Some(g),
                        ..Default::default()
                    },
                )
            })
            .unwrap()
    });
    assert_eq!(
        draws(&|g| ops::rand_generator_with(
            &[5],
            Some(g),
            ops::RandGeneratorOptions::default().dtype(ScalarType::Double)
        )
        .unwrap()),
        want,
        "rand.generator"
    );
    let n = ops::randn_generator(&[3], Some(&Generator::new(1))).unwrap();
    assert_eq!(n.sizes(), &[3]);
    let ri = ops::randint_low(5, 8, &[100]).unwrap();
    assert_eq!(ri.dtype(), ScalarType::Long);
    assert!(ri
        .to_vec::<i64>()
        .unwrap()
        .iter()
        .all(|v| (5..8).contains(v)));
    let rg = ops::randint_generator(3, &[50], Some(&Generator::new(2))).unwrap();
    assert!(rg
        .to_vec::<i64>()
        .unwrap()
        .iter()
        .all(|v| (0..3).contains(v)));
    let rl = ops::randint_low_generator(-2, 2, &[50], Some(&Generator::new(2))).unwrap();
    assert!(rl
        .to_vec::<i64>()
        .unwrap()
        .iter()
        .all(|v| (-2..2).contains(v)));
    let e = ops::randint_low(5, 1, &[3]).unwrap_err().to_string();
    assert!(
        e.contains("random_ expects 'from' to be less than 'to', but got from=5 >= to=1"),
        "{e}"
    );
    let t = Tensor::zeros(&[100], ScalarType::Long).unwrap();
    t.random_to_(4).unwrap();
    assert!(t
        .to_vec::<i64>()
        .unwrap()
        .iter()
        .all(|v| (0..4).contains(v)));
    let b = ops::bernoulli(&a, 1.0).unwrap();
    assert_eq!(vals(&b), [1.0; 6]);
    let b = a.bernoulli(0.0).unwrap();
    assert_eq!(vals(&b), [0.0; 6]);
}

#[test]
fn meta_shapes_of_out_forms() {
    let a = meta(&r(&[3, 4], 1, 0.0, 1.0));
    let out = meta(&empty_f());
    assert_eq!(
        ops::add_scalar_out(&a, 1, &meta(&a)).unwrap().sizes(),
        &[3, 4]
    );
    let scalar = meta(&f(&[0.0], &[]));
    assert_eq!(ops::sum_out(&a, &scalar).unwrap().sizes(), &[] as &[i64]);
    let (v, i) = ops::max_dim_max(&a, 1, &out, &meta(&empty(ScalarType::Long))).unwrap();
    assert_eq!((v.sizes(), i.sizes()), (&[3i64][..], &[3i64][..]));
    assert_eq!(
        ops::amax_out_with(&a, &out, ops::AmaxOutOptions::default().dim(&[0]))
            .unwrap()
            .sizes(),
        &[4]
    );
    assert_eq!(ops::zeros_out(&[5, 2], &out).unwrap().sizes(), &[5, 2]);
    assert_eq!(
        ops::_softmax_out(&a, 1, false, &out).unwrap().sizes(),
        &[3, 4]
    );
    assert_eq!(ops::clamp_min_tensor(&a, &a).unwrap().sizes(), &[3, 4]);
    assert!(ops::fill(&a, 1).unwrap().device().is_meta());
    assert!(ops::rand_generator_with(
        &[2],
        None,
        ops::RandGeneratorOptions::default().device(Device::META)
    )
    .unwrap()
    .device()
    .is_meta());
    // An out tensor on another device is refused.
    let e = ops::amax_out(&r(&[3, 4], 1, 0.0, 1.0), &out)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("Expected out tensor to have device cpu, but got meta instead"),
        "{e}"
    );
}

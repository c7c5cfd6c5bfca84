//! Where `scripts/opinfo_vs_pytorch.py` found Switchboard's kernels differing from PyTorch 2.15:
//! each expected message and result here was recorded from PyTorch on the CPU.

use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{ScalarType, Tensor};

use switchboard_cpu as _;

fn message(r: switchboard_dispatcher::Result<Tensor>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn reflection_pad1d_names_the_input_too_small() {
    let x = ops::randn(&[1, 4]).unwrap();
    let want = "input (W: 4) is too small. Calculated output W: 0";
    assert_eq!(message(ops::reflection_pad1d(&x, &[-2, -2])), want);
    assert_eq!(
        message(ops::reflection_pad1d(&x, &[-3, -2])),
        "input (W: 4) is too small. Calculated output W: -1"
    );
    // The 2-d and 3-d pads (and replication's) keep the message of their shared check.
    let x2 = ops::randn(&[1, 4, 4]).unwrap();
    assert_eq!(
        message(ops::reflection_pad2d(&x2, &[-2, -2, 0, 0])),
        "Calculated output H: 4 W: 0 must be >= 1 in every dimension (input H: 4, W: 4)"
    );
}

#[test]
fn avg_pool3d_has_no_reduced_float_kernel() {
    for (dtype, name) in [
        (ScalarType::Half, "Half"),
        (ScalarType::BFloat16, "BFloat16"),
    ] {
        let x = ops::to(&ops::randn(&[1, 2, 4, 4, 4]).unwrap(), dtype).unwrap();
        assert_eq!(
            message(ops::avg_pool3d(&x, &[2, 2, 2])),
            format!("\"avg_pool3d_out_frame\" not implemented for '{name}'")
        );
    }
}

#[test]
fn view_copy_reshapes_what_view_cannot() {
    let x = Tensor::from_vec((0..12).map(|v| v as f32).collect(), &[3, 4]).unwrap();
    let t = x.t().unwrap();
    assert!(t.view(&[12]).is_err());
    let r = ops::view_copy(&t, &[12]).unwrap();
    assert_eq!(r.strides(), &[1]);
    assert_eq!(
        r.to_vec::<f32>().unwrap(),
        [0., 4., 8., 1., 5., 9., 2., 6., 10., 3., 7., 11.]
    );
}

/// `alpha` 0 reads neither matrix, as BLAS does under PyTorch's products: `addmm(c, nan, b,
/// alpha=0)` is `c` in PyTorch (and its NaNs propagate with a non-zero `alpha`).
#[test]
fn addmm_with_alpha_zero_reads_neither_matrix() {
    let c = Tensor::ones(&[2, 4], ScalarType::Float).unwrap();
    let nan = ops::full(&[2, 3], f64::NAN).unwrap();
    let b = Tensor::ones(&[3, 4], ScalarType::Float).unwrap();
    let scaled = |alpha: i64| {
        ops::addmm_with(&c, &nan, &b, ops::AddmmOptions::default().alpha(alpha))
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    };
    assert_eq!(scaled(0), [1.0; 8]);
    assert!(scaled(1).iter().all(|v| v.is_nan()));
}

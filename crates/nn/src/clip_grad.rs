//! Gradient clipping, after `torch.nn.utils`: [`clip_grad_norm_`].

use switchboard_autograd::{no_grad, AutogradTensor};
use switchboard_dispatcher::{DispatchErrorKind, Result};
use switchboard_ops as ops;
use switchboard_tensor::{ScalarType, Tensor};

/// `torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type=2.0,
/// error_if_nonfinite)`: the 2-norm of all the gradients together (the norm of the
/// per-gradient norms) is returned as a 0-dim tensor, and every gradient is scaled in place by
/// `min(1, max_norm / (total_norm + 1e-6))`. Parameters without a gradient are skipped; with no
/// gradient at all the norm is 0.
///
/// With `error_if_nonfinite`, a NaN or infinite total norm is an error (PyTorch's message) and
/// leaves the gradients as they were; without it they are scaled anyway (to NaN or 0), as
/// PyTorch does.
pub fn clip_grad_norm_(
    parameters: &[Tensor],
    max_norm: f64,
    error_if_nonfinite: bool,
) -> Result<Tensor> {
    let _guard = no_grad();
    let grads: Vec<Tensor> = parameters.iter().filter_map(|p| p.grad()).collect();
    if grads.is_empty() {
        return ops::full_with(
            &[],
            0.0,
            ops::FullOptions::default().dtype(ScalarType::Float),
        );
    }
    // `vector_norm(g, 2)` of each gradient, then of their stack.
    let norms = grads
        .iter()
        .map(|g| ops::sqrt(&ops::sum(&ops::mul(g, g)?)?))
        .collect::<Result<Vec<_>>>()?;
    let norms = ops::stack(&norms)?;
    let total_norm = ops::sqrt(&ops::sum(&ops::mul(&norms, &norms)?)?)?;
    if error_if_nonfinite && !total_norm.item()?.to_f64().is_finite() {
        return Err(DispatchErrorKind::Kernel(
            "The total norm of order 2.0 for gradients from `parameters` is non-finite, so it \
             cannot be clipped. To disable this error and scale the gradients by the non-finite \
             norm anyway, set `error_if_nonfinite=False`"
                .into(),
        )
        .into());
    }
    // clip_coef = max_norm / (total_norm + 1e-6), clamped to 1: every gradient is multiplied,
    // by 1 when the norm is within max_norm.
    let clip_coef = ops::reciprocal(&ops::add_scalar(&total_norm, 1e-6)?)?;
    let clip_coef = ops::mul_scalar(&clip_coef, max_norm)?;
    let clamped = ops::clamp_with(
        &clip_coef,
        ops::ClampOptions {
            min: None,
            max: Some(1.0.into()),
        },
    )?;
    for g in &grads {
        ops::mul_(g, &clamped)?;
    }
    Ok(total_norm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_cpu as _;

    fn param_with_grad(grad: &[f32]) -> Tensor {
        let p = ops::zeros(&[grad.len() as i64])
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        p.set_grad(Some(
            Tensor::from_vec(grad.to_vec(), &[grad.len() as i64]).unwrap(),
        ));
        p
    }

    fn grad(p: &Tensor) -> Vec<f32> {
        p.grad().unwrap().to_vec::<f32>().unwrap()
    }

    // Expected values: torch 2.15's clip_grad_norm_ on the same gradients.

    #[test]
    fn clips_to_max_norm_and_returns_the_total() {
        let (a, b) = (param_with_grad(&[3.0, 4.0]), param_with_grad(&[12.0]));
        let no_grad = ops::zeros(&[1]).unwrap().requires_grad_(true).unwrap();
        let total = clip_grad_norm_(&[a.clone(), b.clone(), no_grad], 1.0, false).unwrap();
        assert_eq!(total.sizes(), [] as [i64; 0]);
        assert_eq!(total.item().unwrap().to_f64(), 13.0);
        assert_eq!(grad(&a), [0.230_769_22, 0.307_692_3]);
        assert_eq!(grad(&b), [0.923_076_87]);

        // Within max_norm: scaled by 1, unchanged.
        let (a, b) = (param_with_grad(&[0.3, 0.4]), param_with_grad(&[1.2]));
        let total = clip_grad_norm_(&[a.clone(), b.clone()], 100.0, false).unwrap();
        assert!((total.item().unwrap().to_f64() - 1.3).abs() < 1e-6);
        assert_eq!(grad(&a), [0.3, 0.4]);
        assert_eq!(grad(&b), [1.2]);

        // No gradients: 0.
        let none = ops::zeros(&[1]).unwrap().requires_grad_(true).unwrap();
        let total = clip_grad_norm_(&[none], 1.0, true).unwrap();
        assert_eq!(total.item().unwrap().to_f64(), 0.0);
    }

    #[test]
    fn non_finite_norms() {
        let (a, b) = (
            param_with_grad(&[f32::INFINITY, 4.0]),
            param_with_grad(&[12.0]),
        );
        let e = clip_grad_norm_(&[a.clone(), b.clone()], 1.0, true)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains(
                "The total norm of order 2.0 for gradients from `parameters` is non-finite, so \
                 it cannot be clipped. To disable this error and scale the gradients by the \
                 non-finite norm anyway, set `error_if_nonfinite=False`"
            ),
            "{e}"
        );
        assert_eq!(grad(&b), [12.0]);
        // Without the check, PyTorch scales by max_norm / inf = 0: inf * 0 is NaN.
        let total = clip_grad_norm_(&[a.clone(), b.clone()], 1.0, false).unwrap();
        assert!(total.item().unwrap().to_f64().is_infinite());
        let ga = grad(&a);
        assert!(ga[0].is_nan() && ga[1] == 0.0, "{ga:?}");
        assert_eq!(grad(&b), [0.0]);
    }
}

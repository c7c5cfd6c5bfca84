//! The in-place random operators go through autograd's checks: on a leaf that
//! requires grad they are refused, as every in-place operator is; on a non-leaf they record
//! their node (PyTorch's names), and the gradient through the overwritten values is zero.

use switchboard_autograd::{no_grad, AutogradTensor};
use switchboard_cpu as _;
use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

const LEAF_MSG: &str = "a leaf Variable that requires grad is being used in an in-place operation.";

type RandomInplace = fn(&Tensor) -> Result<Tensor>;

/// Every in-place random operator, with the node PyTorch records for it.
fn random_ops() -> Vec<(&'static str, RandomInplace, &'static str)> {
    vec![
        ("uniform_", |t| ops::uniform_(t), "UniformBackward0"),
        ("normal_", |t| ops::normal_(t), "NormalBackward0"),
        (
            "bernoulli_.float",
            |t| ops::bernoulli_(t),
            "BernoulliBackward2",
        ),
        (
            "random_.from",
            |t| ops::random_(t, 0, Some(5)),
            "RandomBackward0",
        ),
        ("random_.to", |t| ops::random_to_(t, 5), "RandomBackward1"),
        ("random_", |t| ops::random_default_(t), "RandomBackward2"),
    ]
}

fn leaf() -> Tensor {
    Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

#[test]
fn on_a_leaf_that_requires_grad_they_are_refused() {
    for (name, op, _) in random_ops() {
        let x = leaf();
        let e = op(&x).unwrap_err();
        assert_eq!(e.to_string(), LEAF_MSG, "{name}");
        // Nothing was written and the leaf has no gradient.
        assert_eq!(x.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0], "{name}");
        // A view of the leaf is refused too.
        let v = ops::narrow(&x, 0, 0, 2).unwrap();
        let e = op(&v).unwrap_err();
        assert_eq!(
            e.to_string(),
            "a view of a leaf Variable that requires grad is being used in an in-place \
             operation.",
            "{name}"
        );
    }
}

#[test]
fn on_a_non_leaf_the_gradient_is_zero() {
    for (name, op, node) in random_ops() {
        let x = leaf();
        let y = ops::mul_scalar(&x, 2).unwrap();
        let version = y.version();
        op(&y).unwrap();
        assert!(y.version() > version, "{name} bumps the version");
        assert_eq!(y.grad_fn().unwrap().name(), node, "{name}");
        ops::sum(&y).unwrap().backward().unwrap();
        assert_eq!(
            x.grad().unwrap().to_vec::<f32>().unwrap(),
            [0.0; 3],
            "{name}"
        );
    }
}

#[test]
fn on_part_of_a_non_leaf_the_rest_keeps_its_gradient() {
    // y = 2x; y[0:2].uniform_(): only y[2] still depends on x (CopySlices around the node).
    let x = leaf();
    let y = ops::mul_scalar(&x, 2).unwrap();
    ops::uniform_(&ops::narrow(&y, 0, 0, 2).unwrap()).unwrap();
    assert_eq!(y.grad_fn().unwrap().name(), "CopySlices");
    ops::sum(&y).unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), [0.0, 0.0, 2.0]);
}

#[test]
fn under_no_grad_a_leaf_may_be_filled() {
    // PyTorch's `with torch.no_grad(): w.uniform_()`, how parameters are initialised.
    let x = leaf();
    {
        let _g = no_grad();
        ops::uniform_(&x).unwrap();
    }
    assert!(x.is_leaf() && x.requires_grad());
    assert!(x
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .all(|v| (0.0..1.0).contains(v)));
}

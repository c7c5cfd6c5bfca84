//! The operators returning a list of views (`split_with_sizes`, `split.Tensor`, `unbind.int`):
//! their backward nodes, gradients of the outputs used and unused, and PyTorch's refusal of
//! recorded in-place writes through one of the views.

use switchboard_autograd::{no_grad, AutogradTensor};
use switchboard_cpu as _;
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::Tensor;

fn leaf(v: &[f64], s: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), s)
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

fn multi_output_error(index: u32, function: &str) -> String {
    format!(
        "Output {index} of {function} is a view and is being modified inplace. This view is the \
         output of a function that returns multiple views. Such functions do not allow the \
         output views to be modified inplace. You should replace the inplace operation by an \
         out-of-place one."
    )
}

#[test]
fn gradients_flow_to_the_pieces_used_and_zeros_elsewhere() {
    let a = leaf(&[1., 2., 3., 4., 5., 6.], &[6]);
    let pieces = a.split_with_sizes(&[1, 2, 3]).unwrap();
    assert_eq!(pieces.len(), 3);
    assert_eq!(
        pieces[1].grad_fn().unwrap().name(),
        "SplitWithSizesBackward0"
    );
    // Only the last piece is used: the others' gradients are PyTorch's undefined tensors.
    ops::mul_scalar(&pieces[2], 3.)
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap();
    let g = a.grad().unwrap().to_vec_as::<f64>().unwrap();
    assert_eq!(g, [0., 0., 0., 3., 3., 3.]);

    let b = leaf(&[1., 2., 3., 4., 5., 6.], &[3, 2]);
    let rows = b.unbind().unwrap();
    assert_eq!(rows[0].grad_fn().unwrap().name(), "UnbindBackward0");
    rows[1].sum().unwrap().backward().unwrap();
    assert_eq!(
        b.grad().unwrap().to_vec_as::<f64>().unwrap(),
        [0., 0., 1., 1., 0., 0.]
    );

    let c = leaf(&[1., 2., 3., 4., 5.], &[5]);
    let parts = c.split(2).unwrap();
    assert_eq!(parts.len(), 3);
    assert_eq!(parts[2].grad_fn().unwrap().name(), "SplitBackward0");
    parts[2].sum().unwrap().backward().unwrap();
    assert_eq!(
        c.grad().unwrap().to_vec_as::<f64>().unwrap(),
        [0., 0., 0., 0., 1.]
    );
}

#[test]
fn recorded_inplace_writes_through_a_piece_are_refused() {
    let a = leaf(&[1., 2., 3., 4.], &[2, 2]);
    let rows = a.unbind().unwrap();
    let e = rows[1].mul_scalar_(2.).unwrap_err();
    assert_eq!(e.to_string(), multi_output_error(1, "Unbind"));
    let pieces = a.split_with_sizes(&[1, 1]).unwrap();
    let e = pieces[0].add_scalar_(1.).unwrap_err();
    assert_eq!(e.to_string(), multi_output_error(0, "SplitWithSizes"));
    let chunks = a.chunk(2).unwrap();
    let e = chunks[1].add_scalar_(1.).unwrap_err();
    assert_eq!(e.to_string(), multi_output_error(1, "Split"));
    // Nothing to record: writes are allowed, and reach the base.
    let plain = Tensor::from_vec(vec![1.0f64, 2., 3., 4.], &[2, 2]).unwrap();
    let rows = plain.unbind().unwrap();
    rows[1].mul_scalar_(10.).unwrap();
    assert_eq!(plain.to_vec_as::<f64>().unwrap(), [1., 2., 30., 40.]);
    {
        let _guard = no_grad();
        let rows = a.unbind().unwrap();
        rows[0].mul_scalar_(2.).unwrap();
    }
    assert_eq!(a.to_vec_as::<f64>().unwrap(), [2., 4., 3., 4.]);
}

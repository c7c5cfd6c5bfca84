//! Graphs a user can make arbitrarily deep: dropping them and running backward through them
//! must not recurse once per node (PyTorch drops a node's history iteratively, `deleteNode`).
//! Run on a thread with a small stack, so a recursion per node overflows at these depths in
//! release builds too.

use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

/// Runs `f` on a thread with a 256 KiB stack (a recursion per node overflows it within a few
/// thousand nodes).
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

fn leaf() -> Tensor {
    Tensor::from_vec(vec![1.0f32], &[1])
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

#[test]
fn dropping_a_million_node_chain_does_not_recurse() {
    on_small_stack(|| {
        let x = leaf();
        let mut y = x.clone();
        for _ in 0..1_000_000 {
            y = ops::add(&y, &x).unwrap();
        }
        assert_eq!(y.grad_fn().unwrap().name(), "AddBackward0");
        drop(y);
    });
}

#[test]
fn dropping_a_chain_that_saves_its_inputs_does_not_recurse() {
    // `mul` saves both inputs, so each node is also held by the saved tensor of the next.
    on_small_stack(|| {
        let x = leaf();
        let mut y = x.clone();
        for _ in 0..200_000 {
            y = ops::mul(&y, &x).unwrap();
        }
        drop(y);
    });
}

#[test]
fn backward_through_a_200k_node_chain() {
    on_small_stack(|| {
        let x = leaf();
        let mut y = x.clone();
        for _ in 0..200_000 {
            y = ops::add(&y, &x).unwrap();
        }
        ops::sum(&y).unwrap().backward().unwrap();
        assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![200_001.0]);
        drop(y);
    });
}

/// `y = x * y`, a custom function saving its inputs.
struct Mul;

impl switchboard_autograd::Function for Mul {
    fn forward(
        &self,
        ctx: &mut switchboard_autograd::FunctionCtx,
        x: &[Tensor],
    ) -> switchboard_autograd::Result<Vec<Tensor>> {
        ctx.save_for_backward(x);
        Ok(vec![ops::mul(&x[0], &x[1])?])
    }

    fn backward(
        &self,
        ctx: &switchboard_autograd::FunctionCtx,
        g: &[Tensor],
    ) -> switchboard_autograd::Result<Vec<Option<Tensor>>> {
        let s = ctx.saved_tensors()?;
        Ok(vec![
            Some(ops::mul(&g[0], &s[1])?),
            Some(ops::mul(&g[0], &s[0])?),
        ])
    }
}

#[test]
fn dropping_a_chain_of_custom_functions_does_not_recurse() {
    on_small_stack(|| {
        let x = leaf();
        let mut y = x.clone();
        for _ in 0..100_000 {
            y = switchboard_autograd::apply(Mul, &[y, x.clone()])
                .unwrap()
                .remove(0);
        }
        drop(y);
    });
}

#[test]
fn dropping_a_chain_of_in_place_writes_to_views_does_not_recurse() {
    // Each write through a view gives the base a `CopySlices` node holding the write's node.
    on_small_stack(|| {
        let x = leaf();
        let base = ops::mul(&x, &x).unwrap();
        for _ in 0..100_000 {
            let v = ops::narrow(&base, 0, 0, 1).unwrap();
            ops::add_(&v, &x).unwrap();
        }
        assert_eq!(base.grad_fn().unwrap().name(), "CopySlices");
        drop(base);
    });
}

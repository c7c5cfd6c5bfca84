//! `register_post_accumulate_grad_hook`: run on a leaf once its gradient is in `.grad`, in
//! the order backward reaches the leaves; PyTorch's errors for tensors it does not apply to.

use std::sync::{Arc, Mutex};

use switchboard_autograd::{AutogradTensor, BackwardOptions};
use switchboard_cpu as _;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

fn leaf(v: &[f32]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len() as i64])
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

#[test]
fn runs_after_accumulation_with_the_leaf() {
    let w1 = leaf(&[1., 2.]);
    let w2 = leaf(&[3., 4.]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    for (name, w) in [("w1", &w1), ("w2", &w2)] {
        let seen = seen.clone();
        w.register_post_accumulate_grad_hook(move |leaf| {
            // The gradient is already accumulated when the hook runs.
            let g = leaf
                .grad()
                .expect("grad accumulated")
                .to_vec::<f32>()
                .unwrap();
            seen.lock().unwrap().push((name, g));
        })
        .unwrap();
    }
    // w2 is used last in forward, so backward reaches it first.
    let h = ops::mul(&w1, &w1).unwrap();
    let loss = ops::sum(&ops::mul(&h, &w2).unwrap()).unwrap();
    loss.backward_with(BackwardOptions::default().retain_graph(true))
        .unwrap();
    loss.backward().unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert_eq!(seen[0], ("w2", vec![1., 4.]));
    assert_eq!(seen[1], ("w1", vec![6., 16.]));
    // The second backward accumulates: the hook sees the sums.
    assert_eq!(seen[2], ("w2", vec![2., 8.]));
    assert_eq!(seen[3], ("w1", vec![12., 32.]));
}

#[test]
fn refused_on_non_leaves_and_tensors_without_grad() {
    let plain = Tensor::from_vec(vec![1f32], &[1]).unwrap();
    assert_eq!(
        plain
            .register_post_accumulate_grad_hook(|_| {})
            .unwrap_err()
            .to_string(),
        "cannot register a hook on a tensor that doesn't require gradient"
    );
    let w = leaf(&[1.]);
    let y = ops::mul(&w, &w).unwrap();
    assert_eq!(
        y.register_post_accumulate_grad_hook(|_| {})
            .unwrap_err()
            .to_string(),
        "post accumulate grad hooks cannot be registered on non-leaf tensors"
    );
}

//! `cdist` and `pdist` (CompositeImplicitAutograd, as in PyTorch): their argument checks, then
//! `_cdist_forward` / `_pdist_forward`, which carry the gradients.

use switchboard_dispatcher::Result;
use switchboard_tensor::Tensor;

use super::error;

/// `cdist(Tensor x1, Tensor x2, float p=2, int? compute_mode=None) -> Tensor`
///
/// PyTorch computes the Euclidean form (p = 2, `compute_mode` 1, or more than 25 rows) with
/// the differentiable `_euclidean_dist` here; `_cdist_forward` computes the same values (Note
/// [Distance norms] in switchboard-cpu) and its gradient is the p = 2 formula.
pub fn cdist(x1: &Tensor, x2: &Tensor, p: f64, compute_mode: Option<i64>) -> Result<Tensor> {
    for (name, x) in [("X1", x1), ("X2", x2)] {
        if x.dim() < 2 {
            return Err(error(format!(
                "cdist only supports at least 2D tensors, {name} got: {}D",
                x.dim()
            )));
        }
    }
    let (c1, c2) = (x1.sizes()[x1.dim() - 1], x2.sizes()[x2.dim() - 1]);
    if c1 != c2 {
        return Err(error(format!(
            "X1 and X2 must have the same number of columns. X1: {c1} X2: {c2}"
        )));
    }
    crate::_cdist_forward(x1, x2, p, compute_mode)
}

/// `pdist(Tensor self, float p=2) -> Tensor`: the distances between the rows of a matrix.
pub fn pdist(self_: &Tensor, p: f64) -> Result<Tensor> {
    if self_.dim() != 2 {
        return Err(error(format!(
            "pdist only supports 2D tensors, got: {}D",
            self_.dim()
        )));
    }
    if !self_.dtype().is_floating_point() {
        return Err(error("pdist only supports floating-point dtypes"));
    }
    if p.is_nan() || p < 0.0 {
        return Err(error("pdist only supports non-negative p values"));
    }
    crate::_pdist_forward_with(&crate::contiguous(self_)?, crate::PdistForwardOptions { p })
}

//! The decompositions of `nonzero` (CompositeImplicitAutograd, as in PyTorch): `argwhere`,
//! `nonzero_numpy` and the one-argument `where`.

use switchboard_dispatcher::Result;
use switchboard_tensor::Tensor;

/// `argwhere(self)`: `nonzero(self)`, the indices of the non-zero elements as rows.
pub fn argwhere(self_: &Tensor) -> Result<Tensor> {
    crate::nonzero(self_)
}

/// `nonzero_numpy(self)`: one index tensor per dimension (NumPy's `nonzero`): the columns of
/// `nonzero(self)`, views of it. A 0-dim tensor counts as one element of a 1-d one, as in
/// NumPy.
pub fn nonzero_numpy(self_: &Tensor) -> Result<Vec<Tensor>> {
    let indices = if self_.dim() == 0 {
        crate::nonzero(&crate::unsqueeze(self_, 0)?)?
    } else {
        crate::nonzero(self_)?
    };
    // PyTorch's `unbind(1)`: the selects along dimension 1.
    (0..indices.sizes()[1])
        .map(|d| crate::select(&indices, 1, d))
        .collect()
}

/// `where(condition)`: `nonzero_numpy(condition)` (`torch.nonzero(condition, as_tuple=True)`).
pub fn where_default(condition: &Tensor) -> Result<Vec<Tensor>> {
    crate::nonzero_numpy(condition)
}

//! `one_hot` (CompositeImplicitAutograd, as in PyTorch): zeros with a 1 scattered at each
//! index along a new last dimension.

use switchboard_dispatcher::Result;
use switchboard_tensor::{ScalarType, Tensor};

use super::error;

/// `one_hot(Tensor self, int num_classes=-1) -> Tensor`: `self`'s indices as one-hot rows of
/// `num_classes` entries (`max(self) + 1` when -1), in `self`'s dtype (Long).
pub fn one_hot(self_: &Tensor, num_classes: i64) -> Result<Tensor> {
    if self_.dtype() != ScalarType::Long {
        return Err(error(
            "one_hot is only applicable to index tensor of type LongTensor.",
        ));
    }
    let mut shape = self_.sizes().to_vec();
    let options = crate::ZerosOptions::default()
        .dtype(ScalarType::Long)
        .device(self_.device());
    if self_.numel() == 0 {
        if num_classes <= 0 {
            return Err(error(
                "Can not infer total number of classes from empty tensor.",
            ));
        }
        shape.push(num_classes);
        return crate::zeros_with(&shape, options);
    }
    if crate::item(&crate::min(self_)?)?.to_i64() < 0 {
        return Err(error("Class values must be non-negative."));
    }
    let max = crate::item(&crate::max(self_)?)?.to_i64();
    let num_classes = if num_classes == -1 {
        max + 1
    } else if num_classes > max {
        num_classes
    } else {
        return Err(error("Class values must be smaller than num_classes."));
    };
    shape.push(num_classes);
    let ret = crate::zeros_with(&shape, options)?;
    crate::scatter_value_(&ret, -1, &crate::unsqueeze(self_, -1)?, 1)?;
    Ok(ret)
}

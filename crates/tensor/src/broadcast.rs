//! Broadcasting: [`infer_size`] (two shapes), [`broadcast_shapes`] (many) and
//! [`broadcast_tensors`], with PyTorch's rules and messages.

use crate::error::{Result, TensorError};
use crate::tensor::Tensor;
use crate::DimVec;
use crate::RawOps;

/// The broadcast shape of `a` and `b` (`at::infer_size`): shapes are right-aligned, and each
/// pair of sizes must be equal or contain a 1.
///
/// ```
/// use switchboard_tensor::infer_size;
/// assert_eq!(&infer_size(&[2, 1, 4], &[3, 1]).unwrap()[..], &[2, 3, 4]);
/// assert_eq!(
///     infer_size(&[2, 3], &[2, 4]).unwrap_err().to_string(),
///     "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1"
/// );
/// ```
pub fn infer_size(a: &[i64], b: &[i64]) -> Result<DimVec> {
    let ndim = a.len().max(b.len());
    let mut out = DimVec::from_elem(0, ndim);
    for i in (0..ndim).rev() {
        let offset = ndim - 1 - i;
        let size_a = if offset < a.len() {
            a[a.len() - 1 - offset]
        } else {
            1
        };
        let size_b = if offset < b.len() {
            b[b.len() - 1 - offset]
        } else {
            1
        };
        if size_a != size_b && size_a != 1 && size_b != 1 {
            return Err(TensorError::BroadcastMismatch {
                a: size_a,
                b: size_b,
                dim: i as i64,
            });
        }
        out[i] = if size_a == 1 { size_b } else { size_a };
    }
    Ok(out)
}

/// The broadcast shape of all `shapes` (`torch.broadcast_shapes`); `[]` for none.
pub fn broadcast_shapes(shapes: &[&[i64]]) -> Result<DimVec> {
    let mut out = DimVec::new();
    for s in shapes {
        out = infer_size(&out, s)?;
    }
    Ok(out)
}

/// Expands every tensor to their common broadcast shape (`torch.broadcast_tensors`); tensors
/// already of that shape are returned as they are.
///
/// ```
/// use switchboard_tensor::{broadcast_tensors, ScalarType, Tensor};
/// let a = Tensor::zeros(&[3, 1], ScalarType::Float).unwrap();
/// let b = Tensor::zeros(&[4], ScalarType::Float).unwrap();
/// let out = broadcast_tensors(&[a, b]).unwrap();
/// assert_eq!(out[0].sizes(), &[3, 4]);
/// assert_eq!(out[1].strides(), &[0, 1]);
/// ```
pub fn broadcast_tensors(tensors: &[Tensor]) -> Result<Vec<Tensor>> {
    let shapes: Vec<&[i64]> = tensors.iter().map(|t| t.sizes()).collect();
    let shape = broadcast_shapes(&shapes)?;
    tensors
        .iter()
        .map(|t| {
            if t.sizes() == &shape[..] {
                Ok(t.clone())
            } else {
                t.expand(&shape)
            }
        })
        .collect()
}

impl Tensor {
    /// `broadcast_to(sizes)`: [`expand`](Tensor::expand) under its NumPy name.
    pub fn broadcast_to(&self, sizes: &[i64]) -> Result<Tensor> {
        self.expand(sizes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        assert_eq!(&infer_size(&[], &[3]).unwrap()[..], &[3]);
        assert_eq!(&infer_size(&[1], &[0]).unwrap()[..], &[0]);
        assert_eq!(&infer_size(&[0], &[1]).unwrap()[..], &[0]);
        assert!(infer_size(&[0], &[2]).is_err());
        assert_eq!(
            infer_size(&[5, 2], &[3, 2]).unwrap_err().to_string(),
            "The size of tensor a (5) must match the size of tensor b (3) at non-singleton \
             dimension 0"
        );
        assert_eq!(
            &broadcast_shapes(&[&[2, 1], &[1, 3], &[4, 1, 1]]).unwrap()[..],
            &[4, 2, 3]
        );
        assert!(broadcast_shapes(&[]).unwrap().is_empty());
    }
}

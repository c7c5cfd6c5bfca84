//! Loop dimensions of an elementwise op: broadcast strides, PyTorch's dimension order
//! (`reorder_dimensions`) and strides for that order (the structured meta functions', in
//! switchboard-ops), and coalescing into a [`Geometry`].

use smallvec::SmallVec;
pub use switchboard_ops::structured::{broadcast_strides, reorder_dims, strides_for_perm};
use switchboard_tensor::DimVec;

use crate::loops::Geometry;

/// Applies `perm` and merges dimensions every operand walks contiguously
/// (`TensorIteratorBase::coalesce_dimensions`).
pub fn coalesce(shape: &[i64], strides: &[DimVec], perm: &[usize]) -> Geometry {
    let mut sizes: DimVec = perm.iter().map(|&d| shape[d]).collect();
    let mut st: SmallVec<[DimVec; 4]> = strides
        .iter()
        .map(|s| perm.iter().map(|&d| s[d]).collect())
        .collect();
    if sizes.is_empty() {
        return Geometry {
            sizes: DimVec::from_elem(1, 1),
            strides: st.iter().map(|_| DimVec::from_elem(0, 1)).collect(),
        };
    }
    let mut prev = 0;
    for d in 1..sizes.len() {
        let can =
            sizes[prev] == 1 || sizes[d] == 1 || st.iter().all(|s| sizes[prev] * s[prev] == s[d]);
        if can {
            if sizes[prev] == 1 {
                for s in st.iter_mut() {
                    s[prev] = s[d];
                }
            }
            sizes[prev] *= sizes[d];
        } else {
            prev += 1;
            if prev != d {
                for s in st.iter_mut() {
                    s[prev] = s[d];
                }
                sizes[prev] = sizes[d];
            }
        }
    }
    sizes.truncate(prev + 1);
    for s in st.iter_mut() {
        s.truncate(prev + 1);
    }
    Geometry { sizes, strides: st }
}

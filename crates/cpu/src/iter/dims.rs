//! Loop dimensions of an elementwise op: broadcast strides, PyTorch's dimension order
//! (`reorder_dimensions`), strides for that order, and coalescing into a [`Geometry`].

use smallvec::SmallVec;
use switchboard_tensor::{DimVec, Tensor};

use crate::loops::Geometry;

/// `t`'s strides aligned to `shape` (right-aligned; 0 for broadcast and size-1 dimensions).
pub fn broadcast_strides(t: &Tensor, shape: &[i64]) -> DimVec {
    let nd = shape.len();
    let td = t.dim();
    let mut st = DimVec::from_elem(0, nd);
    for i in 0..td {
        let d = nd - td + i;
        if t.sizes()[i] != 1 {
            st[d] = t.strides()[i];
        }
    }
    st
}

/// PyTorch's `reorder_dimensions`: the dimensions from fastest to slowest by the operands'
/// strides (operand order breaks ties; broadcast dimensions do not vote).
pub fn reorder_dims(shape: &[i64], strides: &[&[i64]]) -> SmallVec<[usize; 6]> {
    let nd = shape.len();
    let mut perm: SmallVec<[usize; 6]> = (0..nd).rev().collect();
    let should_swap = |d0: usize, d1: usize| -> i32 {
        for st in strides {
            let (s0, s1) = (st[d0], st[d1]);
            if s0 == 0 || s1 == 0 {
                continue;
            }
            if s0 < s1 {
                return -1;
            }
            if s0 > s1 {
                return 1;
            }
            if shape[d0] > shape[d1] {
                return 1;
            }
        }
        0
    };
    for i in 1..nd {
        let mut d1 = i;
        for d0 in (0..i).rev() {
            let c = should_swap(perm[d0], perm[d1]);
            if c > 0 {
                perm.swap(d0, d1);
                d1 = d0;
            } else if c < 0 {
                break;
            }
        }
    }
    perm
}

/// Dense strides laying the dimensions out in `perm` order (fastest first).
pub fn strides_for_perm(shape: &[i64], perm: &[usize]) -> DimVec {
    let mut st = DimVec::from_elem(0, shape.len());
    let mut acc = 1i64;
    for &d in perm {
        st[d] = acc;
        acc = acc.saturating_mul(shape[d].max(1));
    }
    st
}

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

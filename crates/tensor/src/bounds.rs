//! Checks of Note [Tensor bounds invariant]: sizes ([`check_sizes`]), the storage a geometry
//! addresses ([`storage_extent`], [`check_in_bounds`]), and all of them in one pass with the
//! numel and contiguity ([`check_geometry`], Note [One-pass geometry check]).

use crate::checked_size::CheckedSize;
use crate::error::{list, Result, TensorError};
use crate::layout;

// Note [Sizes whose every product fits]
// c10 refuses sizes whose running product overflows (`safe_compute_numel`: "numel: integer
// multiplication overflow"), so `[2^40, 2^40, 0]` is refused, but it accepts `[0, 2^40,
// 2^40]`: its running product is 0 at once. Kernels then multiply subsets of those sizes (a
// plane `h * w`, the dims after a softmax dim, a matmul's batch) and overflow on a tensor
// with no element. Here the product of the *non-zero* sizes must fit in an `i64`, which makes
// every product of any subset of a tensor's sizes fit, whatever kernel computes it (Note
// [Checked size arithmetic]). It costs the same loop; it refuses only zero-element shapes
// that no real program builds.

/// Sizes must be non-negative and the product of the non-zero ones must fit in an `i64`
/// (Note [Sizes whose every product fits]); returns the numel.
#[inline]
pub(crate) fn check_sizes(sizes: &[i64]) -> Result<i64> {
    let mut nonzero: i64 = 1;
    let mut empty = false;
    for &s in sizes {
        if s == 0 {
            empty = true;
            continue;
        }
        match nonzero.checked_mul(s) {
            Some(n) if s > 0 => nonzero = n,
            _ => return Err(bad_sizes(sizes)),
        }
    }
    Ok(if empty { 0 } else { nonzero })
}

/// The error for sizes [`check_sizes`] refused: the first negative size, or the overflow.
#[cold]
fn bad_sizes(sizes: &[i64]) -> TensorError {
    match sizes.iter().find(|s| **s < 0) {
        Some(s) => TensorError::invalid(format!(
            "Trying to create tensor with negative dimension {s}: {}",
            list(sizes)
        )),
        None => TensorError::invalid(format!(
            "numel: integer multiplication overflow for sizes {}",
            list(sizes)
        )),
    }
}

fn check_strides(strides: &[i64]) -> Result<()> {
    if strides.iter().any(|s| *s < 0) {
        return Err(TensorError::invalid(format!(
            "as_strided: Negative strides are not supported at the moment, got strides: {}",
            list(strides)
        )));
    }
    Ok(())
}

/// The bytes a tensor of these sizes, strides and storage offset addresses, from the start
/// of its storage (c10's `computeStorageNbytes`); `None` when it has no elements. Computed
/// with checked arithmetic (Note [Checked size arithmetic]), failing as c10 does.
pub(crate) fn storage_extent(
    sizes: &[i64],
    strides: &[i64],
    offset: i64,
    elem: usize,
) -> Result<Option<u64>> {
    check_strides(strides)?;
    if sizes.contains(&0) {
        return Ok(None);
    }
    let mut last = CheckedSize::new(offset);
    for (&size, &stride) in sizes.iter().zip(strides) {
        last = last + (CheckedSize::new(size) - 1) * stride;
    }
    match ((last + 1) * elem as i64).value() {
        Some(n) if n >= 0 => Ok(Some(n as u64)),
        _ => Err(TensorError::invalid(format!(
            "Storage size calculation overflowed with sizes={} and strides={}",
            list(sizes),
            list(strides)
        ))),
    }
}

/// Checks Note [Tensor bounds invariant] (PyTorch's `checkInBoundsForStorage`).
pub(crate) fn check_in_bounds(
    sizes: &[i64],
    strides: &[i64],
    offset: i64,
    elem: usize,
    nbytes: usize,
) -> Result<()> {
    check_strides(strides)?;
    if offset < 0 {
        return Err(TensorError::invalid(format!(
            "Tensor: invalid storage offset {offset}"
        )));
    }
    let Some(needed) = storage_extent(sizes, strides, offset, elem)? else {
        return Ok(());
    };
    if needed > nbytes as u64 {
        return Err(TensorError::invalid(format!(
            "setStorage: sizes {}, strides {}, storage offset {offset}, and itemsize {elem} \
             requiring a storage size of {needed} are out of bounds for storage of size {nbytes}",
            list(sizes),
            list(strides)
        )));
    }
    Ok(())
}

// Note [One-pass geometry check]
// A tensor made from given sizes, strides and offset over a storage of known size needs their
// checks (Note [Tensor bounds invariant], Note [Sizes whose every product fits]), its numel
// and its contiguity: separately, four walks over the dimensions, each with its own calls and
// error plumbing, which cost a backend that makes a tensor per captured call (the lazy
// backend) more than building the tensor. `check_geometry` does all of it in one walk with
// plain checked arithmetic, and only when that walk finds something wrong does it run the
// separate checks, which produce the error (c10's messages, in c10's order). The walk accepts
// exactly what the separate checks accept: it gives up on any negative size or stride, on a
// product of non-zero sizes or (for a tensor with elements) an extent that overflows, and on
// an extent past the storage; products of positive numbers overflow in every order or in
// none, so walking from the last dimension (as the contiguity rule does) changes nothing.

/// What [`check_geometry`] found about a valid geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CheckedGeometry {
    /// The number of elements.
    pub numel: i64,
    /// Row-major contiguity (`layout::is_contiguous`).
    pub is_contiguous: bool,
}

/// Checks Note [Tensor bounds invariant] for these sizes, strides and offset over a storage
/// of `nbytes` bytes (as `check_sizes` then `check_in_bounds`, lengths included) and returns
/// the numel and contiguity, in one pass (Note [One-pass geometry check]).
#[inline]
pub(crate) fn check_geometry(
    sizes: &[i64],
    strides: &[i64],
    offset: i64,
    elem: usize,
    nbytes: usize,
) -> Result<CheckedGeometry> {
    match one_pass(sizes, strides, offset, elem, nbytes) {
        Some(g) => Ok(g),
        None => separate_checks(sizes, strides, offset, elem, nbytes),
    }
}

/// The walk of [`check_geometry`]; `None` when something is wrong.
#[inline]
fn one_pass(
    sizes: &[i64],
    strides: &[i64],
    offset: i64,
    elem: usize,
    nbytes: usize,
) -> Option<CheckedGeometry> {
    if sizes.len() != strides.len() || offset < 0 {
        return None;
    }
    // The product of the non-zero sizes; whether one is zero.
    let mut numel = 1i64;
    let mut empty = false;
    // The offset of the last element (meaningful when there are elements).
    let mut last = offset;
    let mut last_overflows = false;
    let mut expected_stride = 1i64;
    let mut is_contiguous = true;
    for (&size, &stride) in sizes.iter().zip(strides).rev() {
        if size < 0 || stride < 0 {
            return None;
        }
        if size == 0 {
            empty = true;
            continue;
        }
        numel = numel.checked_mul(size)?;
        match (size - 1)
            .checked_mul(stride)
            .and_then(|d| last.checked_add(d))
        {
            Some(l) => last = l,
            None => last_overflows = true,
        }
        if size != 1 {
            is_contiguous &= stride == expected_stride;
            expected_stride = expected_stride.saturating_mul(size);
        }
    }
    if empty {
        return Some(CheckedGeometry {
            numel: 0,
            is_contiguous: true,
        });
    }
    if last_overflows {
        return None;
    }
    let needed = last
        .checked_add(1)?
        .checked_mul(i64::try_from(elem).ok()?)?;
    if needed as u64 > nbytes as u64 {
        return None;
    }
    Some(CheckedGeometry {
        numel,
        is_contiguous,
    })
}

/// [`check_geometry`] by the separate checks: the error of a bad geometry.
#[cold]
#[inline(never)]
fn separate_checks(
    sizes: &[i64],
    strides: &[i64],
    offset: i64,
    elem: usize,
    nbytes: usize,
) -> Result<CheckedGeometry> {
    if strides.len() != sizes.len() {
        return Err(TensorError::invalid(format!(
            "mismatch in length of strides and shape: sizes {} and strides {}",
            list(sizes),
            list(strides)
        )));
    }
    let numel = check_sizes(sizes)?;
    check_in_bounds(sizes, strides, offset, elem, nbytes)?;
    Ok(CheckedGeometry {
        numel,
        is_contiguous: layout::is_contiguous(sizes, strides),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The separate checks' verdict, for comparison.
    fn separately(
        sizes: &[i64],
        strides: &[i64],
        offset: i64,
        elem: usize,
        nbytes: usize,
    ) -> Result<CheckedGeometry> {
        separate_checks(sizes, strides, offset, elem, nbytes)
    }

    #[test]
    fn one_pass_agrees_with_the_separate_checks() {
        /// Sizes, strides, storage offset, element size, storage bytes.
        type Case<'a> = (&'a [i64], &'a [i64], i64, usize, usize);
        let big = i64::MAX / 2;
        let cases: &[Case] = &[
            (&[1], &[1], 0, 4, 4),
            (&[2, 3], &[3, 1], 0, 4, 24),
            (&[2, 3], &[3, 1], 0, 4, 20),
            (&[2, 3], &[1, 2], 1, 4, 28),
            (&[2, 3], &[1, 2], 1, 4, 27),
            (&[2, 1, 3], &[3, 7, 1], 0, 8, 48),
            (&[3, 2], &[1, 3], 0, 2, 100),
            (&[], &[], 0, 4, 4),
            (&[], &[], 3, 4, 12),
            (&[], &[], 3, 4, 16),
            (&[0, 4], &[4, 1], 1 << 40, 4, 0),
            (&[0, big, big], &[0, 1, 1], 0, 4, 0),
            (&[2, big, big], &[1, 1, 1], 0, 4, 0),
            (&[-1], &[1], 0, 4, 100),
            (&[0], &[-1], 0, 4, 100),
            (&[2], &[1], -1, 4, 100),
            (&[2, 3], &[3], 0, 4, 100),
            (&[2, 2], &[big, big], 0, 4, usize::MAX),
            (&[2], &[big], 0, 4, usize::MAX),
            (&[2], &[1], big, 8, usize::MAX),
            (&[1, 4], &[100, 1], 0, 1, 4),
            (&[4, 1], &[1, 100], 0, 1, 4),
        ];
        for &(sizes, strides, offset, elem, nbytes) in cases {
            let fused = check_geometry(sizes, strides, offset, elem, nbytes);
            let apart = separately(sizes, strides, offset, elem, nbytes);
            match (&fused, &apart) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{sizes:?} {strides:?} {offset}"),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                _ => panic!("{sizes:?} {strides:?} {offset} {nbytes}: {fused:?} vs {apart:?}"),
            }
            // The walk itself accepts exactly what the separate checks accept.
            let walk = one_pass(sizes, strides, offset, elem, nbytes);
            assert_eq!(walk, apart.ok(), "{sizes:?} {strides:?} {offset} {nbytes}");
        }
    }

    #[test]
    fn one_pass_agrees_on_every_small_geometry() {
        let values = [-1i64, 0, 1, 2, 3];
        for s0 in values {
            for s1 in values {
                for t0 in values {
                    for t1 in values {
                        for offset in [-1, 0, 2] {
                            for nbytes in [0, 4, 16, 40] {
                                let (sizes, strides) = ([s0, s1], [t0, t1]);
                                assert_eq!(
                                    one_pass(&sizes, &strides, offset, 4, nbytes),
                                    separately(&sizes, &strides, offset, 4, nbytes).ok(),
                                    "{sizes:?} {strides:?} {offset} {nbytes}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

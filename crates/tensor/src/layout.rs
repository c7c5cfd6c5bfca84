//! [`Layout`] and [`MemoryFormat`], with PyTorch's contiguity rules and stride computations.

use std::fmt;

use crate::error::{Result, TensorError};
use crate::DimVec;

/// How a tensor's elements are laid out. Only strided tensors exist in Switchboard so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Dense, addressed by sizes and strides.
    #[default]
    Strided,
}

impl fmt::Display for Layout {
    /// `torch.strided`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Layout::Strided => f.write_str("torch.strided"),
        }
    }
}

/// A memory format (`torch.contiguous_format`, `torch.channels_last`, ...).
///
/// ```
/// use switchboard_tensor::MemoryFormat;
/// let s = MemoryFormat::ChannelsLast.strides(&[1, 64, 5, 4]).unwrap();
/// assert_eq!(&s[..], &[1280, 1, 256, 64]);
/// assert!(MemoryFormat::ChannelsLast.is_contiguous(&[1, 64, 5, 4], &s));
/// assert!(!MemoryFormat::Contiguous.is_contiguous(&[1, 64, 5, 4], &s));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MemoryFormat {
    /// Row-major (the last dimension is innermost).
    #[default]
    Contiguous,
    /// NHWC for 4-d tensors.
    ChannelsLast,
    /// NDHWC for 5-d tensors.
    ChannelsLast3d,
    /// Keep the input's format (for `*_like` and copies).
    Preserve,
}

impl fmt::Display for MemoryFormat {
    /// `torch.contiguous_format`, `torch.channels_last`, ...
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemoryFormat::Contiguous => "torch.contiguous_format",
            MemoryFormat::ChannelsLast => "torch.channels_last",
            MemoryFormat::ChannelsLast3d => "torch.channels_last_3d",
            MemoryFormat::Preserve => "torch.preserve_format",
        })
    }
}

impl MemoryFormat {
    /// The strides PyTorch gives a fresh tensor of `sizes` in this format
    /// (`empty_tensor_restride`). Channels-last formats need rank 4 (rank 5 for 3d);
    /// `Preserve` has no strides of its own and is an error.
    pub fn strides(self, sizes: &[i64]) -> Result<DimVec> {
        match self {
            MemoryFormat::Contiguous => Ok(contiguous_strides(sizes)),
            MemoryFormat::ChannelsLast => {
                if sizes.len() != 4 {
                    return Err(TensorError::invalid(
                        "required rank 4 tensor to use channels_last format",
                    ));
                }
                Ok(channels_last_strides(sizes, &[1, 3, 2, 0]))
            }
            MemoryFormat::ChannelsLast3d => {
                if sizes.len() != 5 {
                    return Err(TensorError::invalid(
                        "required rank 5 tensor to use channels_last_3d format",
                    ));
                }
                Ok(channels_last_strides(sizes, &[1, 4, 3, 2, 0]))
            }
            MemoryFormat::Preserve => Err(TensorError::invalid(
                "unsupported memory format option Preserve",
            )),
        }
    }

    /// Whether `sizes`/`strides` are contiguous in this format, with PyTorch's rules: size-1
    /// dimensions are ignored, an empty tensor is contiguous, and only rank-4 (rank-5) tensors
    /// can be channels-last (channels-last-3d) contiguous. `Preserve` asks about
    /// `Contiguous`.
    pub fn is_contiguous(self, sizes: &[i64], strides: &[i64]) -> bool {
        match self {
            MemoryFormat::Contiguous | MemoryFormat::Preserve => is_contiguous(sizes, strides),
            MemoryFormat::ChannelsLast => {
                sizes.len() == 4 && dims_contiguous(sizes, strides, &[1, 3, 2, 0])
            }
            MemoryFormat::ChannelsLast3d => {
                sizes.len() == 5 && dims_contiguous(sizes, strides, &[1, 4, 3, 2, 0])
            }
        }
    }
}

/// Row-major strides for `sizes` (`stride[d] = stride[d+1] * max(size[d+1], 1)`).
///
/// ```
/// assert_eq!(&switchboard_tensor::contiguous_strides(&[2, 0, 3])[..], &[3, 3, 1]);
/// ```
#[inline]
pub fn contiguous_strides(sizes: &[i64]) -> DimVec {
    let n = sizes.len();
    if n <= 1 {
        return DimVec::from_buf_and_len([1; DIM_INLINE], n);
    }
    if n > DIM_INLINE {
        return contiguous_strides_spilled(sizes);
    }
    // A fixed-trip loop over a plain array (no memset/memcpy calls): tensor creation is on
    // every kernel's path.
    let mut buf = [0i64; DIM_INLINE];
    let mut acc = 1i64;
    for d in (0..DIM_INLINE).rev() {
        if d < n {
            buf[d] = acc;
            acc = acc.saturating_mul(sizes[d].max(1));
        }
    }
    let mut strides = DimVec::from_buf(buf);
    strides.truncate(n);
    strides
}

/// [`contiguous_strides`] for more dimensions than a [`DimVec`] holds inline: kept out of line so
/// that the usual case stays small enough to be inlined into every kernel's result allocation.
#[cold]
#[inline(never)]
fn contiguous_strides_spilled(sizes: &[i64]) -> DimVec {
    let n = sizes.len();
    let mut strides = DimVec::from_elem(1, n);
    for d in (0..n - 1).rev() {
        strides[d] = strides[d + 1].saturating_mul(sizes[d + 1].max(1));
    }
    strides
}

/// Dimensions a [`DimVec`] holds inline.
const DIM_INLINE: usize = 5;

/// `DimVec::from_slice` without `memcpy` calls for the usual short slices. Always inlined: it
/// writes a tensor's borrowed sizes and strides into its block (Note [Dimensions written into
/// the block] in builder.rs), where a call cost as much as the copy, and copies the sizes of
/// a meta function's output.
///
/// ```
/// assert_eq!(&switchboard_tensor::dim_vec(&[2, 3])[..], &[2, 3]);
/// ```
#[inline(always)]
pub fn dim_vec(s: &[i64]) -> DimVec {
    if s.len() > DIM_INLINE {
        return dim_vec_spilled(s);
    }
    let mut v = DimVec::from_buf(std::array::from_fn(|i| s.get(i).copied().unwrap_or(0)));
    v.truncate(s.len());
    v
}

/// [`dim_vec`] for more dimensions than a [`DimVec`] holds inline, out of line.
#[inline(never)]
fn dim_vec_spilled(s: &[i64]) -> DimVec {
    DimVec::from_slice(s)
}

fn channels_last_strides(sizes: &[i64], order: &[usize]) -> DimVec {
    // get_channels_last_strides_2d/3d: no max(size, 1) here, as in PyTorch.
    let mut strides = DimVec::from_elem(0, sizes.len());
    let mut acc = 1i64;
    for &d in order {
        strides[d] = acc;
        acc = acc.saturating_mul(sizes[d]);
    }
    strides
}

fn dims_contiguous(sizes: &[i64], strides: &[i64], order: &[usize]) -> bool {
    let mut expected = 1i64;
    for &d in order {
        if sizes[d] != 1 {
            if strides[d] != expected {
                return false;
            }
            expected = expected.saturating_mul(sizes[d]);
        }
    }
    true
}

/// Equality of short dimension lists, without the `memcmp` call of slice equality (which
/// costs more than the comparison for the usual few dimensions).
///
/// ```
/// assert!(switchboard_tensor::same_dims(&[2, 3], &[2, 3]));
/// assert!(!switchboard_tensor::same_dims(&[2, 3], &[2]));
/// ```
#[inline]
pub fn same_dims(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// PyTorch's `compute_contiguous`: row-major contiguity, ignoring size-1 dimensions; any
/// tensor with zero elements is contiguous.
pub fn is_contiguous(sizes: &[i64], strides: &[i64]) -> bool {
    if sizes.contains(&0) {
        return true;
    }
    let mut expected = 1i64;
    for d in (0..sizes.len()).rev() {
        if sizes[d] != 1 {
            if strides[d] != expected {
                return false;
            }
            expected = expected.saturating_mul(sizes[d]);
        }
    }
    true
}

/// PyTorch's `compute_non_overlapping_and_dense`: the elements exactly tile a contiguous
/// block of memory in some dimension order.
pub fn is_non_overlapping_and_dense(sizes: &[i64], strides: &[i64]) -> bool {
    let n = sizes.len();
    if n == 1 {
        return sizes[0] < 2 || strides[0] == 1;
    }
    let mut perm: Vec<usize> = (0..n).rev().collect();
    perm.sort_by(|&a, &b| {
        use std::cmp::Ordering;
        if sizes[a] < 2 {
            if sizes[b] < 2 {
                Ordering::Equal
            } else {
                Ordering::Greater
            }
        } else if sizes[b] < 2 {
            Ordering::Less
        } else {
            strides[a].cmp(&strides[b])
        }
    });
    let mut require = 1i64;
    for &d in &perm {
        let size = sizes[d];
        if size < 2 {
            return true;
        }
        if strides[d] != require {
            return false;
        }
        require = require.saturating_mul(size);
    }
    true
}

/// PyTorch's `is_channels_last_strides_2d`/`_3d` (the strides look channels-last, for
/// `suggest_memory_format`), given the dims in channels-last order.
fn strides_like_channels_last(sizes: &[i64], strides: &[i64], order: &[usize]) -> bool {
    if strides[1] == 0 {
        return false;
    }
    let mut min = 0i64;
    for &d in order {
        if sizes[d] == 0 || strides[d] < min {
            return false;
        }
        if d == 0 && min == strides[1] {
            return false;
        }
        min = strides[d];
        if sizes[d] > 1 {
            min = min.saturating_mul(sizes[d]);
        }
    }
    true
}

/// PyTorch's `suggest_memory_format` for a strided tensor: `ChannelsLast` (`ChannelsLast3d`)
/// when a rank-4 (rank-5) tensor's strides look channels-last, else `Contiguous`.
pub fn suggest_memory_format(sizes: &[i64], strides: &[i64]) -> MemoryFormat {
    match sizes.len() {
        4 if strides_like_channels_last(sizes, strides, &[1, 3, 2, 0]) => {
            MemoryFormat::ChannelsLast
        }
        5 if strides_like_channels_last(sizes, strides, &[1, 4, 3, 2, 0]) => {
            MemoryFormat::ChannelsLast3d
        }
        _ => MemoryFormat::Contiguous,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides() {
        assert_eq!(&contiguous_strides(&[2, 3, 4])[..], &[12, 4, 1]);
        assert!(contiguous_strides(&[]).is_empty());
        assert_eq!(
            &MemoryFormat::ChannelsLast3d
                .strides(&[2, 3, 4, 5, 6])
                .unwrap()[..],
            &[360, 1, 90, 18, 3]
        );
        assert_eq!(
            MemoryFormat::ChannelsLast
                .strides(&[1, 2])
                .unwrap_err()
                .to_string(),
            "required rank 4 tensor to use channels_last format"
        );
    }

    #[test]
    fn contiguity_rules() {
        // Size-1 dims don't count.
        assert!(is_contiguous(&[2, 1, 3], &[3, 100, 1]));
        assert!(!is_contiguous(&[2, 3], &[1, 2]));
        assert!(is_contiguous(&[0, 3], &[7, 9]));
        assert!(is_contiguous(&[], &[]));
        // A (N,C,1,1) tensor is both contiguous and channels-last contiguous.
        let s = contiguous_strides(&[2, 3, 1, 1]);
        assert!(MemoryFormat::ChannelsLast.is_contiguous(&[2, 3, 1, 1], &s));
        assert!(!MemoryFormat::ChannelsLast.is_contiguous(&[2, 3, 4], &[12, 4, 1]));
    }

    #[test]
    fn dense_and_suggest() {
        assert!(is_non_overlapping_and_dense(&[2, 3], &[1, 2]));
        assert!(!is_non_overlapping_and_dense(&[2, 3], &[0, 1]));
        assert!(is_non_overlapping_and_dense(&[], &[]));
        assert!(!is_non_overlapping_and_dense(&[3], &[2]));
        let cl = MemoryFormat::ChannelsLast.strides(&[2, 3, 4, 5]).unwrap();
        assert_eq!(
            suggest_memory_format(&[2, 3, 4, 5], &cl),
            MemoryFormat::ChannelsLast
        );
        assert_eq!(
            suggest_memory_format(&[2, 3, 4, 5], &contiguous_strides(&[2, 3, 4, 5])),
            MemoryFormat::Contiguous
        );
    }
}

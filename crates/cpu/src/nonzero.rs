//! `nonzero` and `nonzero_static`: the indices of the non-zero elements, one row per element
//! in row-major order (NaN counts as non-zero, `-0.0` as zero).

use switchboard_tensor::{RawOps, ScalarType, Tensor};

use crate::copy::copy_;
use crate::error::{invalid, Result};
use crate::iter::check_internal_overlap;
use crate::shape::check_no_overlap;

// Note [Data-dependent output shapes]
// `nonzero`'s row count is the number of non-zero elements: only the data tells it. PyTorch has
// no C++ Meta kernel for it; its Python meta registration (torch/_meta_registrations.py) fails
// by default, with the message below, rather than guess a shape. The CPU kernel here serves
// both keys (Note [Meta kernels] in switchboard-meta) and fails the same
// way on a tensor without data, so Meta shape inference of a model stops at the `nonzero`
// with PyTorch's explanation, and a backend that captures graphs from Meta shapes must run
// it eagerly instead (the lazy backend does, for every operator PyTorch tags
// `dynamic_output_shape`). `nonzero_static` exists for that: its row count is an argument
// (missing rows are `fill_value`, extra non-zero elements are dropped), so it runs on Meta.

/// PyTorch's message for `nonzero` on a tensor without data.
const NO_DATA: &str = "The register_meta function for torch.nonzero() raises unimplemented by \
     default, as a correct data-independent implementation does not exist. This implementation \
     returns a fake value, assuming all elements of the tensor are non-zero. To enable this \
     registration, please set 'torch.fx.experimental._config.meta_nonzero_assume_all_nonzero' \
     to True.";

/// The multi-indices of `self`'s non-zero elements, in row-major order: `(count, indices)`
/// with the indices column-major (index `d` of element `i` at `i + d * count`), the layout
/// of PyTorch's result.
fn nonzero_indices(self_: &Tensor) -> Result<(i64, Vec<i64>)> {
    let flags = self_.to_vec_as::<bool>()?;
    let count = flags.iter().filter(|&&f| f).count();
    let ndim = self_.dim();
    let mut indices = vec![0i64; count * ndim];
    // The multi-index of element `k` (an odometer over the sizes).
    let mut index = vec![0i64; ndim];
    let mut row = 0;
    for flag in flags {
        if flag {
            for (d, &i) in index.iter().enumerate() {
                indices[row + d * count] = i;
            }
            row += 1;
        }
        for d in (0..ndim).rev() {
            index[d] += 1;
            if index[d] < self_.sizes()[d] {
                break;
            }
            index[d] = 0;
        }
    }
    Ok((count as i64, indices))
}

fn check_long_out(op: &str, out: &Tensor) -> Result<()> {
    if out.dtype() != ScalarType::Long {
        // PyTorch's message, without a space before the dtype.
        return Err(invalid(format!(
            "{op}: Expected out tensor to have scalar type Long but got scalar type{}",
            out.dtype().c10_name()
        )));
    }
    Ok(())
}

/// `nonzero(Tensor self) -> Tensor`: the indices of the non-zero elements of `self`, a
/// `(count, self.dim())` int64 tensor in column-major layout (strides `(1, count)`), as
/// PyTorch's. Fails on tensors without data (Note [Data-dependent output shapes]).
///
/// ```
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 2.0], &[2, 2]).unwrap();
/// let i = switchboard_cpu::nonzero(&t).unwrap();
/// assert_eq!((i.sizes(), i.strides()), (&[2i64, 2][..], &[1i64, 2][..]));
/// assert_eq!(i.to_vec::<i64>().unwrap(), [0, 0, 1, 1]);
/// ```
pub fn nonzero(self_: &Tensor) -> Result<Tensor> {
    if !self_.has_data() {
        return Err(invalid(NO_DATA));
    }
    let (count, indices) = nonzero_indices(self_)?;
    let ndim = self_.dim() as i64;
    let flat = Tensor::from_vec(indices, &[count * ndim])?;
    flat.as_strided(&[count, ndim], &[1, count], 0)
}

/// `nonzero.out(Tensor self, *, Tensor(a!) out)`: [`nonzero`] written into `out` (int64). An
/// `out` of another shape is resized and given the column-major strides of [`nonzero`]'s
/// result; one of the right shape keeps its strides.
pub fn nonzero_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
    if !self_.has_data() || !out.has_data() {
        return Err(invalid(NO_DATA));
    }
    check_long_out("nonzero", out)?;
    check_internal_overlap(out)?;
    check_no_overlap(out, self_)?;
    let result = nonzero(self_)?;
    let sizes = result.sizes();
    let out = if out.sizes() == sizes {
        out.clone()
    } else {
        let resized = out.resize_output(sizes)?;
        resized.as_strided(sizes, result.strides(), resized.storage_offset())?
    };
    if out.numel() > 0 {
        copy_(&out, &result, false)?;
    }
    Ok(out)
}

fn check_static_size(size: i64) -> Result<()> {
    if size < 0 {
        return Err(invalid(
            "nonzero_static: 'size' must be an non-negative integer",
        ));
    }
    Ok(())
}

/// The rows of `nonzero_static`, row-major: the first `size` non-zero indices, then rows of
/// `fill_value`.
fn static_rows(self_: &Tensor, size: i64, fill_value: i64) -> Result<Tensor> {
    let (count, indices) = nonzero_indices(self_)?;
    let ndim = self_.dim();
    let mut rows = Vec::new();
    for i in 0..size {
        if i < count {
            rows.extend((0..ndim).map(|d| indices[(i + d as i64 * count) as usize]));
        } else {
            rows.extend(std::iter::repeat_n(fill_value, ndim));
        }
    }
    Tensor::from_vec(rows, &[size, ndim as i64])
}

/// `nonzero_static(Tensor self, *, SymInt size, int fill_value=-1) -> Tensor`: [`nonzero`]
/// with exactly `size` rows (contiguous): the first `size` non-zero indices, padded with
/// rows of `fill_value`. Its shape does not depend on the data, so it runs on Meta.
///
/// ```
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![1i64, 0, 2, 3], &[4]).unwrap();
/// let i = switchboard_cpu::nonzero_static(&t, 5, -1).unwrap();
/// assert_eq!(i.to_vec::<i64>().unwrap(), [0, 2, 3, -1, -1]);
/// ```
pub fn nonzero_static(self_: &Tensor, size: i64, fill_value: i64) -> Result<Tensor> {
    check_static_size(size)?;
    let out = Tensor::empty_on(&[0], ScalarType::Long, self_.device())?;
    nonzero_static_out(self_, size, fill_value, &out)
}

/// `nonzero_static.out(Tensor self, *, SymInt size, int fill_value=-1, Tensor(a!) out)`:
/// [`nonzero_static`] written into `out` (int64, resized to `(size, self.dim())` when its
/// shape differs).
pub fn nonzero_static_out(
    self_: &Tensor,
    size: i64,
    fill_value: i64,
    out: &Tensor,
) -> Result<Tensor> {
    check_static_size(size)?;
    check_long_out("nonzero_static", out)?;
    let sizes = [size, self_.dim() as i64];
    let out = out.resize_output(&sizes)?;
    if out.numel() == 0 || !out.has_data() {
        return Ok(out);
    }
    if !self_.has_data() {
        return Err(invalid("Cannot copy out of meta tensor; no data!"));
    }
    copy_(&out, &static_rows(self_, size, fill_value)?, false)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_tensor::Device;

    /// Sizes, strides and values (row-major, as `tolist()` reads them).
    fn geometry(t: &Tensor) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
        (
            t.sizes().to_vec(),
            t.strides().to_vec(),
            t.to_vec::<i64>().unwrap(),
        )
    }

    /// Values, sizes and strides of PyTorch 2.15's `torch.ops.aten.nonzero` on the same
    /// inputs.
    #[test]
    fn matches_pytorch() {
        let nan = f32::NAN;
        let m = Tensor::from_vec(vec![0.0, 1.5, nan, 0.0], &[2, 2]).unwrap();
        assert_eq!(
            geometry(&nonzero(&m).unwrap()),
            (vec![2, 2], vec![1, 2], vec![0, 1, 1, 0])
        );
        // Row-major order of the logical elements, whatever the strides.
        let x = Tensor::from_vec(vec![1i64, 0, 2, 0, 3, 0], &[2, 3]).unwrap();
        let t = x.t().unwrap();
        assert_eq!(
            geometry(&nonzero(&t).unwrap()),
            (vec![3, 2], vec![1, 3], vec![0, 0, 1, 1, 2, 0])
        );
        assert_eq!(
            nonzero(&Tensor::from_vec(vec![-0.0f32, 0.0, 1.0], &[3]).unwrap())
                .unwrap()
                .to_vec::<i64>()
                .unwrap(),
            [2]
        );
        // 0-dim: one row of no index, or none.
        let one = Tensor::from_vec(vec![2.0f32], &[]).unwrap();
        assert_eq!(
            geometry(&nonzero(&one).unwrap()),
            (vec![1, 0], vec![1, 1], vec![])
        );
        let zero = Tensor::from_vec(vec![0.0f32], &[]).unwrap();
        assert_eq!(
            geometry(&nonzero(&zero).unwrap()),
            (vec![0, 0], vec![1, 0], vec![])
        );
        let empty = Tensor::zeros(&[2, 0, 3], ScalarType::Float).unwrap();
        assert_eq!(
            geometry(&nonzero(&empty).unwrap()),
            (vec![0, 3], vec![1, 0], vec![])
        );
        let b = Tensor::from_vec(vec![true, false, true], &[3]).unwrap();
        assert_eq!(
            geometry(&nonzero(&b).unwrap()),
            (vec![2, 1], vec![1, 2], vec![0, 2])
        );
    }

    #[test]
    fn out_forms_match_pytorch() {
        let x = Tensor::from_vec(vec![1i64, 0, 2, 0, 3, 0], &[2, 3]).unwrap();
        // Another shape: resized, column-major.
        let o = Tensor::zeros(&[5, 5], ScalarType::Long).unwrap();
        assert_eq!(
            geometry(&nonzero_out(&x, &o).unwrap()),
            (vec![3, 2], vec![1, 3], vec![0, 0, 0, 2, 1, 1])
        );
        // The right shape: its strides kept.
        let o = Tensor::zeros(&[3, 2], ScalarType::Long).unwrap();
        let r = nonzero_out(&x, &o).unwrap();
        assert!(r.is_same(&o));
        assert_eq!(
            geometry(&r),
            (vec![3, 2], vec![2, 1], vec![0, 0, 0, 2, 1, 1])
        );
        let f = Tensor::zeros(&[0], ScalarType::Float).unwrap();
        assert_eq!(
            nonzero_out(&x, &f).unwrap_err().to_string(),
            "nonzero: Expected out tensor to have scalar type Long but got scalar typeFloat"
        );
        let same = Tensor::zeros(&[4], ScalarType::Long).unwrap();
        assert!(nonzero_out(&same, &same)
            .unwrap_err()
            .to_string()
            .contains("some elements of the input tensor and the written-to tensor"));
        let expanded = Tensor::zeros(&[1], ScalarType::Long)
            .unwrap()
            .expand(&[3, 1])
            .unwrap();
        assert!(nonzero_out(&x, &expanded)
            .unwrap_err()
            .to_string()
            .contains("more than one element of the written-to tensor"));
    }

    #[test]
    fn static_form_matches_pytorch() {
        let v = Tensor::from_vec(vec![1i64, 0, 2, 3], &[4]).unwrap();
        assert_eq!(
            geometry(&nonzero_static(&v, 2, -1).unwrap()),
            (vec![2, 1], vec![1, 1], vec![0, 2])
        );
        assert_eq!(
            geometry(&nonzero_static(&v, 6, -7).unwrap()),
            (vec![6, 1], vec![1, 1], vec![0, 2, 3, -7, -7, -7])
        );
        assert_eq!(
            nonzero_static(&v, -1, 0).unwrap_err().to_string(),
            "nonzero_static: 'size' must be an non-negative integer"
        );
        let s = Tensor::from_vec(vec![3i64], &[]).unwrap();
        assert_eq!(
            geometry(&nonzero_static(&s, 2, -1).unwrap()),
            (vec![2, 0], vec![1, 1], vec![])
        );
        let m = Tensor::from_vec(vec![1i64, 0, 0, 1], &[2, 2]).unwrap();
        assert_eq!(
            geometry(&nonzero_static(&m, 0, -1).unwrap()),
            (vec![0, 2], vec![2, 1], vec![])
        );
        let x = Tensor::from_vec(vec![1i64, 0, 2, 0, 3, 0], &[2, 3]).unwrap();
        assert_eq!(
            geometry(&nonzero_static(&x, 4, -1).unwrap()),
            (vec![4, 2], vec![2, 1], vec![0, 0, 0, 2, 1, 1, -1, -1])
        );
        let i = Tensor::zeros(&[0], ScalarType::Int).unwrap();
        assert_eq!(
            nonzero_static_out(&x, 3, -1, &i).unwrap_err().to_string(),
            "nonzero_static: Expected out tensor to have scalar type Long but got scalar typeInt"
        );
    }

    #[test]
    fn meta_tensors() {
        let m = Tensor::zeros_on(&[3, 2], ScalarType::Float, Device::META).unwrap();
        assert!(nonzero(&m)
            .unwrap_err()
            .to_string()
            .starts_with("The register_meta function for torch.nonzero() raises unimplemented"));
        let s = nonzero_static(&m, 4, -1).unwrap();
        assert_eq!((s.sizes(), s.is_meta()), (&[4i64, 2][..], true));
    }
}

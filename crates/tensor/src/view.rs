//! Views: tensors sharing their base's storage with other sizes, strides and offset (`view`,
//! `reshape`, `transpose`, `permute`, `expand`, `squeeze`, `unsqueeze`, `select`, `slice`,
//! `narrow`, `t`, `flatten`, `as_strided`), with PyTorch's stride rules and messages.

use crate::builder::{check_in_bounds, check_sizes, ValidParts};
use crate::checked_size::CheckedSize;
use crate::error::{list, wrap_dim, wrap_dim_exact, Result, TensorError};
use crate::geometry::{compute_view_stride, infer_view_size};
use crate::tensor::Tensor;
use crate::DimVec;

// Note [Views]
// A view is a new TensorImpl over the same Storage with the same dtype, device, key set,
// payload and version counter (so an in-place op on a view bumps its base's version, as in
// PyTorch); only sizes, strides and storage offset change, and it is never a wrapped number.
// Every function here computes metadata that stays inside the base's bounds (Note [Tensor
// bounds invariant]) by construction, except `as_strided`, which checks.

impl Tensor {
    /// A view with new metadata, known to be in bounds.
    #[inline]
    fn make_view(&self, sizes: DimVec, strides: DimVec, offset: i64) -> Tensor {
        Tensor::from_valid_parts(ValidParts {
            storage: self.storage().clone(),
            sizes,
            strides,
            storage_offset: offset,
            dtype: self.dtype(),
            device: self.device(),
            key_set: self.key_set(),
            version: self.version.clone(),
            payload: self.payload.clone(),
            payload_tag: 0,
            wrapped_number: false,
        })
    }
}

/// The data-model versions of the view operators (and `contiguous`): they build views and
/// copies directly, without dispatching, so no layer (autograd, tracing, ...) sees them.
/// Kernels use them; user code calls the dispatched operators of `switchboard_ops` instead,
/// which is why these are a trait to import rather than inherent methods.
pub trait RawOps {
    /// A view of the same storage with any sizes, strides and offset (checked against the
    /// storage's size; strides must be non-negative).
    fn as_strided(&self, sizes: &[i64], strides: &[i64], storage_offset: i64) -> Result<Tensor>;
    /// `view(sizes)`: the same elements with another shape, sharing storage; one size may be
    /// `-1`. Fails when the strides cannot express it ("... Use .reshape(...) instead.").
    ///
    /// ```
    /// use switchboard_tensor::RawOps;
    /// use switchboard_tensor::Tensor;
    /// let t = Tensor::arange(0, 6, 1, None).unwrap();
    /// let v = t.view(&[2, -1]).unwrap();
    /// assert_eq!(v.sizes(), &[2, 3]);
    /// assert!(v.t().unwrap().view(&[6]).is_err());
    /// ```
    fn view(&self, sizes: &[i64]) -> Result<Tensor>;
    /// A view with shape `sizes` if one exists, `None` if reshaping needs a copy.
    fn reshape_view(&self, sizes: &[i64]) -> Result<Option<Tensor>>;
    /// `reshape(sizes)`: a view when possible, else a contiguous copy with that shape.
    ///
    /// ```
    /// use switchboard_tensor::RawOps;
    /// use switchboard_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1, 2, 3, 4i32], &[2, 2]).unwrap().t().unwrap();
    /// let r = t.reshape(&[4]).unwrap();
    /// assert!(!r.is_alias_of(&t));
    /// assert_eq!(r.to_vec::<i32>().unwrap(), [1, 3, 2, 4]);
    /// ```
    fn reshape(&self, sizes: &[i64]) -> Result<Tensor>;
    /// Swaps dimensions `dim0` and `dim1`.
    fn transpose(&self, dim0: i64, dim1: i64) -> Result<Tensor>;
    /// `t()`: transposes a 2-d tensor; 0-d and 1-d tensors are returned as views unchanged.
    fn t(&self) -> Result<Tensor>;
    /// Reorders the dimensions: result dimension `i` is input dimension `dims[i]`.
    fn permute(&self, dims: &[i64]) -> Result<Tensor>;
    /// Broadcasts to `sizes` (`-1` keeps a size) by giving new and size-1 dimensions stride 0
    /// (`inferExpandGeometry`).
    ///
    /// ```
    /// use switchboard_tensor::RawOps;
    /// use switchboard_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3, 1]).unwrap();
    /// let e = t.expand(&[2, 3, 4]).unwrap();
    /// assert_eq!(e.strides(), &[0, 1, 0]);
    /// assert!(t.expand(&[3, 2, 2]).is_err());
    /// ```
    fn expand(&self, sizes: &[i64]) -> Result<Tensor>;
    /// Removes every size-1 dimension.
    fn squeeze(&self) -> Result<Tensor>;
    /// Removes dimension `dim` if its size is 1 (else returns an unchanged view).
    fn squeeze_dim(&self, dim: i64) -> Result<Tensor>;
    /// `squeeze.dims`: drops each listed dimension of size 1 (wrapped; a 0-dim tensor takes
    /// `0` and `-1`); a dimension listed twice is an error, as in PyTorch.
    fn squeeze_dims(&self, dims: &[i64]) -> Result<Tensor>;
    /// Inserts a size-1 dimension at `dim` (in `[-dim-1, dim]`).
    fn unsqueeze(&self, dim: i64) -> Result<Tensor>;
    /// The slice at `index` along `dim`, which is removed.
    fn select(&self, dim: i64, index: i64) -> Result<Tensor>;
    /// `self[start:end:step]` along `dim`, with Python's clamping of `start` and `end`
    /// (`None`: the beginning / the end). `step` must be positive.
    ///
    /// ```
    /// use switchboard_tensor::RawOps;
    /// use switchboard_tensor::Tensor;
    /// let t = Tensor::arange(0, 10, 1, None).unwrap();
    /// let s = t.slice(0, Some(-8), Some(100), 3).unwrap();
    /// assert_eq!(s.to_vec::<i64>().unwrap(), [2, 5, 8]);
    /// ```
    fn slice(&self, dim: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Result<Tensor>;
    /// `length` elements from `start` along `dim` (`start` may be negative).
    fn narrow(&self, dim: i64, start: i64, length: i64) -> Result<Tensor>;
    /// Flattens dimensions `start_dim..=end_dim` into one (a view when possible, else a copy;
    /// a 0-dim tensor becomes 1-d).
    fn flatten(&self, start_dim: i64, end_dim: i64) -> Result<Tensor>;
    /// `view(dtype)`: the same bytes read as elements of `dtype`, sharing storage and version
    /// counter; with another element size the last dimension is rescaled (Note [Views of
    /// another dtype], PyTorch's rules and messages). Bool and other dtypes cannot view each
    /// other here.
    ///
    /// ```
    /// use switchboard_tensor::{RawOps, ScalarType, Tensor};
    /// let t = Tensor::from_vec(vec![1.0f32, -2.0], &[2]).unwrap();
    /// let bits = t.view_dtype(ScalarType::Int).unwrap();
    /// assert_eq!(bits.to_vec::<i32>().unwrap(), [0x3f80_0000, -0x4000_0000]);
    /// assert_eq!(t.view_dtype(ScalarType::Short).unwrap().sizes(), &[4]);
    /// ```
    fn view_dtype(&self, dtype: crate::ScalarType) -> Result<Tensor>;
    /// `view_as_real`: a complex tensor's real and imaginary parts as a real tensor with a last
    /// dimension of 2, over the same storage (Note [Complex views]).
    fn view_as_real(&self) -> Result<Tensor>;
    /// `view_as_complex`: a real tensor with a last dimension of 2 (stride 1) as complex, over
    /// the same storage (Note [Complex views]).
    fn view_as_complex(&self) -> Result<Tensor>;
    /// `self` if it is contiguous, else a contiguous copy (same dtype and device; on devices
    /// without data, a tensor with contiguous strides).
    fn contiguous(&self) -> Result<Tensor>;
    /// `self` if it is contiguous in `format`, else a copy in that format.
    fn contiguous_as(&self, format: crate::MemoryFormat) -> Result<Tensor>;
}

impl RawOps for Tensor {
    fn as_strided(&self, sizes: &[i64], strides: &[i64], storage_offset: i64) -> Result<Tensor> {
        if sizes.len() != strides.len() {
            return Err(TensorError::invalid(format!(
                "mismatch in length of strides and shape: sizes {} and strides {}",
                list(sizes),
                list(strides)
            )));
        }
        check_sizes(sizes)?;
        check_in_bounds(
            sizes,
            strides,
            storage_offset,
            self.element_size(),
            self.storage().nbytes(),
        )?;
        Ok(self.make_view(
            DimVec::from_slice(sizes),
            DimVec::from_slice(strides),
            storage_offset,
        ))
    }

    fn view_dtype(&self, dtype: crate::ScalarType) -> Result<Tensor> {
        self.reinterpret_as(dtype)
    }

    fn view_as_real(&self) -> Result<Tensor> {
        self.view_as_real_impl()
    }

    fn view_as_complex(&self) -> Result<Tensor> {
        self.view_as_complex_impl()
    }

    fn view(&self, sizes: &[i64]) -> Result<Tensor> {
        let shape = infer_view_size(sizes, self.numel())?;
        let strides = compute_view_stride(self.sizes(), self.strides(), &shape)
            .ok_or(TensorError::InvalidView)?;
        Ok(self.make_view(shape, strides, self.storage_offset()))
    }

    fn reshape_view(&self, sizes: &[i64]) -> Result<Option<Tensor>> {
        let shape = infer_view_size(sizes, self.numel())?;
        Ok(compute_view_stride(self.sizes(), self.strides(), &shape)
            .map(|strides| self.make_view(shape, strides, self.storage_offset())))
    }

    fn reshape(&self, sizes: &[i64]) -> Result<Tensor> {
        match self.reshape_view(sizes)? {
            Some(v) => Ok(v),
            None => self.contiguous()?.view(sizes),
        }
    }

    fn transpose(&self, dim0: i64, dim1: i64) -> Result<Tensor> {
        let (a, b) = (wrap_dim(dim0, self.dim())?, wrap_dim(dim1, self.dim())?);
        let (mut sizes, mut strides) = (
            DimVec::from_slice(self.sizes()),
            DimVec::from_slice(self.strides()),
        );
        if self.dim() > 0 {
            sizes.swap(a, b);
            strides.swap(a, b);
        }
        Ok(self.make_view(sizes, strides, self.storage_offset()))
    }

    fn t(&self) -> Result<Tensor> {
        match self.dim() {
            0 | 1 => Ok(self.make_view(
                DimVec::from_slice(self.sizes()),
                DimVec::from_slice(self.strides()),
                self.storage_offset(),
            )),
            2 => self.transpose(0, 1),
            n => Err(TensorError::invalid(format!(
                "t() expects a tensor with <= 2 dimensions, but self is {n}D"
            ))),
        }
    }

    fn permute(&self, dims: &[i64]) -> Result<Tensor> {
        if dims.len() != self.dim() {
            return Err(TensorError::invalid(format!(
                "permute(sparse_coo): number of dimensions in the tensor input does not match \
                 the length of the desired ordering of dimensions i.e. input.dim() = {} is not \
                 equal to len(dims) = {}",
                self.dim(),
                dims.len()
            )));
        }
        let mut seen = DimVec::from_elem(0, self.dim());
        let (mut sizes, mut strides) = (DimVec::new(), DimVec::new());
        for &d in dims {
            let d = wrap_dim(d, self.dim())?;
            if seen[d] != 0 {
                return Err(TensorError::invalid(
                    "permute(): duplicate dims are not allowed.",
                ));
            }
            seen[d] = 1;
            sizes.push(self.sizes()[d]);
            strides.push(self.strides()[d]);
        }
        Ok(self.make_view(sizes, strides, self.storage_offset()))
    }

    fn expand(&self, sizes: &[i64]) -> Result<Tensor> {
        let (tsizes, tstrides) = (self.sizes(), self.strides());
        let ndim = sizes.len();
        let tdim = tsizes.len();
        if ndim < tdim {
            return Err(TensorError::invalid(format!(
                "expand({}{{{}}}, size={}): the number of sizes provided ({ndim}) must be \
                 greater or equal to the number of dimensions in the tensor ({tdim})",
                self.type_string(),
                list(tsizes),
                list(sizes)
            )));
        }
        let mut new_sizes = DimVec::from_elem(0, ndim);
        let mut new_strides = DimVec::from_elem(0, ndim);
        for i in (0..ndim).rev() {
            let offset = ndim - 1 - i;
            let dim = tdim as i64 - 1 - offset as i64;
            let mut size = if dim >= 0 { tsizes[dim as usize] } else { 1 };
            let mut stride = if dim >= 0 {
                tstrides[dim as usize]
            } else if i + 1 < ndim {
                new_sizes[i + 1].saturating_mul(new_strides[i + 1])
            } else {
                1
            };
            let mut target = sizes[i];
            if target == -1 {
                if dim < 0 {
                    return Err(TensorError::invalid(format!(
                        "The expanded size of the tensor (-1) isn't allowed in a leading, \
                         non-existing dimension {i}"
                    )));
                }
                target = size;
            }
            if target < 0 {
                return Err(TensorError::invalid(format!(
                    "Trying to create tensor with negative dimension {target}: {}",
                    list(sizes)
                )));
            }
            if size != target {
                if size != 1 {
                    return Err(TensorError::invalid(format!(
                        "The expanded size of the tensor ({target}) must match the existing \
                         size ({size}) at non-singleton dimension {i}.  Target sizes: {}.  \
                         Tensor sizes: {}",
                        list(sizes),
                        list(tsizes)
                    )));
                }
                size = target;
                stride = 0;
            }
            new_sizes[i] = size;
            new_strides[i] = stride;
        }
        check_sizes(&new_sizes)?;
        Ok(self.make_view(new_sizes, new_strides, self.storage_offset()))
    }

    fn squeeze(&self) -> Result<Tensor> {
        let (mut sizes, mut strides) = (DimVec::new(), DimVec::new());
        for (&s, &st) in self.sizes().iter().zip(self.strides()) {
            if s != 1 {
                sizes.push(s);
                strides.push(st);
            }
        }
        Ok(self.make_view(sizes, strides, self.storage_offset()))
    }

    fn squeeze_dim(&self, dim: i64) -> Result<Tensor> {
        let d = wrap_dim(dim, self.dim())?;
        let (mut sizes, mut strides) = (
            DimVec::from_slice(self.sizes()),
            DimVec::from_slice(self.strides()),
        );
        if self.dim() > 0 && sizes[d] == 1 {
            sizes.remove(d);
            strides.remove(d);
        }
        Ok(self.make_view(sizes, strides, self.storage_offset()))
    }

    fn squeeze_dims(&self, dims: &[i64]) -> Result<Tensor> {
        // Which dims are listed (PyTorch's dim_list_to_bitset).
        let mut listed = vec![false; self.dim().max(1)];
        for &dim in dims {
            let d = wrap_dim(dim, self.dim())?;
            if std::mem::replace(&mut listed[d], true) {
                return Err(TensorError::invalid(format!(
                    "dim {d} appears multiple times in the list of dims"
                )));
            }
        }
        let (mut sizes, mut strides) = (DimVec::new(), DimVec::new());
        for (d, (&s, &st)) in self.sizes().iter().zip(self.strides()).enumerate() {
            if s != 1 || !listed[d] {
                sizes.push(s);
                strides.push(st);
            }
        }
        Ok(self.make_view(sizes, strides, self.storage_offset()))
    }

    fn unsqueeze(&self, dim: i64) -> Result<Tensor> {
        let d = wrap_dim_exact(dim, self.dim() + 1)?;
        let (mut sizes, mut strides) = (
            DimVec::from_slice(self.sizes()),
            DimVec::from_slice(self.strides()),
        );
        let stride = if d >= self.dim() {
            1
        } else {
            sizes[d].saturating_mul(strides[d])
        };
        sizes.insert(d, 1);
        strides.insert(d, stride);
        Ok(self.make_view(sizes, strides, self.storage_offset()))
    }

    fn select(&self, dim: i64, index: i64) -> Result<Tensor> {
        if self.dim() == 0 {
            return Err(TensorError::invalid(
                "select() cannot be applied to a 0-dim tensor.",
            ));
        }
        let d = wrap_dim(dim, self.dim())?;
        let size = self.sizes()[d];
        if index < -size || index >= size {
            return Err(TensorError::invalid(format!(
                "select(): index {index} out of range for tensor of size {} at dimension {d}",
                list(self.sizes())
            )));
        }
        let index = if index < 0 { index + size } else { index };
        let offset = (CheckedSize::new(index) * self.strides()[d] + self.storage_offset())
            .get(|| "select: the storage offset".into())?;
        let (mut sizes, mut strides) = (
            DimVec::from_slice(self.sizes()),
            DimVec::from_slice(self.strides()),
        );
        sizes.remove(d);
        strides.remove(d);
        Ok(self.make_view(sizes, strides, offset))
    }

    fn slice(&self, dim: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Result<Tensor> {
        if self.dim() == 0 {
            return Err(TensorError::invalid(
                "slice() cannot be applied to a 0-dim tensor.",
            ));
        }
        let d = wrap_dim(dim, self.dim())?;
        if step <= 0 {
            return Err(TensorError::invalid("slice step must be positive"));
        }
        let size = self.sizes()[d];
        let mut start = start.unwrap_or(0);
        let mut end = end.unwrap_or(i64::MAX);
        if start < 0 {
            start = start.saturating_add(size);
        }
        if end < 0 {
            end = end.saturating_add(size);
        }
        start = start.clamp(0, size);
        end = end.clamp(start, size);
        let stride = self.strides()[d];
        let offset = (CheckedSize::new(start) * stride + self.storage_offset())
            .get(|| "slice: the storage offset".into())?;
        let (mut sizes, mut strides) = (
            DimVec::from_slice(self.sizes()),
            DimVec::from_slice(self.strides()),
        );
        sizes[d] = if end == start {
            0
        } else {
            (end - start - 1) / step + 1
        };
        strides[d] = (CheckedSize::new(stride) * step).get(|| "slice: the stride".into())?;
        Ok(self.make_view(sizes, strides, offset))
    }

    fn narrow(&self, dim: i64, start: i64, length: i64) -> Result<Tensor> {
        if self.dim() == 0 {
            return Err(TensorError::invalid(
                "narrow() cannot be applied to a 0-dim tensor.",
            ));
        }
        if length < 0 {
            return Err(TensorError::invalid(
                "narrow(): length must be non-negative.",
            ));
        }
        let d = wrap_dim(dim, self.dim())?;
        let size = self.sizes()[d];
        if start < -size || start > size {
            return Err(TensorError::invalid(format!(
                "start out of range (expected to be in range of [{}, {size}], but got {start})",
                -size
            )));
        }
        let start = if start < 0 { start + size } else { start };
        if start > size - length {
            return Err(TensorError::invalid(format!(
                "start ({start}) + length ({length}) exceeds dimension size ({size})."
            )));
        }
        self.slice(d as i64, Some(start), Some(start + length), 1)
    }

    fn flatten(&self, start_dim: i64, end_dim: i64) -> Result<Tensor> {
        let s = wrap_dim(start_dim, self.dim())?;
        let e = wrap_dim(end_dim, self.dim())?;
        if s > e {
            return Err(TensorError::invalid(
                "flatten() has invalid args: start_dim cannot come after end_dim",
            ));
        }
        if self.dim() == 0 {
            return self.reshape(&[1]);
        }
        if s == e {
            return Ok(self.make_view(
                DimVec::from_slice(self.sizes()),
                DimVec::from_slice(self.strides()),
                self.storage_offset(),
            ));
        }
        let mut shape: DimVec = self.sizes()[..s].iter().copied().collect();
        shape.push(self.sizes()[s..=e].iter().product());
        shape.extend_from_slice(&self.sizes()[e + 1..]);
        self.reshape(&shape)
    }
    fn contiguous(&self) -> Result<Tensor> {
        self.contiguous_impl(crate::MemoryFormat::Contiguous)
    }
    fn contiguous_as(&self, format: crate::MemoryFormat) -> Result<Tensor> {
        self.contiguous_impl(format)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::ScalarType;

    fn ar(sizes: &[i64]) -> Tensor {
        let n: i64 = sizes.iter().product();
        Tensor::arange(0, n, 1, None).unwrap().view(sizes).unwrap()
    }

    #[test]
    fn view_errors() {
        let t = ar(&[9]);
        assert_eq!(
            t.view(&[2, 5]).unwrap_err().to_string(),
            "shape '[2, 5]' is invalid for input of size 9"
        );
        assert_eq!(
            t.view(&[-1, -1]).unwrap_err().to_string(),
            "only one dimension can be inferred"
        );
        let tt = ar(&[2, 3]).t().unwrap();
        assert_eq!(
            tt.view(&[6]).unwrap_err().to_string(),
            "view size is not compatible with input tensor's size and stride (at least one \
             dimension spans across two contiguous subspaces). Use .reshape(...) instead."
        );
        assert!(tt.reshape_view(&[6]).unwrap().is_none());
        let e = Tensor::zeros(&[0, 3], ScalarType::Float).unwrap();
        assert!(e
            .view(&[-1, 0])
            .unwrap_err()
            .to_string()
            .starts_with("cannot reshape"));
        assert_eq!(e.view(&[3, 0, 2]).unwrap().strides(), &[2, 2, 1]);
    }

    #[test]
    fn views_of_noncontiguous() {
        // (4, 6) -> select columns 0..6 step 2 -> (4, 3) with strides (6, 2); view (2, 2, 3).
        let s = ar(&[4, 6]).slice(1, None, None, 2).unwrap();
        let v = s.view(&[2, 2, 3]).unwrap();
        assert_eq!(v.strides(), &[12, 6, 2]);
        assert_eq!(v.to_vec::<i64>().unwrap(), s.to_vec::<i64>().unwrap());
        // Uniformly strided: viewable as 1-d with stride 2.
        assert_eq!(s.view(&[12]).unwrap().strides(), &[2]);
        let s = ar(&[4, 6]).slice(1, None, Some(4), 2).unwrap();
        assert!(s.view(&[8]).is_err());
        assert_eq!(
            s.reshape(&[8]).unwrap().to_vec::<i64>().unwrap(),
            s.to_vec::<i64>().unwrap()
        );
    }

    #[test]
    fn dims_and_errors() {
        let t = ar(&[2, 3, 4]);
        assert_eq!(
            t.transpose(0, 3).unwrap_err().to_string(),
            "Dimension out of range (expected to be in range of [-3, 2], but got 3)"
        );
        assert_eq!(
            t.t().unwrap_err().to_string(),
            "t() expects a tensor with <= 2 dimensions, but self is 3D"
        );
        let p = t.permute(&[2, 0, 1]).unwrap();
        assert_eq!((p.sizes(), p.strides()), (&[4, 2, 3][..], &[1, 12, 4][..]));
        assert!(t.permute(&[0, 0, 1]).is_err());
        assert!(t
            .permute(&[0, 1])
            .unwrap_err()
            .to_string()
            .contains("input.dim() = 3"));
        assert_eq!(t.select(1, -1).unwrap().storage_offset(), 8);
        assert_eq!(
            t.select(0, 2).unwrap_err().to_string(),
            "select(): index 2 out of range for tensor of size [2, 3, 4] at dimension 0"
        );
        let u = t.unsqueeze(-1).unwrap();
        assert_eq!(
            (u.sizes(), u.strides()),
            (&[2, 3, 4, 1][..], &[12, 4, 1, 1][..])
        );
        let u = t.unsqueeze(1).unwrap();
        assert_eq!(u.strides(), &[12, 12, 4, 1]);
        assert!(t.unsqueeze(4).is_err());
        assert_eq!(u.squeeze().unwrap().sizes(), &[2, 3, 4]);
        assert_eq!(u.squeeze_dim(1).unwrap().sizes(), &[2, 3, 4]);
        assert_eq!(u.squeeze_dim(0).unwrap().sizes(), &[2, 1, 3, 4]);
        assert_eq!(t.flatten(1, -1).unwrap().sizes(), &[2, 12]);
        assert!(t.flatten(2, 1).is_err());
        let s = Tensor::scalar_tensor(1, ScalarType::Int);
        assert_eq!(s.flatten(0, -1).unwrap().sizes(), &[1]);
        assert_eq!(s.unsqueeze(0).unwrap().sizes(), &[1]);
        assert!(s.select(0, 0).is_err());
        assert_eq!(s.squeeze_dim(0).unwrap().dim(), 0);
        let u = ar(&[1, 2, 1, 3]);
        assert_eq!(u.squeeze_dims(&[0, -2, 1]).unwrap().sizes(), &[2, 3]);
        assert_eq!(u.squeeze_dims(&[]).unwrap().sizes(), &[1, 2, 1, 3]);
        let twice = u.squeeze_dims(&[0, -4]).unwrap_err().to_string();
        assert!(
            twice.contains("dim 0 appears multiple times in the list of dims"),
            "{twice}"
        );
        assert!(u.squeeze_dims(&[4]).is_err());
        assert_eq!(s.squeeze_dims(&[-1]).unwrap().dim(), 0);
        assert_eq!(s.expand(&[2, 2]).unwrap().strides(), &[0, 0]);
    }

    #[test]
    fn narrow_and_slice() {
        let t = ar(&[5]);
        assert_eq!(t.narrow(0, -2, 2).unwrap().to_vec::<i64>().unwrap(), [3, 4]);
        assert_eq!(
            t.narrow(0, 6, 0).unwrap_err().to_string(),
            "start out of range (expected to be in range of [-5, 5], but got 6)"
        );
        assert_eq!(
            t.narrow(0, 3, 3).unwrap_err().to_string(),
            "start (3) + length (3) exceeds dimension size (5)."
        );
        assert_eq!(t.slice(0, Some(4), Some(2), 1).unwrap().numel(), 0);
        assert_eq!(
            t.slice(0, None, Some(-1), 2)
                .unwrap()
                .to_vec::<i64>()
                .unwrap(),
            [0, 2]
        );
        assert!(t.slice(0, None, None, 0).is_err());
        assert_eq!(t.slice(0, Some(10), None, 1).unwrap().storage_offset(), 5);
    }

    #[test]
    fn expand_errors() {
        let t = Tensor::zeros(&[2, 3], ScalarType::Float).unwrap();
        assert_eq!(
            t.expand(&[2, 4]).unwrap_err().to_string(),
            "The expanded size of the tensor (4) must match the existing size (3) at \
             non-singleton dimension 1.  Target sizes: [2, 4].  Tensor sizes: [2, 3]"
        );
        assert_eq!(
            t.expand(&[3]).unwrap_err().to_string(),
            "expand(torch.FloatTensor{[2, 3]}, size=[3]): the number of sizes provided (1) \
             must be greater or equal to the number of dimensions in the tensor (2)"
        );
        assert!(t.expand(&[-1, 2, 3]).is_err());
        assert_eq!(t.expand(&[4, -1, -1]).unwrap().strides(), &[0, 3, 1]);
        let one = Tensor::zeros(&[1], ScalarType::Float).unwrap();
        assert_eq!(one.expand(&[0]).unwrap().numel(), 0);
    }

    #[test]
    fn as_strided_checks() {
        let t = ar(&[6]);
        let a = t.as_strided(&[2, 2], &[1, 2], 1).unwrap();
        assert_eq!(a.to_vec::<i64>().unwrap(), [1, 3, 2, 4]);
        assert!(t.as_strided(&[2, 2], &[1, 3], 2).is_err());
        assert!(t.as_strided(&[2], &[-1], 2).is_err());
    }
}

//! Joining tensors: `cat` and `stack` (with `out=`), with PyTorch's type promotion across the
//! inputs and its legacy rule that 1-D empty tensors (size `[0]`) are skipped by `cat`.

use switchboard_tensor::{wrap_dim, CheckedSize, DimVec, MemoryFormat, RawOps, Tensor};

use crate::copy::copy_into;
use crate::error::{check_cpu_or_meta, invalid, same_device, shape_str, Result};
use crate::iter::check_internal_overlap;
use crate::promote::{can_cast, result_type, DEFAULT_FLOAT};

/// PyTorch's `assert_no_overlap`, which the meta functions share.
pub(crate) use crate::iter::check_no_overlap;

/// `cat_should_skip_tensor`: 1-D tensors of size `[0]` take no part in `cat`'s shape checks.
fn skipped(t: &Tensor) -> bool {
    t.dim() == 1 && t.numel() == 0
}

/// `cat_compute_output_memory_format`: channels-last when every input suggests the same
/// channels-last format, else contiguous.
fn output_format(tensors: &[Tensor]) -> MemoryFormat {
    let mut format = None;
    for t in tensors {
        let f = t.suggest_memory_format();
        if f == MemoryFormat::Contiguous {
            return f;
        }
        if format.is_some_and(|g| g != f) {
            return MemoryFormat::Contiguous;
        }
        format = Some(f);
    }
    format.unwrap_or(MemoryFormat::Contiguous)
}

/// `check_cat_shape_except_dim`.
fn check_shape_except_dim(first: &Tensor, t: &Tensor, dim: usize, index: usize) -> Result<()> {
    if first.dim() != t.dim() {
        return Err(invalid(format!(
            "Tensors must have same number of dimensions: got {} and {}",
            first.dim(),
            t.dim()
        )));
    }
    for d in 0..first.dim() {
        if d != dim && first.sizes()[d] != t.sizes()[d] {
            return Err(invalid(format!(
                "Sizes of tensors must match except in dimension {dim}. Expected size {} but \
                 got size {} for tensor number {index} in the list.",
                first.sizes()[d],
                t.sizes()[d]
            )));
        }
    }
    Ok(())
}

fn cat_impl(tensors: &[Tensor], dim: i64, out: Option<&Tensor>) -> Result<Tensor> {
    for (i, t) in tensors.iter().enumerate() {
        if t.dim() == 0 {
            return Err(invalid(format!(
                "zero-dimensional tensor (at position {i}) cannot be concatenated"
            )));
        }
    }
    // `legacy_cat_wrap_dim`: wrap against the first tensor that is not skipped.
    let valid = tensors.iter().position(|t| !skipped(t));
    let dim = match valid {
        Some(v) => wrap_dim(dim, tensors[v].dim())? as i64,
        None => dim,
    };
    if tensors.is_empty() {
        return Err(invalid("torch.cat(): expected a non-empty list of Tensors"));
    }
    let mut all: Vec<&Tensor> = tensors.iter().collect();
    all.extend(out);
    let device = same_device(&all)?;
    check_cpu_or_meta("cat", device)?;

    let format = output_format(tensors);
    let mut dtype = result_type(&tensors.iter().collect::<Vec<_>>(), &[]).unwrap_or(DEFAULT_FLOAT);
    if let Some(o) = out {
        if !can_cast(dtype, o.dtype()) {
            return Err(invalid(format!(
                "torch.cat(): input types can't be cast to the desired output type {}",
                o.dtype().c10_name()
            )));
        }
        dtype = o.dtype();
    }
    let mut sizes = DimVec::from_slice(&[0]);
    if let Some(v) = valid {
        let first = &tensors[v];
        if dim as usize > first.dim() {
            return Err(invalid(format!(
                "torch.cat(): dimension {dim}out of bounds"
            )));
        }
        let dim = dim as usize;
        // Checked: the sizes of tensors without elements can be as large as an int64.
        let mut total = CheckedSize::new(0);
        for (i, t) in tensors.iter().enumerate() {
            if !skipped(t) {
                check_shape_except_dim(first, t, dim, i)?;
                total = total + t.sizes()[dim];
            }
        }
        sizes = DimVec::from_slice(first.sizes());
        sizes[dim] = total.get(|| format!("torch.cat(): the size of dimension {dim}"))?;
    }

    let result = match out {
        Some(o) => {
            let r = o.resize_output(&sizes)?;
            check_internal_overlap(&r)?;
            for t in tensors {
                check_no_overlap(&r, t)?;
            }
            r
        }
        None => Tensor::empty_with_format(&sizes, dtype, device, format)?,
    };
    if !result.has_data() || valid.is_none() {
        return Ok(result);
    }
    let dim = dim as usize;
    let mut offset = 0i64;
    for t in tensors.iter().filter(|t| !skipped(t)) {
        let n = t.sizes()[dim];
        if n > 0 {
            let slice = result.narrow(dim as i64, offset, n)?;
            copy_into(&slice, t)?;
        }
        offset += n;
    }
    Ok(result)
}

/// `cat(Tensor[] tensors, int dim=0) -> Tensor`
///
/// Concatenates along `dim`. The result has the promoted dtype of all inputs; 1-D empty
/// inputs (size `[0]`) are skipped whatever the other shapes (PyTorch's legacy rule).
///
/// ```
/// use switchboard_cpu::cat;
/// use switchboard_tensor::{ScalarType, Tensor};
/// let a = Tensor::from_vec(vec![1i32, 2], &[1, 2]).unwrap();
/// let b = Tensor::from_vec(vec![0.5f32, 1.5], &[1, 2]).unwrap();
/// let skip = Tensor::zeros(&[0], ScalarType::Long).unwrap();
/// let c = cat(&[a, skip, b], 0).unwrap();
/// assert_eq!(c.sizes(), &[2, 2]);
/// assert_eq!(c.to_vec::<f32>().unwrap(), [1.0, 2.0, 0.5, 1.5]);
/// ```
pub fn cat(tensors: &[Tensor], dim: i64) -> Result<Tensor> {
    cat_impl(tensors, dim, None)
}

/// `cat.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out) -> Tensor(a!)`
///
/// Writes the concatenation into `out` (any dtype the promoted one can be cast to),
/// resizing it when its shape differs (see Note [Functional resize] in the tensor crate:
/// the returned tensor is the resized `out`).
pub fn cat_out(tensors: &[Tensor], dim: i64, out: &Tensor) -> Result<Tensor> {
    cat_impl(tensors, dim, Some(out))
}

/// The inputs of `stack`, each unsqueezed at the wrapped `dim` (`get_stack_inputs`), and
/// the wrapped `dim`.
fn stack_inputs(tensors: &[Tensor], dim: i64) -> Result<(Vec<Tensor>, i64)> {
    let Some(first) = tensors.first() else {
        return Err(invalid("stack expects a non-empty TensorList"));
    };
    let dim = wrap_dim(dim, first.dim() + 1)? as i64;
    let mut inputs = Vec::with_capacity(tensors.len());
    for (i, t) in tensors.iter().enumerate() {
        if t.sizes() != first.sizes() {
            return Err(invalid(format!(
                "stack expects each tensor to be equal size, but got {} at entry 0 and {} at \
                 entry {i}",
                shape_str(first.sizes()),
                shape_str(t.sizes())
            )));
        }
        inputs.push(t.unsqueeze(dim)?);
    }
    Ok((inputs, dim))
}

/// `stack(Tensor[] tensors, int dim=0) -> Tensor`
///
/// Joins equally-shaped tensors along a new dimension `dim`.
///
/// ```
/// use switchboard_cpu::stack;
/// use switchboard_tensor::Tensor;
/// let a = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
/// let b = Tensor::from_vec(vec![3i64, 4], &[2]).unwrap();
/// let s = stack(&[a, b], 1).unwrap();
/// assert_eq!(s.sizes(), &[2, 2]);
/// assert_eq!(s.to_vec::<i64>().unwrap(), [1, 3, 2, 4]);
/// ```
pub fn stack(tensors: &[Tensor], dim: i64) -> Result<Tensor> {
    let (inputs, dim) = stack_inputs(tensors, dim)?;
    cat_impl(&inputs, dim, None)
}

/// `stack.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out) -> Tensor(a!)`
///
/// Like [`stack`], into `out` (resized when its shape differs; the returned tensor is the
/// resized `out`).
pub fn stack_out(tensors: &[Tensor], dim: i64, out: &Tensor) -> Result<Tensor> {
    let (inputs, dim) = stack_inputs(tensors, dim)?;
    let mut sizes = DimVec::from_slice(tensors[0].sizes());
    sizes.insert(dim as usize, tensors.len() as i64);
    let out = out.resize_output(&sizes)?;
    cat_impl(&inputs, dim, Some(&out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_tensor::{Device, ScalarType};

    fn ar(n: i64, sizes: &[i64]) -> Tensor {
        Tensor::arange(0, n, 1, Some(ScalarType::Float))
            .unwrap()
            .view(sizes)
            .unwrap()
    }

    #[test]
    fn cat_values_and_promotion() {
        let a = ar(6, &[2, 3]);
        let b = ar(4, &[2, 2]).t().unwrap(); // strided input
        let c = cat(&[a.clone(), b], 1).unwrap();
        assert_eq!(c.sizes(), &[2, 5]);
        assert_eq!(
            c.to_vec::<f32>().unwrap(),
            [0., 1., 2., 0., 2., 3., 4., 5., 1., 3.]
        );
        let i = Tensor::from_vec(vec![7i64, 8, 9], &[1, 3]).unwrap();
        let c = cat(&[i.clone(), i.clone()], -2).unwrap();
        assert_eq!(c.dtype(), ScalarType::Long);
        let h = Tensor::zeros(&[1, 3], ScalarType::Half).unwrap();
        assert_eq!(cat(&[i.clone(), h], 0).unwrap().dtype(), ScalarType::Half);
        let b = Tensor::ones(&[1, 3], ScalarType::Bool).unwrap();
        let c = cat(&[b, i], 0).unwrap();
        assert_eq!(c.to_vec::<i64>().unwrap(), [1, 1, 1, 7, 8, 9]);
        // Skipped [0] tensors, also when they come first and decide nothing.
        let e = Tensor::zeros(&[0], ScalarType::Double).unwrap();
        let c = cat(&[e.clone(), a.clone(), e.clone()], 1).unwrap();
        assert_eq!((c.sizes(), c.dtype()), (&[2i64, 3][..], ScalarType::Double));
        let c = cat(&[e.clone(), e.clone()], 3).unwrap();
        assert_eq!(c.sizes(), &[0]);
        // Empty tensors of other shapes are not skipped.
        let z = Tensor::zeros(&[0, 3], ScalarType::Float).unwrap();
        assert_eq!(cat(&[z, a.clone()], 0).unwrap().sizes(), &[2, 3]);
    }

    #[test]
    fn cat_channels_last_and_meta() {
        let x = Tensor::empty_with_format(
            &[1, 2, 2, 2],
            ScalarType::Float,
            Device::CPU,
            MemoryFormat::ChannelsLast,
        )
        .unwrap();
        let c = cat(&[x.clone(), x], 1).unwrap();
        assert!(c.is_contiguous_as(MemoryFormat::ChannelsLast));
        let m = Tensor::zeros_on(&[2, 3], ScalarType::Int, Device::META).unwrap();
        let c = cat(&[m.clone(), m.clone()], 0).unwrap();
        assert!(c.is_meta());
        assert_eq!((c.sizes(), c.dtype()), (&[4i64, 3][..], ScalarType::Int));
        let cpu = ar(6, &[2, 3]);
        assert!(cat(&[m, cpu], 0)
            .unwrap_err()
            .to_string()
            .contains("same device"));
    }

    #[test]
    fn cat_errors() {
        let a = ar(6, &[2, 3]);
        let b = ar(6, &[3, 2]);
        assert_eq!(
            cat(&[a.clone(), b], 1).unwrap_err().to_string(),
            "Sizes of tensors must match except in dimension 1. Expected size 2 but got size 3 \
             for tensor number 1 in the list."
        );
        assert_eq!(
            cat(&[], 0).unwrap_err().to_string(),
            "torch.cat(): expected a non-empty list of Tensors"
        );
        let s = Tensor::scalar_tensor(1.0, ScalarType::Float);
        assert_eq!(
            cat(&[a.clone(), s], 0).unwrap_err().to_string(),
            "zero-dimensional tensor (at position 1) cannot be concatenated"
        );
        assert_eq!(
            cat(&[a.clone(), ar(3, &[3])], 0).unwrap_err().to_string(),
            "Tensors must have same number of dimensions: got 2 and 1"
        );
        assert!(cat(std::slice::from_ref(&a), 2)
            .unwrap_err()
            .to_string()
            .starts_with("Dimension out of range"));
    }

    #[test]
    fn cat_and_stack_out() {
        let a = ar(2, &[2]);
        let out = Tensor::zeros(&[4], ScalarType::Double).unwrap();
        let r = cat_out(&[a.clone(), a.clone()], 0, &out).unwrap();
        assert!(r.is_same(&out));
        assert_eq!(out.to_vec::<f64>().unwrap(), [0.0, 1.0, 0.0, 1.0]);
        let small = Tensor::zeros(&[0], ScalarType::Float).unwrap();
        let r = cat_out(&[a.clone(), a.clone(), a.clone()], 0, &small).unwrap();
        assert_eq!(r.to_vec::<f32>().unwrap(), [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]);
        let i = Tensor::zeros(&[4], ScalarType::Int).unwrap();
        assert_eq!(
            cat_out(&[a.clone(), a.clone()], 0, &i)
                .unwrap_err()
                .to_string(),
            "torch.cat(): input types can't be cast to the desired output type Int"
        );
        assert!(cat_out(&[a.clone(), out.narrow(0, 0, 2).unwrap()], 0, &out)
            .unwrap_err()
            .to_string()
            .contains("single memory location"));
        let s = stack_out(&[a.clone(), a.clone()], 0, &small).unwrap();
        assert_eq!(s.sizes(), &[2, 2]);
        assert_eq!(s.to_vec::<f32>().unwrap(), [0.0, 1.0, 0.0, 1.0]);
    }

    #[test]
    fn stack_cases() {
        let a = ar(6, &[2, 3]);
        let b = ar(6, &[2, 3])
            .t()
            .unwrap()
            .contiguous()
            .unwrap()
            .view(&[2, 3])
            .unwrap();
        for d in [0i64, 1, 2, -1, -3] {
            let s = stack(&[a.clone(), b.clone()], d).unwrap();
            let w = wrap_dim(d, 3).unwrap();
            let mut want = vec![2i64, 3];
            want.insert(w, 2);
            assert_eq!(s.sizes(), &want[..]);
            assert_eq!(
                s.select(d, 1).unwrap().to_vec::<f32>().unwrap(),
                b.to_vec::<f32>().unwrap()
            );
        }
        let sc = Tensor::scalar_tensor(2, ScalarType::Long);
        assert_eq!(
            stack(&[sc.clone(), sc], 0)
                .unwrap()
                .to_vec::<i64>()
                .unwrap(),
            [2, 2]
        );
        assert_eq!(
            stack(&[ar(2, &[2]), ar(3, &[3])], 0)
                .unwrap_err()
                .to_string(),
            "stack expects each tensor to be equal size, but got [2] at entry 0 and [3] at \
             entry 1"
        );
        assert_eq!(
            stack(&[], 0).unwrap_err().to_string(),
            "stack expects a non-empty TensorList"
        );
        assert!(stack(std::slice::from_ref(&a), 3).is_err());
    }

    #[test]
    fn cat_sizes_are_checked() {
        // Tensors without elements (here on Meta) can have sizes near int64's limit.
        let big = Tensor::empty_on(&[0, 1 << 62], ScalarType::Float, Device::META).unwrap();
        let parts = [big.clone(), big.clone(), big.clone(), big];
        let e = cat(&parts, 1).unwrap_err().to_string();
        assert_eq!(e, "torch.cat(): the size of dimension 1 overflows int64");
        let two = cat(&parts[..1], 1).unwrap();
        assert_eq!(two.sizes(), &[0, 1 << 62]);
    }
}

//! Joining tensors: the CPU kernel of `cat` (with `out=`), after its meta function
//! (`structured::cat`: PyTorch's type promotion across the inputs and its legacy rule that 1-D
//! empty tensors (size `[0]`) are skipped). `stack` is composite, over `cat`.

use switchboard_ops::structured;
use switchboard_tensor::{wrap_dim, RawOps, Tensor};

use crate::copy::copy_into;
use crate::error::{check_cpu, Result};
use crate::structured_output::structured_output;

/// PyTorch's `assert_no_overlap`, which the meta functions share.
pub(crate) use crate::iter::check_no_overlap;

/// `cat` after its meta function (`structured::cat`): each input copied into its slice of
/// the output, or of `out` when given.
fn cat_impl(tensors: &[Tensor], dim: i64, out: Option<&Tensor>) -> Result<Tensor> {
    let meta = structured::cat(tensors, dim, out)?;
    check_cpu("cat", meta.device)?;
    let result = structured_output(meta, out)?;
    let Some(first) = tensors.iter().find(|t| !structured::cat_skips(t)) else {
        return Ok(result);
    };
    let dim = wrap_dim(dim, first.dim())?;
    let mut offset = 0i64;
    for t in tensors.iter().filter(|t| !structured::cat_skips(t)) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_tensor::{Device, MemoryFormat, ScalarType};

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
        let meta = structured::cat(&[m.clone(), m.clone()], 0, None).unwrap();
        assert_eq!(
            (&meta.sizes[..], meta.dtype),
            (&[4i64, 3][..], ScalarType::Int)
        );
        assert!(meta.device.is_meta());
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
    fn cat_out_cases() {
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
    }

    #[test]
    fn cat_sizes_are_checked() {
        // Tensors without elements (here on Meta) can have sizes near int64's limit.
        let big = Tensor::empty_on(&[0, 1 << 62], ScalarType::Float, Device::META).unwrap();
        let parts = [big.clone(), big.clone(), big.clone(), big];
        let e = structured::cat(&parts, 1, None).unwrap_err().to_string();
        assert_eq!(e, "torch.cat(): the size of dimension 1 overflows int64");
        let one = structured::cat(&parts[..1], 1, None).unwrap();
        assert_eq!(&one.sizes[..], &[0, 1 << 62]);
    }
}

//! `view_as_real` and `view_as_complex`: a complex tensor's parts as a real tensor with a last
//! dimension of 2, and back, over the same storage (ATen's `TensorConversions.cpp`).

use crate::dtype::ScalarType;
use crate::error::{Result, TensorError};
use crate::tensor::Tensor;
use crate::DimVec;

// Note [Complex views]
// A complex element is two reals, real part first (Note [Complex elements]), so a complex
// tensor of sizes `s` and strides `st` (in complex elements) is the real tensor of sizes
// `s + [2]` and strides `2 * st + [1]`, at twice the offset; `view_as_complex` is the inverse
// and needs a last dimension of size 2 and stride 1, even strides elsewhere and an even offset
// (PyTorch's checks and messages). Both keep the storage, version counter and payload, as
// every view does.

impl Tensor {
    /// `view_as_real`: see [`RawOps::view_as_real`](crate::RawOps::view_as_real).
    pub(crate) fn view_as_real_impl(&self) -> Result<Tensor> {
        if !self.dtype().is_complex() {
            return Err(TensorError::invalid(
                "view_as_real is only supported for complex tensors",
            ));
        }
        let mut sizes = DimVec::from_slice(self.sizes());
        sizes.push(2);
        let mut strides: DimVec = self.strides().iter().map(|s| s * 2).collect();
        strides.push(1);
        let dtype = self.dtype().to_real_value_type();
        self.dtype_view(dtype, &sizes, &strides, self.storage_offset() * 2)
    }

    /// `view_as_complex`: see [`RawOps::view_as_complex`](crate::RawOps::view_as_complex).
    pub(crate) fn view_as_complex_impl(&self) -> Result<Tensor> {
        let dtype = match self.dtype() {
            ScalarType::Float | ScalarType::Double | ScalarType::Half => {
                self.dtype().to_complex_type()?
            }
            other => {
                return Err(TensorError::invalid(format!(
                    "view_as_complex is only supported for half, float and double tensors, but \
                     got a tensor of scalar type: {}",
                    other.c10_name()
                )))
            }
        };
        let Some((&last, sizes)) = self.sizes().split_last() else {
            return Err(TensorError::invalid(
                "Input tensor must have one or more dimensions",
            ));
        };
        if last != 2 {
            return Err(TensorError::invalid(
                "Tensor must have a last dimension of size 2",
            ));
        }
        let (&last_stride, strides) = self.strides().split_last().expect("same rank as sizes");
        if last_stride != 1 {
            return Err(TensorError::invalid(
                "Tensor must have a last dimension with stride 1",
            ));
        }
        if strides.iter().any(|s| s % 2 != 0) {
            return Err(TensorError::invalid(
                "Tensor must have a stride divisible by 2 for all but last dimension",
            ));
        }
        if self.storage_offset() % 2 != 0 {
            return Err(TensorError::invalid(
                "Tensor must have a storage_offset divisible by 2",
            ));
        }
        let strides: DimVec = strides.iter().map(|s| s / 2).collect();
        self.dtype_view(dtype, sizes, &strides, self.storage_offset() / 2)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Complex32, RawOps, ScalarType, Tensor};

    fn geometry(t: &Tensor) -> (Vec<i64>, Vec<i64>, i64, ScalarType) {
        (
            t.sizes().to_vec(),
            t.strides().to_vec(),
            t.storage_offset(),
            t.dtype(),
        )
    }

    /// Geometries and messages of PyTorch 2.15.
    #[test]
    fn views_as_pytorchs() {
        let z = Tensor::zeros(&[3, 4], ScalarType::ComplexFloat).unwrap();
        let r = z.view_as_real().unwrap();
        assert_eq!(
            geometry(&r),
            (vec![3, 4, 2], vec![8, 2, 1], 0, ScalarType::Float)
        );
        let sub = z.narrow(0, 1, 2).unwrap().narrow(1, 1, 3).unwrap();
        assert_eq!(
            geometry(&sub.view_as_real().unwrap()),
            (vec![2, 3, 2], vec![8, 2, 1], 10, ScalarType::Float)
        );
        let t = z.t().unwrap().view_as_real().unwrap();
        assert_eq!(
            geometry(&t),
            (vec![4, 3, 2], vec![2, 8, 1], 0, ScalarType::Float)
        );
        assert_eq!(geometry(&r.view_as_complex().unwrap()), geometry(&z));
        r.select(2, 1)
            .unwrap()
            .select(0, 2)
            .unwrap()
            .select(0, 3)
            .unwrap();
        let zero_dim = Tensor::zeros(&[], ScalarType::ComplexDouble).unwrap();
        assert_eq!(zero_dim.view_as_real().unwrap().sizes(), &[2]);

        let err = |t: Result<Tensor, crate::TensorError>| t.unwrap_err().to_string();
        let f = |sizes: &[i64]| Tensor::zeros(sizes, ScalarType::Float).unwrap();
        assert_eq!(
            err(f(&[3]).view_as_real()),
            "view_as_real is only supported for complex tensors"
        );
        assert_eq!(
            err(f(&[3]).view_as_complex()),
            "Tensor must have a last dimension of size 2"
        );
        assert_eq!(
            err(f(&[2, 3]).narrow(1, 0, 2).unwrap().view_as_complex()),
            "Tensor must have a stride divisible by 2 for all but last dimension"
        );
        assert_eq!(
            err(f(&[3, 2]).t().unwrap().view_as_complex()),
            "Tensor must have a last dimension of size 2"
        );
        assert_eq!(
            err(f(&[3, 4])
                .as_strided(&[3, 2], &[4, 2], 0)
                .unwrap()
                .view_as_complex()),
            "Tensor must have a last dimension with stride 1"
        );
        assert_eq!(
            err(f(&[7])
                .narrow(0, 1, 6)
                .unwrap()
                .view(&[3, 2])
                .unwrap()
                .view_as_complex()),
            "Tensor must have a storage_offset divisible by 2"
        );
        assert_eq!(
            err(Tensor::zeros(&[3, 2], ScalarType::Long)
                .unwrap()
                .view_as_complex()),
            "view_as_complex is only supported for half, float and double tensors, but got a \
             tensor of scalar type: Long"
        );
        assert_eq!(
            err(f(&[]).view_as_complex()),
            "Input tensor must have one or more dimensions"
        );
        // Writes through the real view reach the complex tensor.
        let w = Tensor::zeros(&[2], ScalarType::ComplexFloat).unwrap();
        let parts = w.view_as_real().unwrap();
        parts
            .data_mut::<f32>()
            .unwrap()
            .copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(
            w.to_vec::<Complex32>().unwrap(),
            [Complex32::new(1.0, 2.0), Complex32::new(3.0, 4.0)]
        );
    }
}

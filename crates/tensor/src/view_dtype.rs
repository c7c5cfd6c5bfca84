//! `view(dtype)`: a view reading the same storage bytes as elements of another dtype, with
//! PyTorch's geometry rules (`view_dtype` in ATen's TensorConversions.cpp) and messages.

use crate::builder::TensorBuilder;
use crate::checked_size::CheckedSize;
use crate::dtype::ScalarType;
use crate::error::{Result, TensorError};
use crate::tensor::Tensor;
use crate::DimVec;

// Note [Views of another dtype]
// `x.view(dtype)` keeps the storage, the version counter, the key set and the payload, and
// only reinterprets the bytes: the same byte range, measured in elements of the new size.
// - Same element size: the same sizes, strides and offset.
// - Smaller elements (ratio r = old size / new size): the last dimension must have stride 1;
//   it grows r times, the other strides and the offset are multiplied by r.
// - Larger elements (ratio r = new size / old size): the last size and the offset must be
//   divisible by r, the last stride must be 1 and every other stride divisible by r; the
//   last size, the strides and the offset are divided by r.
// - A 0-dim tensor can only be viewed with the same element size.
// The bytes stay where they are, so the result is in bounds whenever `self` is; it is still
// built through `TensorBuilder::build`, which also checks that the storage's address is
// aligned for the new elements (only a storage adopted from a `Vec` of smaller elements can
// be misaligned).
//
// The view keeps the backend payload too: a backend whose tensors have no data here sees no
// call (the kernel is CompositeExplicitAutograd, as in PyTorch) and learns of the
// reinterpretation from the tensor's dtype, which differs from its storage's.
//
// One difference from PyTorch: `bool` and the other dtypes cannot view each other. A storage
// holds bools only if it was made for them (Note [Element bit patterns]): reading a byte other
// than 0 or 1 as a Rust `bool` is undefined behaviour, and writing such a byte through a
// `uint8` view of a bool storage would make every bool reader undefined. PyTorch allows both
// (C++ reads such bytes as "true", mostly); here they fail with a message that says why, on
// every device alike, so that Meta and lazy shapes agree with the CPU.

impl Tensor {
    /// `view.dtype`: see [`RawOps::view_dtype`](crate::RawOps::view_dtype).
    pub(crate) fn reinterpret_as(&self, dtype: ScalarType) -> Result<Tensor> {
        let from = self.dtype();
        if (from == ScalarType::Bool) != (dtype == ScalarType::Bool) {
            return Err(TensorError::invalid(format!(
                "view(dtype): cannot view {} as {}: bool tensors and tensors of other dtypes \
                 cannot share a storage here (its bytes must all be 0 or 1 to be read as bool)",
                from.c10_name(),
                dtype.c10_name()
            )));
        }
        let (old, new) = (from.element_size() as i64, dtype.element_size() as i64);
        let what = || {
            format!(
                "to view {} as {} (different element sizes)",
                from.c10_name(),
                dtype.c10_name()
            )
        };
        let mut sizes = DimVec::from_slice(self.sizes());
        let mut strides = DimVec::from_slice(self.strides());
        let mut offset = self.storage_offset();
        if old != new {
            let Some(last) = self.dim().checked_sub(1) else {
                return Err(TensorError::invalid(format!(
                    "self.dim() cannot be 0 {}",
                    what()
                )));
            };
            if old > new {
                let ratio = old / new;
                check_last_stride(&strides, last, &what)?;
                let grow = |v: i64, name: &str| {
                    (CheckedSize::new(v) * ratio).get(|| format!("view(dtype): the {name}"))
                };
                for s in &mut strides[..last] {
                    *s = grow(*s, "strides")?;
                }
                sizes[last] = grow(sizes[last], "sizes")?;
                offset = grow(offset, "storage offset")?;
            } else {
                let ratio = new / old;
                if sizes[last] % ratio != 0 {
                    return Err(TensorError::invalid(format!(
                        "self.size(-1) must be divisible by {ratio} {}, but got {}",
                        what(),
                        sizes[last]
                    )));
                }
                if offset % ratio != 0 {
                    return Err(TensorError::invalid(format!(
                        "self.storage_offset() must be divisible by {ratio} {}, but got {offset}",
                        what()
                    )));
                }
                check_last_stride(&strides, last, &what)?;
                for (d, s) in strides[..last].iter_mut().enumerate() {
                    if *s % ratio != 0 {
                        return Err(TensorError::invalid(format!(
                            "self.stride({d}) must be divisible by {ratio} {}, but got {s}",
                            what()
                        )));
                    }
                    *s /= ratio;
                }
                sizes[last] /= ratio;
                offset /= ratio;
            }
            strides[last] = 1;
        }
        self.dtype_view(dtype, &sizes, &strides, offset)
    }

    /// A view of `self`'s storage as `dtype` with this geometry (in elements of `dtype`),
    /// keeping the version counter, the key set and the payload.
    pub(crate) fn dtype_view(
        &self,
        dtype: ScalarType,
        sizes: &[i64],
        strides: &[i64],
        offset: i64,
    ) -> Result<Tensor> {
        let mut b = TensorBuilder::new(self.storage().clone(), dtype)
            .sizes(sizes)
            .strides(strides)
            .storage_offset(offset)
            .device(self.device())
            .key_set(self.key_set())
            .version_counter(self.version_counter());
        if let Some(p) = self.payload() {
            b = b.payload(p.clone());
        }
        b.build()
    }
}

fn check_last_stride(strides: &[i64], last: usize, what: &dyn Fn() -> String) -> Result<()> {
    if strides[last] != 1 {
        return Err(TensorError::invalid(format!(
            "self.stride(-1) must be 1 {}, but got {}",
            what(),
            strides[last]
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::{RawOps, ScalarType, Tensor};

    fn ints(shape: &[i64]) -> Tensor {
        let n: i64 = shape.iter().product();
        Tensor::from_vec((0..n as i32).collect::<Vec<_>>(), shape).unwrap()
    }

    fn geometry(t: &Tensor) -> (Vec<i64>, Vec<i64>, i64) {
        (t.sizes().to_vec(), t.strides().to_vec(), t.storage_offset())
    }

    /// The values and geometries of PyTorch 2.15's `torch.ops.aten.view.dtype` on the same
    /// tensors.
    #[test]
    fn geometry_and_values_match_pytorch() {
        let x = ints(&[3, 4]);
        let f = x.view_dtype(ScalarType::Float).unwrap();
        assert_eq!(geometry(&f), (vec![3, 4], vec![4, 1], 0));
        assert_eq!(f.to_vec::<f32>().unwrap()[1], f32::from_bits(1));
        let s = x.view_dtype(ScalarType::Short).unwrap();
        assert_eq!(geometry(&s), (vec![3, 8], vec![8, 1], 0));
        assert_eq!(&s.to_vec::<i16>().unwrap()[..4], [0, 0, 1, 0]);
        let l = x.view_dtype(ScalarType::Long).unwrap();
        assert_eq!(geometry(&l), (vec![3, 2], vec![2, 1], 0));
        assert_eq!(l.to_vec::<i64>().unwrap()[0], 4294967296);
        let b = x.view_dtype(ScalarType::Byte).unwrap();
        assert_eq!(geometry(&b), (vec![3, 16], vec![16, 1], 0));
        // An offset view: [1:, :2] of a (3, 4) int32 -> offset 4 -> 2 in int64.
        let v = x
            .slice(0, Some(1), None, 1)
            .unwrap()
            .narrow(1, 0, 2)
            .unwrap();
        let l = v.view_dtype(ScalarType::Long).unwrap();
        assert_eq!(geometry(&l), (vec![2, 1], vec![2, 1], 2));
        assert_eq!(l.to_vec::<i64>().unwrap(), [21474836484, 38654705672]);
        // Same element size keeps any strides.
        let t = x.t().unwrap().view_dtype(ScalarType::Float).unwrap();
        assert_eq!(geometry(&t), (vec![4, 3], vec![1, 4], 0));
        // Expanded (stride 0) leading dims.
        let e = Tensor::zeros(&[4], ScalarType::Short).unwrap();
        let e = e.expand(&[2, 4]).unwrap();
        assert_eq!(
            geometry(&e.view_dtype(ScalarType::Int).unwrap()),
            (vec![2, 2], vec![0, 1], 0)
        );
        assert_eq!(
            geometry(&e.view_dtype(ScalarType::Char).unwrap()),
            (vec![2, 8], vec![0, 1], 0)
        );
        // Empty tensors.
        let z = Tensor::zeros(&[0, 4], ScalarType::Short).unwrap();
        assert_eq!(
            geometry(&z.view_dtype(ScalarType::Long).unwrap()),
            (vec![0, 1], vec![1, 1], 0)
        );
        // 0-dim, same size.
        let s = Tensor::from_vec(vec![3i32], &[]).unwrap();
        assert_eq!(s.view_dtype(ScalarType::Int).unwrap().dim(), 0);
        // Half <-> Short <-> BFloat16 bits.
        let h = Tensor::from_vec(
            vec![crate::f16::from_f32(1.0), crate::f16::from_f32(-2.0)],
            &[2],
        )
        .unwrap();
        assert_eq!(
            h.view_dtype(ScalarType::Short)
                .unwrap()
                .to_vec::<i16>()
                .unwrap(),
            [15360, -16384]
        );
    }

    #[test]
    fn errors_match_pytorch() {
        let x = ints(&[3, 4]);
        let msg = |r: crate::Result<Tensor>| r.unwrap_err().to_string();
        assert_eq!(
            msg(x
                .slice(1, Some(1), Some(3), 1)
                .unwrap()
                .view_dtype(ScalarType::Long)),
            "self.storage_offset() must be divisible by 2 to view Int as Long (different \
             element sizes), but got 1"
        );
        assert_eq!(
            msg(x
                .slice(1, Some(1), None, 1)
                .unwrap()
                .view_dtype(ScalarType::Long)),
            "self.size(-1) must be divisible by 2 to view Int as Long (different element \
             sizes), but got 3"
        );
        assert_eq!(
            msg(x.t().unwrap().view_dtype(ScalarType::Short)),
            "self.stride(-1) must be 1 to view Int as Short (different element sizes), but \
             got 4"
        );
        assert_eq!(
            msg(Tensor::from_vec(vec![3i32], &[])
                .unwrap()
                .view_dtype(ScalarType::Short)),
            "self.dim() cannot be 0 to view Int as Short (different element sizes)"
        );
        let s = Tensor::zeros(&[6, 6], ScalarType::Short).unwrap();
        assert_eq!(
            msg(s.narrow(1, 0, 4).unwrap().view_dtype(ScalarType::Long)),
            "self.stride(0) must be divisible by 4 to view Short as Long (different element \
             sizes), but got 6"
        );
        let b = Tensor::from_vec(vec![true, false], &[2]).unwrap();
        assert!(msg(b.view_dtype(ScalarType::Byte)).contains("cannot view Bool as Byte"));
        let u = Tensor::from_vec(vec![1u8, 2], &[2]).unwrap();
        assert!(msg(u.view_dtype(ScalarType::Bool)).contains("cannot view Byte as Bool"));
        assert!(b.view_dtype(ScalarType::Bool).is_ok());
    }

    #[test]
    fn shares_storage_and_version() {
        let a = Tensor::zeros(&[4], ScalarType::Float).unwrap();
        let b = a.view_dtype(ScalarType::Int).unwrap();
        assert!(b.is_alias_of(&a));
        b.data_mut::<i32>().unwrap()[0] = 1;
        b.bump_version();
        assert_eq!(a.to_vec::<f32>().unwrap()[0], f32::from_bits(1));
        assert_eq!(a.version(), 1);
    }
}

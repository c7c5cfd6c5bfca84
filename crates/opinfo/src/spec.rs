//! How a sample's tensor is made: its shape, dtype, values and memory layout, made again for
//! each run on the device (and in the floating dtype) the run asks for.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{Complex64, Device, ScalarType, Tensor};

/// The values a tensor holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// Pseudo-random values in `[lo, hi)` (integers in that range for integral dtypes, `v != 0`
    /// for bool), the same ones on every run.
    Uniform(f64, f64),
    /// These values, in row-major order.
    Literal(Vec<f64>),
}

/// The strides a tensor gets: contiguous, or a non-contiguous view of a larger base.
#[derive(Clone, Debug, PartialEq)]
pub enum Layout {
    /// Row-major.
    Contiguous,
    /// Dimensions in reverse order: a transposed (column-major) view of a contiguous base.
    Transposed,
    /// Every other element of the last dimension of a base twice as wide.
    Strided,
    /// Broadcast (stride 0) from a base of this shape (`expand`).
    Expanded(Vec<i64>),
}

/// One tensor argument of a sample. Built with [`t`] and the methods below:
/// `t(&[2, 3]).transposed()`, `t(&[]).dtype(ScalarType::Long)`, `t(&[4]).pos()`.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSpec {
    /// Its sizes.
    pub shape: Vec<i64>,
    /// Its dtype.
    pub dtype: ScalarType,
    /// Its values.
    pub values: Values,
    /// Its strides.
    pub layout: Layout,
    /// A NaN at the first element (floating dtypes).
    pub nan: bool,
    /// Whether gradcheck may differentiate with respect to it (false for arguments such as
    /// clamp bounds that the sample keeps constant).
    pub grad: bool,
    /// The seed of its pseudo-random values.
    pub seed: u64,
}

/// A float32 tensor of `shape` with values in `[-1, 1)`.
pub fn t(shape: &[i64]) -> TensorSpec {
    TensorSpec {
        shape: shape.to_vec(),
        dtype: ScalarType::Float,
        values: Values::Uniform(-1.0, 1.0),
        layout: Layout::Contiguous,
        nan: false,
        grad: true,
        seed: 0,
    }
}

/// An int64 tensor of `shape` with values in `[0, high)` (indices, class targets).
pub fn index(shape: &[i64], high: i64) -> TensorSpec {
    t(shape).dtype(ScalarType::Long).range(0.0, high as f64)
}

/// An int64 tensor holding `values` (shape `[values.len()]` unless reshaped with `shape`).
pub fn longs(values: &[i64]) -> TensorSpec {
    t(&[values.len() as i64])
        .dtype(ScalarType::Long)
        .literal(&values.iter().map(|&v| v as f64).collect::<Vec<_>>())
}

/// A bool tensor of `shape` (pseudo-random, about half true).
pub fn mask(shape: &[i64]) -> TensorSpec {
    t(shape).dtype(ScalarType::Bool).range(0.0, 2.0)
}

impl TensorSpec {
    /// Another dtype.
    pub fn dtype(mut self, dtype: ScalarType) -> Self {
        self.dtype = dtype;
        self
    }

    /// float64.
    pub fn f64(self) -> Self {
        self.dtype(ScalarType::Double)
    }

    /// int64 values in `[-4, 5)`.
    pub fn long(self) -> Self {
        self.dtype(ScalarType::Long).range(-4.0, 5.0)
    }

    /// Values in `[lo, hi)`.
    pub fn range(mut self, lo: f64, hi: f64) -> Self {
        self.values = Values::Uniform(lo, hi);
        self
    }

    /// Values in `[0.5, 2)`: inside the domain of `log`, `sqrt`, `rsqrt`, a divisor's.
    pub fn pos(self) -> Self {
        self.range(0.5, 2.0)
    }

    /// These values.
    pub fn literal(mut self, values: &[f64]) -> Self {
        self.values = Values::Literal(values.to_vec());
        self
    }

    /// Another shape (for [`longs`] and literal values).
    pub fn shape(mut self, shape: &[i64]) -> Self {
        self.shape = shape.to_vec();
        self
    }

    /// A transposed (column-major) view.
    pub fn transposed(mut self) -> Self {
        self.layout = Layout::Transposed;
        self
    }

    /// A view of every other element of the last dimension.
    pub fn strided(mut self) -> Self {
        self.layout = Layout::Strided;
        self
    }

    /// Broadcast from a base of shape `from` (stride 0 where `from` has size 1).
    pub fn expanded(mut self, from: &[i64]) -> Self {
        self.layout = Layout::Expanded(from.to_vec());
        self
    }

    /// A NaN at the first element.
    pub fn nan(mut self) -> Self {
        self.nan = true;
        self
    }

    /// Kept constant by gradcheck.
    pub fn no_grad(mut self) -> Self {
        self.grad = false;
        self
    }

    /// Other pseudo-random values.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The shape of the base the layout views.
    pub fn base_shape(&self) -> Vec<i64> {
        match &self.layout {
            Layout::Contiguous => self.shape.clone(),
            Layout::Transposed => self.shape.iter().rev().copied().collect(),
            Layout::Strided => {
                let mut s = self.shape.clone();
                if let Some(last) = s.last_mut() {
                    *last *= 2;
                }
                s
            }
            Layout::Expanded(from) => from.clone(),
        }
    }

    /// The base's values (row-major), as f64.
    fn base_values(&self, dtype: ScalarType, salt: u64) -> Vec<f64> {
        let n: i64 = self.base_shape().iter().product();
        let n = usize::try_from(n).unwrap_or(0);
        let mut v = match &self.values {
            Values::Literal(v) => v.clone(),
            Values::Uniform(lo, hi) => {
                let mut s = (self.seed ^ salt)
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (0..n)
                    .map(|_| {
                        s = s
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let u = (s >> 11) as f64 / (1u64 << 53) as f64;
                        let x = lo + (hi - lo) * u;
                        if dtype.is_floating_point() {
                            x
                        } else {
                            x.floor()
                        }
                    })
                    .collect()
            }
        };
        if self.nan && dtype.is_floating_point() {
            if let Some(first) = v.first_mut() {
                *first = f64::NAN;
            }
        }
        v
    }

    /// Makes the base tensor (contiguous, holding the values) on `device`, with floating
    /// dtypes replaced by `float_dtype` when given. `salt` varies the values between the
    /// tensors of one sample. On a device other than the CPU and Meta (`lazy`, an out-of-tree
    /// backend) the values are made on the CPU and copied there (`to(device)`), so every
    /// device holds the CPU's values.
    pub fn base(
        &self,
        device: Device,
        float_dtype: Option<ScalarType>,
        salt: u64,
    ) -> Result<Tensor> {
        let dtype = match float_dtype {
            Some(f) if self.dtype.is_floating_point() => f,
            // A complex dtype follows as the complex type of the run's floating dtype.
            Some(f) if self.dtype.is_complex() => f.to_complex_type().unwrap_or(self.dtype),
            _ => self.dtype,
        };
        let shape = self.base_shape();
        if device.is_meta() {
            return Ok(Tensor::empty_on(&shape, dtype, device)?);
        }
        let values = if dtype.is_complex() {
            // Complex values: the real parts as a float64 tensor's, the imaginary parts from
            // another salt.
            let re = self.base_values(ScalarType::Double, salt);
            let im = self.base_values(ScalarType::Double, salt ^ 0x9e37_79b9_7f4a_7c15);
            let z = re
                .into_iter()
                .zip(im)
                .map(|(re, im)| Complex64::new(re, im))
                .collect();
            Tensor::from_vec::<Complex64>(z, &shape)?
        } else {
            Tensor::from_vec(self.base_values(dtype, salt), &shape)?
        };
        let cpu = if dtype == values.dtype() {
            values
        } else {
            ops::_to_copy_with(&values, ops::ToCopyOptions::default().dtype(dtype))?
        };
        if device.is_cpu() {
            return Ok(cpu);
        }
        ops::_to_copy_with(&cpu, ops::ToCopyOptions::default().device(device))
    }

    /// Applies the layout's view to a base made by [`TensorSpec::base`].
    pub fn view(&self, base: &Tensor) -> Result<Tensor> {
        match &self.layout {
            Layout::Contiguous => Ok(base.clone()),
            Layout::Transposed => {
                let dims: Vec<i64> = (0..self.shape.len() as i64).rev().collect();
                ops::permute(base, &dims)
            }
            Layout::Strided => ops::slice_with(base, ops::SliceOptions::default().dim(-1).step(2)),
            Layout::Expanded(_) => ops::expand(base, &self.shape),
        }
    }

    /// The tensor: base and view.
    pub fn make(
        &self,
        device: Device,
        float_dtype: Option<ScalarType>,
        salt: u64,
    ) -> Result<Tensor> {
        self.view(&self.base(device, float_dtype, salt)?)
    }
}

//! [`Buffer`]: a tensor's elements in host memory, typed by dtype: what a collective sends and
//! receives.

use half::{bf16, f16};
use switchboard_tensor::{ScalarType, Tensor};

use crate::error::DistError;

// Note [Collective buffers]
// A collective runs on its backend's thread (Note [One communication thread]), while the
// tensors stay with the caller: the caller copies the elements out into a `Buffer` when it
// launches the collective and the result back in when it waits. The copies are what lets
// backward go on computing while a bucket is on the wire; they cost a memory pass each, far
// less than the communication itself.

macro_rules! buffers {
    ($($dt:ident => $t:ty),* $(,)?) => {
        /// A contiguous run of one dtype's elements.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Buffer {
            $(
                #[doc = concat!("`", stringify!($dt), "` elements.")]
                $dt(Vec<$t>),
            )*
        }

        impl Buffer {
            /// The elements of `t` in row-major order (any layout, any device whose data the
            /// host can read).
            pub fn from_tensor(t: &Tensor) -> Result<Buffer, DistError> {
                let host = host_readable(t)?;
                Ok(match t.dtype() {
                    $(ScalarType::$dt => Buffer::$dt(host.to_vec::<$t>()?),)*
                    dt @ (ScalarType::ComplexFloat | ScalarType::ComplexDouble) => {
                        return Err(unsupported_complex(dt))
                    }
                })
            }

            /// `n` zeros of `dtype`.
            pub fn zeros(dtype: ScalarType, n: usize) -> Result<Buffer, DistError> {
                Ok(match dtype {
                    $(ScalarType::$dt => Buffer::$dt(vec![<$t as switchboard_tensor::Element>::ZERO; n]),)*
                    dt @ (ScalarType::ComplexFloat | ScalarType::ComplexDouble) => {
                        return Err(unsupported_complex(dt))
                    }
                })
            }

            /// The dtype of the elements.
            pub fn dtype(&self) -> ScalarType {
                match self {
                    $(Buffer::$dt(_) => ScalarType::$dt,)*
                }
            }

            /// The number of elements.
            pub fn len(&self) -> usize {
                match self {
                    $(Buffer::$dt(v) => v.len(),)*
                }
            }

            /// A CPU tensor of `sizes` holding the elements (taken over, no copy).
            pub fn into_tensor(self, sizes: &[i64]) -> Result<Tensor, DistError> {
                Ok(match self {
                    $(Buffer::$dt(v) => Tensor::from_vec(v, sizes)?,)*
                })
            }

            /// Writes the elements into `dst` directly when it is a contiguous CPU tensor of the
            /// same dtype and length (no operator call); `Ok(false)` when it is not.
            pub(crate) fn write_direct(&self, dst: &Tensor) -> Result<bool, DistError> {
                if !dst.is_cpu() || !dst.is_contiguous() || !dst.has_data()
                    || dst.dtype() != self.dtype() || dst.numel() as usize != self.len()
                {
                    return Ok(false);
                }
                match self {
                    $(Buffer::$dt(v) => dst.data_mut::<$t>()?.copy_from_slice(v),)*
                }
                dst.bump_version();
                Ok(true)
            }

            /// The elements from `start`, `len` of them.
            pub fn slice(&self, start: usize, len: usize) -> Buffer {
                match self {
                    $(Buffer::$dt(v) => Buffer::$dt(v[start..start + len].to_vec()),)*
                }
            }

            /// The buffers one after the other (all of `parts`' dtype; empty parts are none).
            pub fn concat(dtype: ScalarType, parts: &[Buffer]) -> Result<Buffer, DistError> {
                match dtype {
                    $(ScalarType::$dt => {
                        let mut out = Vec::new();
                        for p in parts {
                            match p {
                                Buffer::$dt(v) => out.extend_from_slice(v),
                                other => return Err(DistError::Invalid(format!(
                                    "cannot concatenate a {} buffer with {} ones",
                                    other.dtype(), dtype
                                ))),
                            }
                        }
                        Ok(Buffer::$dt(out))
                    })*
                    dt @ (ScalarType::ComplexFloat | ScalarType::ComplexDouble) => {
                        Err(unsupported_complex(dt))
                    }
                }
            }
        }
    };
}

buffers! {
    Byte => u8,
    Char => i8,
    Short => i16,
    Int => i32,
    Long => i64,
    Half => f16,
    Float => f32,
    Double => f64,
    Bool => bool,
    BFloat16 => bf16,
}

/// Collectives carry the real dtypes only: PyTorch's send complex tensors as their real views,
/// which Switchboard's backends do not do yet.
fn unsupported_complex(dtype: ScalarType) -> DistError {
    DistError::Invalid(format!(
        "collectives do not support complex tensors here (got {}); send \
         torch.view_as_real(tensor) instead",
        dtype.c10_name()
    ))
}

impl Buffer {
    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `t` itself when the host can read its data, else its host copy (a backend that keeps its
/// data elsewhere registers one, see `Tensor::host_copy`).
fn host_readable(t: &Tensor) -> Result<Tensor, DistError> {
    if t.is_cpu() {
        return Ok(t.clone());
    }
    match t.host_copy()? {
        Some(host) => Ok(host),
        None => Err(DistError::Invalid(format!(
            "collectives take tensors whose data the host can read, but got one on {}",
            t.device()
        ))),
    }
}

// Note [Average as sum then divide]
// MPI has no mean. `ReduceOp::Avg` is a sum followed by a division by the group size on each
// rank, in the dtype of the tensor: exact for the power-of-two sizes a float mean usually
// has, and truncating toward zero on integers (as NCCL's integer average does).

impl Buffer {
    /// Divides every element by `n` (the group size), see Note [Average as sum then divide].
    /// `bool` has no mean: the group refuses `Avg` on it before.
    pub(crate) fn divide(&mut self, n: usize) {
        macro_rules! int {
            ($v:expr, $t:ty) => {{
                let d = n as $t;
                $v.iter_mut().for_each(|x| *x /= d)
            }};
        }
        match self {
            Buffer::Byte(v) => int!(v, u8),
            Buffer::Char(v) => int!(v, i8),
            Buffer::Short(v) => int!(v, i16),
            Buffer::Int(v) => int!(v, i32),
            Buffer::Long(v) => int!(v, i64),
            Buffer::Float(v) => v.iter_mut().for_each(|x| *x /= n as f32),
            Buffer::Double(v) => v.iter_mut().for_each(|x| *x /= n as f64),
            Buffer::Half(v) => v
                .iter_mut()
                .for_each(|x| *x = f16::from_f32(x.to_f32() / n as f32)),
            Buffer::BFloat16(v) => v
                .iter_mut()
                .for_each(|x| *x = bf16::from_f32(x.to_f32() / n as f32)),
            Buffer::Bool(_) => {}
        }
    }
}

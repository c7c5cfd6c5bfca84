//! The geometry of an elementwise operator's output, as `TensorIteratorBase::build` computes
//! it without running a loop: the common device, the broadcast shape (and whether a given
//! output is resized or must already have it), the common dtype by type promotion, the
//! output's dtype, and its strides, which follow the inputs' memory layout
//! (`reorder_dimensions`: a channels-last or transposed input gives a like output).

use smallvec::SmallVec;
use switchboard_tensor::{
    infer_size, Device, DimVec, ResultTypeState, ScalarType, Tensor, TensorError, DEFAULT_DTYPE,
};

use super::{check_internal_overlap, check_no_partial_overlap, MetaOutput, Result};

/// An elementwise operator's description (PyTorch's `TensorIteratorConfig` for the meta
/// function): its output when given, its inputs, and its dtype rules.
#[derive(Clone, Copy)]
#[must_use]
pub struct Elementwise<'a, const N: usize> {
    out: Option<&'a Tensor>,
    inputs: [&'a Tensor; N],
    int_to_float: bool,
    out_dtype: Option<ScalarType>,
    compute_in: Option<ScalarType>,
    all_same_dtype: bool,
}

impl<'a, const N: usize> Elementwise<'a, N> {
    /// Inputs `inputs`, all taking part in type promotion; `out` is the operator's output when
    /// one is given (`self` in place, `out` for `out=`).
    #[inline]
    pub fn new(out: Option<&'a Tensor>, inputs: [&'a Tensor; N]) -> Self {
        Elementwise {
            out,
            inputs,
            int_to_float: false,
            out_dtype: None,
            compute_in: None,
            all_same_dtype: false,
        }
    }

    /// Integer and bool inputs compute in the default float dtype
    /// (`promote_integer_inputs_to_float`: `div`, `exp`, `sigmoid`, ...).
    pub fn int_to_float(mut self) -> Self {
        self.int_to_float = true;
        self
    }

    /// A fresh output has `dtype` instead of the common dtype, and a given output any dtype
    /// (`Bool` for comparisons).
    pub fn out_dtype(mut self, dtype: ScalarType) -> Self {
        self.out_dtype = Some(dtype);
        self
    }

    /// The inputs compute in `dtype`, as if converted to it first (`clamp`'s
    /// `self.to(result_type)` after promoting by hand): the output's layout follows them.
    pub fn compute_in(mut self, dtype: ScalarType) -> Self {
        self.compute_in = Some(dtype);
        self
    }

    /// A given output must have the common dtype, not merely one it casts to safely (the
    /// unary iterator's `check_all_same_dtype`: "Found dtype Double but expected Float").
    pub fn all_same_dtype(mut self) -> Self {
        self.all_same_dtype = true;
        self
    }

    /// The dtype the inputs compute in.
    #[inline]
    pub fn common_dtype(&self) -> ScalarType {
        if let Some(dtype) = self.compute_in {
            return dtype;
        }
        let mut state = ResultTypeState::default();
        for t in self.inputs {
            state.update_tensor(t);
        }
        let common = state.result().unwrap_or(DEFAULT_DTYPE);
        if self.int_to_float && !common.is_floating_point() {
            DEFAULT_DTYPE
        } else {
            common
        }
    }

    /// Checks the operands and computes the output's geometry. The common case is inlined
    /// into each meta function, so its result is built where the caller keeps it rather than
    /// moved out of a call; the general path is a call.
    #[inline(always)]
    pub fn compute(&self) -> Result<MetaOutput> {
        match self.same_dense_inputs() {
            Some(meta) => Ok(meta),
            None => self.compute_general(),
        }
    }

    /// [`Elementwise::compute`] when the inputs differ or an output is given.
    #[inline(never)]
    fn compute_general(&self) -> Result<MetaOutput> {
        let device = common_device_of(self.out.into_iter().chain(self.inputs))?;
        let shape = self.shape()?;
        let common = self.common_dtype();
        let out = match self.out {
            None => None,
            Some(o) => {
                if o.sizes() != &shape[..] && self.inputs.iter().any(|t| t.is_alias_of(o)) {
                    // PyTorch's `mark_resize_outputs`: an output that is also read is not
                    // resized.
                    return Err(TensorError::invalid(format!(
                        "output with shape {:?} doesn't match the broadcast shape {:?}",
                        o.sizes(),
                        &shape[..]
                    )));
                }
                if self.all_same_dtype && o.dtype() != common {
                    return Err(TensorError::invalid(format!(
                        "Found dtype {} but expected {}",
                        o.dtype().c10_name(),
                        common.c10_name()
                    )));
                }
                if self.out_dtype.is_none() && !switchboard_tensor::can_cast(common, o.dtype()) {
                    return Err(TensorError::invalid(format!(
                        "result type {} can't be cast to the desired output type {}",
                        common.c10_name(),
                        o.dtype().c10_name()
                    )));
                }
                check_internal_overlap(o)?;
                for t in self.inputs {
                    check_no_partial_overlap(o, t)?;
                }
                Some(o)
            }
        };
        let dtype = match (out, self.out_dtype) {
            (Some(o), _) => o.dtype(),
            (None, Some(d)) => d,
            (None, None) => common,
        };
        let strides = match out {
            Some(o) if o.sizes() == &shape[..] => DimVec::from_slice(o.strides()),
            _ => self.output_strides(&shape),
        };
        Ok(MetaOutput {
            sizes: shape,
            strides,
            dtype,
            device,
        })
    }

    /// The common case without a given output: every input of one dtype, device and shape,
    /// contiguous, no wrapped number. The general path gives the same (no broadcasting, no
    /// promotion, contiguous strides), only dearer.
    #[inline(always)]
    fn same_dense_inputs(&self) -> Option<MetaOutput> {
        let (first, rest) = self.inputs.split_first()?;
        let dtype = first.dtype();
        let dense = |t: &Tensor| t.is_contiguous() && !t.is_wrapped_number();
        let like_first = |t: &&Tensor| {
            t.dtype() == dtype
                && t.device() == first.device()
                && switchboard_tensor::same_dims(t.sizes(), first.sizes())
                && dense(t)
        };
        if self.out.is_some()
            || (self.int_to_float && !dtype.is_floating_point())
            || !dense(first)
            || !rest.iter().all(like_first)
        {
            return None;
        }
        Some(MetaOutput {
            sizes: switchboard_tensor::dim_vec(first.sizes()),
            strides: switchboard_tensor::contiguous_strides(first.sizes()),
            dtype: self.out_dtype.or(self.compute_in).unwrap_or(dtype),
            device: first.device(),
        })
    }

    /// The broadcast shape of the inputs.
    #[inline]
    fn shape(&self) -> Result<DimVec> {
        let Some((first, rest)) = self.inputs.split_first() else {
            return Ok(self
                .out
                .map(|o| DimVec::from_slice(o.sizes()))
                .unwrap_or_default());
        };
        let mut shape = DimVec::from_slice(first.sizes());
        for t in rest {
            if t.sizes() != &shape[..] {
                shape = infer_size(&shape, t.sizes())?;
            }
        }
        Ok(shape)
    }

    /// The strides of a fresh output: contiguous when every input is, else laid out in the
    /// inputs' dimension order.
    #[inline]
    fn output_strides(&self, shape: &[i64]) -> DimVec {
        if self
            .inputs
            .iter()
            .all(|t| t.sizes() == shape && t.is_contiguous())
        {
            return switchboard_tensor::contiguous_strides(shape);
        }
        let strides: [DimVec; N] =
            std::array::from_fn(|i| broadcast_strides(self.inputs[i], shape));
        let refs: [&[i64]; N] = std::array::from_fn(|i| &strides[i][..]);
        strides_for_perm(shape, &reorder_dims(shape, &refs))
    }
}

/// The device of an operator's tensors, with PyTorch's rule that zero-dim CPU tensors may
/// mix with tensors on any device (`TensorIteratorBase::compute_types`). Fails with
/// "Expected all tensors to be on the same device, but found at least two devices, cpu and
/// meta!" otherwise. With no tensors, or only zero-dim CPU tensors, the device is the CPU.
pub fn common_device(tensors: &[&Tensor]) -> Result<Device> {
    common_device_of(tensors.iter().copied())
}

/// Like [`common_device`] but without the zero-dim CPU exception (for ops such as `mm`,
/// `index_select` or `cat` whose every tensor must be on the same device).
pub fn same_device(tensors: &[&Tensor]) -> Result<Device> {
    devices_agree(tensors.iter().copied(), false)
}

/// [`common_device`] of an iterator of tensors.
#[inline]
fn common_device_of<'t>(tensors: impl IntoIterator<Item = &'t Tensor>) -> Result<Device> {
    devices_agree(tensors, true)
}

/// The one device of `tensors` (zero-dim CPU tensors skipped when `cpu_scalars_mix`).
#[inline]
fn devices_agree<'t>(
    tensors: impl IntoIterator<Item = &'t Tensor>,
    cpu_scalars_mix: bool,
) -> Result<Device> {
    let mut common: Option<Device> = None;
    for t in tensors {
        if cpu_scalars_mix && t.is_cpu() && t.dim() == 0 {
            continue;
        }
        match common {
            None => common = Some(t.device()),
            Some(d) if d != t.device() => {
                return Err(TensorError::DeviceMismatch {
                    first: d,
                    second: t.device(),
                })
            }
            Some(_) => {}
        }
    }
    Ok(common.unwrap_or(Device::CPU))
}

/// `t`'s strides aligned to `shape` (right-aligned; 0 for broadcast and size-1 dimensions).
pub fn broadcast_strides(t: &Tensor, shape: &[i64]) -> DimVec {
    let nd = shape.len();
    let td = t.dim();
    let mut st = DimVec::from_elem(0, nd);
    for i in 0..td {
        let d = nd - td + i;
        if t.sizes()[i] != 1 {
            st[d] = t.strides()[i];
        }
    }
    st
}

/// PyTorch's `reorder_dimensions`: the dimensions from fastest to slowest by the operands'
/// strides (operand order breaks ties; broadcast dimensions do not vote).
pub fn reorder_dims(shape: &[i64], strides: &[&[i64]]) -> SmallVec<[usize; 6]> {
    let nd = shape.len();
    let mut perm: SmallVec<[usize; 6]> = (0..nd).rev().collect();
    let should_swap = |d0: usize, d1: usize| -> i32 {
        for st in strides {
            let (s0, s1) = (st[d0], st[d1]);
            if s0 == 0 || s1 == 0 {
                continue;
            }
            if s0 < s1 {
                return -1;
            }
            if s0 > s1 {
                return 1;
            }
            if shape[d0] > shape[d1] {
                return 1;
            }
        }
        0
    };
    for i in 1..nd {
        let mut d1 = i;
        for d0 in (0..i).rev() {
            let c = should_swap(perm[d0], perm[d1]);
            if c > 0 {
                perm.swap(d0, d1);
                d1 = d0;
            } else if c < 0 {
                break;
            }
        }
    }
    perm
}

/// Dense strides laying the dimensions out in `perm` order (fastest first).
pub fn strides_for_perm(shape: &[i64], perm: &[usize]) -> DimVec {
    let mut st = DimVec::from_elem(0, shape.len());
    let mut acc = 1i64;
    for &d in perm {
        st[d] = acc;
        acc = acc.saturating_mul(shape[d].max(1));
    }
    st
}

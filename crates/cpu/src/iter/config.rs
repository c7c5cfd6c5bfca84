//! [`IterConfig`]: the description of an elementwise op, and its checks and preparation
//! (devices, broadcasting, type promotion, casts, output allocation, overlap, loop geometry)
//! into a [`TensorIter`].

use std::cell::Cell;

use smallvec::SmallVec;
use switchboard_ops::structured::{resize_out, MetaOutput};
use switchboard_tensor::{DimVec, ScalarType, Tensor, TensorError};

use super::dims::{broadcast_strides, coalesce, reorder_dims, strides_for_perm};
use super::overlap::{check_internal_overlap, check_no_partial_overlap};
use super::TensorIter;
use crate::copy::cast;
use crate::error::{check_cpu_or_meta, common_device, shape_str, Result};
use crate::promote::{can_cast, infer_size, ResultTypeState, DEFAULT_FLOAT};

/// How an input takes part in type promotion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InputKind {
    /// Counts for the common dtype and is cast to it.
    Promoted,
    /// Kept as it is (a `where` condition, a mask, an index).
    Exact,
}

/// The description of an elementwise op, turned into a [`TensorIter`] by
/// [`build`](IterConfig::build).
#[must_use]
pub struct IterConfig<'a> {
    op: &'static str,
    out: Option<&'a Tensor>,
    inputs: SmallVec<[(&'a Tensor, InputKind); 3]>,
    int_to_float: bool,
    compute_dtype: Option<ScalarType>,
    out_dtype: Option<ScalarType>,
    check_out_cast: bool,
    all_same_dtype: bool,
    out_in_shape: bool,
}

impl<'a> IterConfig<'a> {
    /// An op named `op` (the name appears in error messages).
    pub fn new(op: &'static str) -> IterConfig<'a> {
        IterConfig {
            op,
            out: None,
            inputs: SmallVec::new(),
            int_to_float: false,
            compute_dtype: None,
            out_dtype: None,
            check_out_cast: true,
            all_same_dtype: false,
            out_in_shape: false,
        }
    }

    /// Writes into `out` (an `out=` tensor, or `self` of an in-place op) instead of allocating
    /// the output. An `out=` tensor of another shape is resized to the broadcast shape
    /// (`resize_output`, Note [Functional resize]: [`TensorIter::finish`] returns the resized
    /// tensor); one that is also an input (in place) must have it, as in PyTorch.
    pub fn out(mut self, out: &'a Tensor) -> Self {
        self.out = Some(out);
        self
    }

    /// Writes into `out` when given.
    pub fn maybe_out(mut self, out: Option<&'a Tensor>) -> Self {
        self.out = out;
        self
    }

    /// An input that takes part in type promotion and is cast to the common dtype.
    pub fn input(mut self, t: &'a Tensor) -> Self {
        self.inputs.push((t, InputKind::Promoted));
        self
    }

    /// An input read with its own dtype, outside type promotion (a condition or a mask).
    pub fn input_exact(mut self, t: &'a Tensor) -> Self {
        self.inputs.push((t, InputKind::Exact));
        self
    }

    /// Integer and bool inputs compute in the default float dtype (`true_divide`, `exp`, ...:
    /// PyTorch's `promote_integer_inputs_to_float`).
    pub fn int_to_float(mut self, yes: bool) -> Self {
        self.int_to_float = yes;
        self
    }

    /// Computes in `dtype` instead of the promoted dtype.
    pub fn compute_dtype(mut self, dtype: ScalarType) -> Self {
        self.compute_dtype = Some(dtype);
        self
    }

    /// The output dtype when it is not the common dtype (`Bool` for comparisons).
    pub fn out_dtype(mut self, dtype: ScalarType) -> Self {
        self.out_dtype = Some(dtype);
        self
    }

    /// Whether a given `out` must be a safe cast of the common dtype (default: yes).
    pub fn check_out_cast(mut self, yes: bool) -> Self {
        self.check_out_cast = yes;
        self
    }

    /// A given `out` must have the common dtype, not merely one it casts to safely (the plain
    /// unary ops, `build_borrowing_unary_op`: PyTorch's `check_all_same_dtype`).
    pub fn all_same_dtype(mut self, yes: bool) -> Self {
        self.all_same_dtype = yes;
        self
    }

    /// The given `out` takes part in broadcasting (inputs broadcast to its shape, as for
    /// `copy_` and `fill_`: PyTorch's `resize_outputs(false)`).
    pub fn broadcast_to_out(mut self) -> Self {
        self.out_in_shape = true;
        self
    }

    /// Checks everything and prepares the loop.
    #[inline]
    pub fn build(self) -> Result<TensorIter> {
        if let Some(iter) = self.try_fast_path()? {
            return Ok(iter);
        }
        self.build_general()
    }

    /// Same dtype, same shape, all contiguous CPU tensors (the given `out` too): no
    /// promotion, no casts, no permutation, one dense row. Gives exactly what
    /// [`build_general`](Self::build_general) would (see the tests), only cheaper; the fresh
    /// output is not zeroed (Note [Uninitialised outputs]).
    #[inline(always)]
    pub(super) fn try_fast_path(&self) -> Result<Option<TensorIter>> {
        let Some(&(first, _)) = self.inputs.first() else {
            return Ok(None);
        };
        let dtype = first.dtype();
        let sizes = first.sizes();
        let fits = |t: &Tensor| {
            t.dtype() == dtype
                && t.is_cpu()
                && t.is_contiguous()
                && !t.is_wrapped_number()
                && same_sizes(t.sizes(), sizes)
        };
        // With no promoted input the common dtype is not the inputs' (see build_general).
        if self.compute_dtype.is_some()
            || (self.int_to_float && !dtype.is_floating_point())
            || !self.inputs.iter().any(|(_, k)| *k == InputKind::Promoted)
            || !self.inputs.iter().all(|(t, _)| fits(t))
        {
            return Ok(None);
        }
        let out_dtype = self.out_dtype.unwrap_or(dtype);
        let (out, uninit) = match self.out {
            // SAFETY: the loops write every element before `finish` hands the output out, and
            // `finish` zero-fills it if none ran (Note [Uninitialised outputs]).
            None => (unsafe { Tensor::empty_uninit(sizes, out_dtype)? }, true),
            Some(o) => {
                if o.dtype() != out_dtype
                    || !o.is_cpu()
                    || !o.is_contiguous()
                    || !same_sizes(o.sizes(), sizes)
                {
                    return Ok(None);
                }
                // A contiguous tensor can still overlap itself when it has no elements.
                check_internal_overlap(o)?;
                for &(t, _) in &self.inputs {
                    check_no_partial_overlap(o, t)?;
                }
                (o.clone(), false)
            }
        };
        let mut inputs = SmallVec::new();
        for &(t, _) in &self.inputs {
            inputs.push(t.clone());
        }
        Ok(Some(TensorIter {
            common_dtype: dtype,
            out,
            temp_out: None,
            inputs,
            numel: first.numel() as usize,
            geom: None,
            compute: true,
            private_out: uninit,
            looping: Cell::new(false),
            uninit: Cell::new(uninit),
        }))
    }

    /// The general path: every case [`build`](Self::build) handles.
    #[inline(never)]
    pub(super) fn build_general(self) -> Result<TensorIter> {
        let op = self.op;
        // Devices: zero-dim CPU tensors may mix with any device.
        let mut all: SmallVec<[&Tensor; 4]> = SmallVec::new();
        all.extend(self.out);
        all.extend(self.inputs.iter().map(|(t, _)| *t));
        let device = common_device(&all)?;
        check_cpu_or_meta(op, device)?;
        let compute = device.is_cpu();

        // Shape.
        let mut shape = DimVec::new();
        if let (Some(o), true) = (self.out, self.out_in_shape) {
            shape = DimVec::from_slice(o.sizes());
        }
        for &(t, _) in &self.inputs {
            shape = infer_size(&shape, t.sizes())?;
        }
        let mut resized = None;
        if let Some(o) = self.out {
            if o.sizes() != &shape[..] {
                // PyTorch's mark_resize_outputs: an out= tensor is resized, one that is also
                // read (in place, or broadcast into as copy_ does) is not.
                let read_write =
                    self.out_in_shape || self.inputs.iter().any(|(t, _)| t.is_alias_of(o));
                if self.inputs.is_empty() {
                    shape = DimVec::from_slice(o.sizes());
                } else if read_write {
                    return Err(TensorError::invalid(format!(
                        "output with shape {} doesn't match the broadcast shape {}",
                        shape_str(o.sizes()),
                        shape_str(&shape)
                    )));
                } else {
                    // Resized as the structured glue resizes `out=` (`resize_out`): to the
                    // strides a fresh output would get.
                    let strides: SmallVec<[DimVec; 4]> = self
                        .inputs
                        .iter()
                        .map(|(t, _)| broadcast_strides(t, &shape))
                        .collect();
                    let refs: SmallVec<[&[i64]; 4]> = strides.iter().map(|s| &s[..]).collect();
                    let meta = MetaOutput {
                        strides: strides_for_perm(&shape, &reorder_dims(&shape, &refs)),
                        sizes: shape.clone(),
                        dtype: o.dtype(),
                        device: o.device(),
                    };
                    resized = Some(resize_out(o, &meta)?);
                }
            }
        }
        let out_given: Option<&Tensor> = resized.as_ref().or(self.out);

        // Dtypes.
        let mut promoted = ResultTypeState::default();
        for (t, _) in self
            .inputs
            .iter()
            .filter(|(_, k)| *k == InputKind::Promoted)
        {
            promoted.update_tensor(t);
        }
        let mut common = match (self.compute_dtype, promoted.result()) {
            (Some(d), _) | (None, Some(d)) => d,
            (None, None) => out_given.map(|o| o.dtype()).unwrap_or(DEFAULT_FLOAT),
        };
        if self.int_to_float && self.compute_dtype.is_none() && !common.is_floating_point() {
            common = DEFAULT_FLOAT;
        }
        let kernel_dtype = self.out_dtype.unwrap_or(common);
        if let Some(o) = out_given {
            if self.all_same_dtype && o.dtype() != common {
                return Err(TensorError::invalid(format!(
                    "Found dtype {} but expected {}",
                    o.dtype().c10_name(),
                    common.c10_name()
                )));
            }
            if self.check_out_cast && self.out_dtype.is_none() && !can_cast(common, o.dtype()) {
                return Err(TensorError::invalid(format!(
                    "result type {} can't be cast to the desired output type {}",
                    common.c10_name(),
                    o.dtype().c10_name()
                )));
            }
            check_internal_overlap(o)?;
            for &(t, _) in &self.inputs {
                check_no_partial_overlap(o, t)?;
            }
        }

        // Inputs in their compute dtypes.
        let mut inputs: SmallVec<[Tensor; 3]> = SmallVec::new();
        for &(t, kind) in &self.inputs {
            if kind == InputKind::Promoted && t.dtype() != common {
                inputs.push(cast(t, common)?);
            } else {
                inputs.push(t.clone());
            }
        }

        // Broadcast strides, the loop order, and the output.
        let mut in_strides: SmallVec<[DimVec; 4]> = inputs
            .iter()
            .map(|t| broadcast_strides(t, &shape))
            .collect();
        // The loops write a tensor allocated here unless `out` is given in the kernel dtype.
        let private_out = !matches!(out_given, Some(o) if o.dtype() == kernel_dtype);
        let (out, temp_out) = match out_given {
            Some(o) if o.dtype() == kernel_dtype => (o.clone(), None),
            given => {
                let refs: SmallVec<[&[i64]; 4]> = in_strides.iter().map(|s| &s[..]).collect();
                let perm = reorder_dims(&shape, &refs);
                let strides = strides_for_perm(&shape, &perm);
                let k = Tensor::empty_strided(&shape, &strides, kernel_dtype, device)?;
                match given {
                    Some(o) => (o.clone(), Some(k)),
                    None => (k, None),
                }
            }
        };
        in_strides.insert(
            0,
            broadcast_strides(temp_out.as_ref().unwrap_or(&out), &shape),
        );
        let refs: SmallVec<[&[i64]; 4]> = in_strides.iter().map(|s| &s[..]).collect();
        let perm = reorder_dims(&shape, &refs);
        let geom = coalesce(&shape, &in_strides, &perm);
        let numel = geom.numel();
        // One dense row for every operand: the loops need no geometry (as the fast path).
        let dense = geom.sizes.len() == 1 && geom.strides.iter().all(|s| s[0] == 1);
        debug_assert_eq!(out.sizes(), &shape[..]);
        Ok(TensorIter {
            common_dtype: common,
            out,
            temp_out,
            inputs,
            numel,
            geom: (!dense).then(|| Box::new(geom)),
            compute,
            private_out,
            looping: Cell::new(false),
            uninit: Cell::new(false),
        })
    }
}

/// Slice equality without a `memcmp` call (sizes are short).
#[inline(always)]
fn same_sizes(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

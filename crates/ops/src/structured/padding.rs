//! The meta functions of reflection and replication padding of the last 1, 2 or 3 dims and
//! of their backward (PyTorch's `TORCH_META_FUNC(reflection_pad1d)`, `replication_pad2d`, ...;
//! `reflection_pad2d` and the replication backwards are not structured in PyTorch, and their
//! Meta kernels name these functions): the checked geometry, with PyTorch's messages. A
//! negative padding crops.

use switchboard_tensor::{Tensor, TensorError};

use super::{same_device, MetaOutput, Result};

/// How the border is filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadMode {
    /// The reflection of the border (the border element not repeated).
    Reflect,
    /// Copies of the border element.
    Replicate,
}

impl PadMode {
    /// The operator's name for a `k`-d padding (`reflection_pad2d`).
    pub fn name(self, k: usize) -> String {
        match self {
            PadMode::Reflect => format!("reflection_pad{k}d"),
            PadMode::Replicate => format!("replication_pad{k}d"),
        }
    }
}

/// A checked padding: the output's sizes and, per padded dim, last first, `(input size, left
/// padding, output size)`.
#[derive(Clone, Debug)]
pub struct PadGeometry {
    /// The padded tensor's sizes.
    pub out_shape: Vec<i64>,
    /// Per padded dim, the last first: `(input size, left padding, output size)`.
    pub pads: Vec<(i64, i64, i64)>,
}

const DIM_NAMES: [&str; 3] = ["W", "H", "D"];
const DIM_WORDS: [&str; 3] = ["width", "height", "depth"];

fn shape_str(sizes: &[i64]) -> String {
    let parts: Vec<String> = sizes.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

fn invalid(msg: String) -> TensorError {
    TensorError::invalid(msg)
}

/// The checks of a `k`-d padding of `input` (on one device with `extra`) and its geometry.
pub fn pad_geometry(
    mode: PadMode,
    k: usize,
    input: &Tensor,
    padding: &[i64],
    extra: &[&Tensor],
) -> Result<PadGeometry> {
    let op = mode.name(k);
    let mut all = vec![input];
    all.extend_from_slice(extra);
    same_device(&all)?;
    if padding.len() != 2 * k {
        return Err(invalid(format!(
            "padding size is expected to be {}, but got: {}",
            2 * k,
            padding.len()
        )));
    }
    let (nd, s) = (input.dim(), input.sizes());
    let valid = if nd == k + 2 {
        s[1..].iter().all(|&v| v != 0)
    } else {
        nd == k + 1 && s.iter().all(|&v| v != 0)
    };
    if !valid {
        return Err(invalid(format!(
            "Expected {}D or {}D (batch mode) tensor with possibly 0 batch size and other \
             non-zero dimensions for input, but got: {}",
            k + 1,
            k + 2,
            shape_str(s)
        )));
    }
    // Padding pairs in PyTorch's order: the last dim first.
    let mut out_shape = s.to_vec();
    let mut pads = Vec::new();
    for (j, pair) in padding.chunks(2).enumerate() {
        let d = nd - 1 - j;
        let (l, r) = (pair[0], pair[1]);
        if mode == PadMode::Reflect && !(l < s[d] && r < s[d]) {
            return Err(invalid(format!(
                "Argument #{}: Padding size should be less than the corresponding input \
                 dimension, but got: padding ({l}, {r}) at dimension {d} of input {}",
                4 + 2 * j,
                shape_str(s)
            )));
        }
        let out = l
            .checked_add(r)
            .and_then(|p| p.checked_add(s[d]))
            .ok_or_else(|| invalid(format!("{op}: padding ({l}, {r}) is too large")))?;
        out_shape[d] = out;
        pads.push((s[d], l, out));
    }
    if k == 1 && pads[0].2 < 1 {
        // The 1-d pads' meta functions have their own message.
        return Err(invalid(format!(
            "input (W: {}) is too small. Calculated output W: {}",
            pads[0].0, pads[0].2
        )));
    }
    if pads.iter().any(|&(_, _, out)| out < 1) {
        let list = |f: &dyn Fn(&(i64, i64, i64)) -> i64| -> String {
            (0..k)
                .rev()
                .map(|j| format!("{}: {}", DIM_NAMES[j], f(&pads[j])))
                .collect::<Vec<_>>()
                .join(" ")
        };
        return Err(invalid(format!(
            "Calculated output {} must be >= 1 in every dimension (input {})",
            list(&|t| t.2),
            list(&|t| t.0).replace(" W", ", W").replace(" H", ", H")
        )));
    }
    let fits = out_shape
        .iter()
        .try_fold(1i64, |a, &v| a.checked_mul(v))
        .is_some();
    if !fits {
        return Err(invalid(format!(
            "{op}: the padded size {} is too large",
            shape_str(&out_shape)
        )));
    }
    Ok(PadGeometry { out_shape, pads })
}

/// The checks of a padding's backward: `grad_output` has the padded shape and `input`'s
/// dtype.
pub fn pad_backward_geometry(
    mode: PadMode,
    k: usize,
    grad_output: &Tensor,
    input: &Tensor,
    padding: &[i64],
) -> Result<PadGeometry> {
    let p = pad_geometry(mode, k, input, padding, &[grad_output])?;
    let nd = input.dim();
    let gs = grad_output.sizes();
    if grad_output.dim() != nd {
        return Err(invalid(format!(
            "grad_output is expected to have {nd} dimensions, but got {}",
            grad_output.dim()
        )));
    }
    for (j, word) in DIM_WORDS.iter().take(k).enumerate() {
        let d = nd - 1 - j;
        if gs[d] != p.out_shape[d] {
            return Err(invalid(format!(
                "grad_output {word} unexpected. Expected: {}, Got: {}",
                p.out_shape[d], gs[d]
            )));
        }
    }
    if gs[..nd - k] != input.sizes()[..nd - k] {
        return Err(invalid(format!(
            "grad_output of sizes {} does not match the input's leading sizes {}",
            shape_str(gs),
            shape_str(input.sizes())
        )));
    }
    if grad_output.dtype() != input.dtype() {
        return Err(invalid(format!(
            "expected scalar type {} but found {}",
            input.dtype().c10_name(),
            grad_output.dtype().c10_name()
        )));
    }
    Ok(p)
}

/// An output of `sizes` in the memory format `like` suggests (channels-last for a
/// channels-last 4-d or 5-d input, as PyTorch's CPU kernels give; its Python meta functions
/// give contiguous tensors), `like`'s dtype and device.
fn in_format_of(like: &Tensor, sizes: &[i64]) -> Result<MetaOutput> {
    Ok(MetaOutput {
        strides: like.suggest_memory_format().strides(sizes)?,
        sizes: sizes.into(),
        dtype: like.dtype(),
        device: like.device(),
    })
}

/// A `k`-d padding's geometry and its output: the padded sizes in the memory format `input`
/// suggests.
pub fn pad_meta(
    mode: PadMode,
    k: usize,
    input: &Tensor,
    padding: &[i64],
) -> Result<(PadGeometry, MetaOutput)> {
    let p = pad_geometry(mode, k, input, padding, &[])?;
    // PyTorch's meta functions of the replication pads refuse Bool (the reflection pads'
    // kernels do, on the CPU).
    if mode == PadMode::Replicate && input.dtype() == switchboard_tensor::ScalarType::Bool {
        return Err(invalid(format!(
            "\"{}\" not implemented for 'Bool'",
            mode.name(k)
        )));
    }
    let meta = in_format_of(input, &p.out_shape)?;
    Ok((p, meta))
}

/// A `k`-d padding backward's geometry and its output: `input`'s sizes in the memory format it
/// suggests.
pub fn pad_backward_meta(
    mode: PadMode,
    k: usize,
    grad_output: &Tensor,
    input: &Tensor,
    padding: &[i64],
) -> Result<(PadGeometry, MetaOutput)> {
    let p = pad_backward_geometry(mode, k, grad_output, input, padding)?;
    let meta = in_format_of(input, input.sizes())?;
    Ok((p, meta))
}

macro_rules! pad_meta_functions {
    ($($(#[$doc:meta])* $name:ident, $backward:ident: $mode:ident, $k:literal;)*) => {$(
        $(#[$doc])*
        pub fn $name(self_: &Tensor, padding: &[i64], _out: Option<&Tensor>) -> Result<MetaOutput> {
            Ok(pad_meta(PadMode::$mode, $k, self_, padding)?.1)
        }

        #[doc = concat!("`", stringify!($backward), "`: `self`'s geometry.")]
        pub fn $backward(
            grad_output: &Tensor,
            self_: &Tensor,
            padding: &[i64],
            _grad_input: Option<&Tensor>,
        ) -> Result<MetaOutput> {
            Ok(pad_backward_meta(PadMode::$mode, $k, grad_output, self_, padding)?.1)
        }
    )*};
}

pad_meta_functions! {
    /// `reflection_pad1d` (and its `out=` form).
    reflection_pad1d, reflection_pad1d_backward: Reflect, 1;
    /// `reflection_pad2d`.
    reflection_pad2d, reflection_pad2d_backward: Reflect, 2;
    /// `reflection_pad3d` (and its `out=` form).
    reflection_pad3d, reflection_pad3d_backward: Reflect, 3;
    /// `replication_pad2d` (and its `out=` form).
    replication_pad2d, replication_pad2d_backward: Replicate, 2;
    /// `replication_pad3d` (and its `out=` form).
    replication_pad3d, replication_pad3d_backward: Replicate, 3;
}

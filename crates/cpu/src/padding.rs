//! Reflection and replication padding of the last 1, 2 or 3 dims (`reflection_pad1d/2d/3d`,
//! `replication_pad2d/3d`) and their backward, with PyTorch's checks and messages. A negative
//! padding crops.

use switchboard_tensor::{RawOps, Tensor};

use crate::avg_pool::{for_each_plane, in_format_of, pool_output_format};
use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{check_cpu_or_meta, invalid, same_device, shape_str, Result};
use crate::{dispatch_all_types, dispatch_floating_types};

/// How the border is filled.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Reflect,
    Replicate,
}

impl Mode {
    fn name(self, k: usize) -> String {
        match self {
            Mode::Reflect => format!("reflection_pad{k}d"),
            Mode::Replicate => format!("replication_pad{k}d"),
        }
    }
}

/// The checked geometry: the padded dims as `(depth, height, width)` (size-1 dims with no
/// padding stand in for the ones a 1-d or 2-d padding lacks), and for each the input index
/// each output index reads.
struct Padding {
    out_shape: Vec<i64>,
    planes: usize,
    plane_in: usize,
    plane_out: usize,
    /// Per padded dim, last first: `(input size, left padding, output size)`.
    pads: Vec<(i64, i64, i64)>,
    mode: Mode,
}

impl Padding {
    /// Per padded dim as `(depth, height, width)` (size-1 dims with no padding stand in for
    /// the ones a 1-d or 2-d padding lacks): the input size and, for each output index, the
    /// input index it reads. Built only once the output exists (each map is at most as long
    /// as the output), so that a huge padding fails as an allocation error first.
    fn maps(&self) -> [(usize, Vec<usize>); 3] {
        let mut dims: [(usize, Vec<usize>); 3] = [(1, vec![0]), (1, vec![0]), (1, vec![0])];
        for (j, &(size, l, out)) in self.pads.iter().enumerate() {
            let map = (0..out)
                .map(|o| source(self.mode, o, size, l) as usize)
                .collect();
            dims[2 - j] = (size as usize, map);
        }
        dims
    }
}

/// The input index PyTorch's kernels read for output index `j` of a dim of `size` padded by
/// `(l, r)`.
fn source(mode: Mode, j: i64, size: i64, l: i64) -> i64 {
    let (i_start, o_start) = ((-l).max(0), l.max(0));
    let ip = match mode {
        Mode::Reflect if j < l => l * 2 - j,
        Mode::Replicate if j < l => l,
        _ if j < size + l => j,
        Mode::Reflect => (size + l - 1) * 2 - j,
        Mode::Replicate => size + l - 1,
    };
    ip - o_start + i_start
}

const DIM_NAMES: [&str; 3] = ["W", "H", "D"];
const DIM_WORDS: [&str; 3] = ["width", "height", "depth"];

fn check(
    mode: Mode,
    k: usize,
    input: &Tensor,
    padding: &[i64],
    extra: &[&Tensor],
) -> Result<Padding> {
    let op = mode.name(k);
    let mut all = vec![input];
    all.extend_from_slice(extra);
    let device = same_device(&all)?;
    check_cpu_or_meta(&op, device)?;
    if padding.len() != 2 * k {
        return Err(invalid(format!(
            "padding size is expected to be {}, but got: {}",
            2 * k,
            padding.len()
        )));
    }
    let (nd, s) = (input.dim(), input.sizes());
    let batch = nd == k + 2;
    let valid = if batch {
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
    let mut sizes = Vec::new();
    for (j, pair) in padding.chunks(2).enumerate() {
        let d = nd - 1 - j;
        let (l, r) = (pair[0], pair[1]);
        if mode == Mode::Reflect && !(l < s[d] && r < s[d]) {
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
        sizes.push((s[d], l, out));
    }
    if k == 1 && sizes[0].2 < 1 {
        // The 1-d pads' meta functions have their own message.
        return Err(invalid(format!(
            "input (W: {}) is too small. Calculated output W: {}",
            sizes[0].0, sizes[0].2
        )));
    }
    if sizes.iter().any(|&(_, _, out)| out < 1) {
        let list = |f: &dyn Fn(&(i64, i64, i64)) -> i64| -> String {
            (0..k)
                .rev()
                .map(|j| format!("{}: {}", DIM_NAMES[j], f(&sizes[j])))
                .collect::<Vec<_>>()
                .join(" ")
        };
        return Err(invalid(format!(
            "Calculated output {} must be >= 1 in every dimension (input {})",
            list(&|t| t.2),
            list(&|t| t.0).replace(" W", ", W").replace(" H", ", H")
        )));
    }
    let plane_out = out_shape[nd - k..]
        .iter()
        .try_fold(1i64, |a, &v| a.checked_mul(v))
        .filter(|&v| v.checked_mul(s[..nd - k].iter().product()).is_some())
        .ok_or_else(|| {
            invalid(format!(
                "{op}: the padded size {} is too large",
                shape_str(&out_shape)
            ))
        })?;
    let prod = |v: &[i64]| v.iter().product::<i64>() as usize;
    Ok(Padding {
        planes: prod(&s[..nd - k]),
        plane_in: prod(&s[nd - k..]),
        plane_out: plane_out as usize,
        out_shape,
        pads: sizes,
        mode,
    })
}

fn pad_planes<T: CpuElement>(x: &[T], out: &mut [T], p: &Padding) {
    let [(_, md), (h, mh), (w, mw)] = &p.maps();
    for_each_plane(out, p.plane_out, p.plane_out, |pl, o| {
        let xp = &x[pl * p.plane_in..][..p.plane_in];
        let mut k = 0;
        for &d in md {
            for &y in mh {
                let row = &xp[(d * h + y) * w..][..*w];
                for &xi in mw {
                    o[k] = row[xi];
                    k += 1;
                }
            }
        }
    });
}

fn unpad_planes<T: CpuElement>(go: &[T], gi: &mut [T], p: &Padding) {
    let [(_, md), (h, mh), (w, mw)] = &p.maps();
    for_each_plane(gi, p.plane_in, p.plane_out, |pl, g| {
        g.fill(T::from_acc(<T::Acc as Num>::ZERO));
        let gp = &go[pl * p.plane_out..][..p.plane_out];
        let mut k = 0;
        for &d in md {
            for &y in mh {
                let row = &mut g[(d * h + y) * w..][..*w];
                for &xi in mw {
                    row[xi] = T::from_acc(row[xi].to_acc().add(gp[k].to_acc()));
                    k += 1;
                }
            }
        }
    });
}

fn pad(mode: Mode, k: usize, input: &Tensor, padding: &[i64]) -> Result<Tensor> {
    let p = check(mode, k, input, padding, &[])?;
    let (dtype, device) = (input.dtype(), input.device());
    if dtype == switchboard_tensor::ScalarType::Bool {
        return Err(crate::error::not_implemented(&mode.name(k), dtype));
    }
    if device.is_meta() {
        return Tensor::empty_with_format(&p.out_shape, dtype, device, pool_output_format(input));
    }
    let x = input.contiguous()?;
    let out = Tensor::empty_on(&p.out_shape, dtype, device)?;
    if p.planes > 0 {
        dispatch_all_types!(dtype, "pad", T => {
            pad_planes::<T>(&x.data::<T>()?, &mut out.data_mut::<T>()?, &p);
            Ok(())
        })?;
    }
    in_format_of(input, out)
}

fn pad_backward(
    mode: Mode,
    k: usize,
    grad_output: &Tensor,
    input: &Tensor,
    padding: &[i64],
) -> Result<Tensor> {
    let p = check(mode, k, input, padding, &[grad_output])?;
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
    let (dtype, device) = (input.dtype(), input.device());
    if grad_output.dtype() != dtype {
        return Err(invalid(format!(
            "expected scalar type {} but found {}",
            dtype.c10_name(),
            grad_output.dtype().c10_name()
        )));
    }
    let name = format!("{}_backward", mode.name(k));
    if !dtype.is_floating_point() {
        return Err(crate::error::not_implemented(&name, dtype));
    }
    if device.is_meta() {
        return Tensor::empty_with_format(input.sizes(), dtype, device, pool_output_format(input));
    }
    let go = grad_output.contiguous()?;
    let gi = Tensor::empty_on(input.sizes(), dtype, device)?;
    if p.planes == 0 {
        return Ok(gi);
    }
    dispatch_floating_types!(dtype, &name, T => {
        unpad_planes::<T>(&go.data::<T>()?, &mut gi.data_mut::<T>()?, &p);
        Ok(())
    })?;
    in_format_of(input, gi)
}

/// `reflection_pad1d(Tensor self, SymInt[2] padding) -> Tensor`: pads the last dim by
/// `(left, right)` with its reflection (the border element not repeated).
///
/// ```
/// use switchboard_tensor::Tensor;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[1, 3]).unwrap();
/// let y = switchboard_cpu::reflection_pad1d(&x, &[2, 1]).unwrap();
/// assert_eq!(y.to_vec::<f32>().unwrap(), [3.0, 2.0, 1.0, 2.0, 3.0, 2.0]);
/// ```
pub fn reflection_pad1d(self_: &Tensor, padding: &[i64]) -> Result<Tensor> {
    pad(Mode::Reflect, 1, self_, padding)
}

/// `reflection_pad2d(Tensor self, SymInt[4] padding) -> Tensor`: padding `(left, right,
/// top, bottom)`.
pub fn reflection_pad2d(self_: &Tensor, padding: &[i64]) -> Result<Tensor> {
    pad(Mode::Reflect, 2, self_, padding)
}

/// `reflection_pad3d(Tensor self, SymInt[6] padding) -> Tensor`: padding `(left, right,
/// top, bottom, front, back)`.
pub fn reflection_pad3d(self_: &Tensor, padding: &[i64]) -> Result<Tensor> {
    pad(Mode::Reflect, 3, self_, padding)
}

/// `replication_pad2d(Tensor self, SymInt[4] padding) -> Tensor`: pads with copies of the
/// border elements.
///
/// ```
/// use switchboard_tensor::Tensor;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[1, 1, 2]).unwrap();
/// let y = switchboard_cpu::replication_pad2d(&x, &[1, 0, 0, 1]).unwrap();
/// assert_eq!(y.to_vec::<f32>().unwrap(), [1.0, 1.0, 2.0, 1.0, 1.0, 2.0]);
/// ```
pub fn replication_pad2d(self_: &Tensor, padding: &[i64]) -> Result<Tensor> {
    pad(Mode::Replicate, 2, self_, padding)
}

/// `replication_pad3d(Tensor self, SymInt[6] padding) -> Tensor`.
pub fn replication_pad3d(self_: &Tensor, padding: &[i64]) -> Result<Tensor> {
    pad(Mode::Replicate, 3, self_, padding)
}

/// `reflection_pad1d_backward(Tensor grad_output, Tensor self, SymInt[2] padding) -> Tensor`:
/// each output's gradient added to the input element it was read from.
pub fn reflection_pad1d_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    padding: &[i64],
) -> Result<Tensor> {
    pad_backward(Mode::Reflect, 1, grad_output, self_, padding)
}

/// `reflection_pad2d_backward(Tensor grad_output, Tensor self, SymInt[4] padding) -> Tensor`.
pub fn reflection_pad2d_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    padding: &[i64],
) -> Result<Tensor> {
    pad_backward(Mode::Reflect, 2, grad_output, self_, padding)
}

/// `reflection_pad3d_backward(Tensor grad_output, Tensor self, SymInt[6] padding) -> Tensor`.
pub fn reflection_pad3d_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    padding: &[i64],
) -> Result<Tensor> {
    pad_backward(Mode::Reflect, 3, grad_output, self_, padding)
}

/// `replication_pad2d_backward(Tensor grad_output, Tensor self, SymInt[4] padding) -> Tensor`.
pub fn replication_pad2d_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    padding: &[i64],
) -> Result<Tensor> {
    pad_backward(Mode::Replicate, 2, grad_output, self_, padding)
}

/// `replication_pad3d_backward(Tensor grad_output, Tensor self, SymInt[6] padding) -> Tensor`.
pub fn replication_pad3d_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    padding: &[i64],
) -> Result<Tensor> {
    pad_backward(Mode::Replicate, 3, grad_output, self_, padding)
}

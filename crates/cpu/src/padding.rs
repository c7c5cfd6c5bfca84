//! Reflection and replication padding of the last 1, 2 or 3 dims (`reflection_pad1d/2d/3d`,
//! `replication_pad2d/3d`) and their backward: the CPU kernels, after the meta functions
//! (`structured::pad_meta`, with PyTorch's checks and messages). A negative padding crops.

use switchboard_ops::structured::{self, PadGeometry, PadMode};
use switchboard_tensor::{RawOps, Tensor};

use crate::avg_pool::for_each_plane;
use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{check_cpu, Result};
use crate::structured_output::{compute_contiguous, structured_output};
use crate::{dispatch_all_types, dispatch_floating_types};

/// The geometry the kernels walk: planes of the padded dims and, for each padded dim, the
/// input index each output index reads.
struct Padding {
    planes: usize,
    plane_in: usize,
    plane_out: usize,
    /// Per padded dim, last first: `(input size, left padding, output size)`.
    pads: Vec<(i64, i64, i64)>,
    mode: PadMode,
}

impl Padding {
    /// The planes of a `k`-d padding of `input` (the meta function checked that the padded
    /// sizes fit).
    fn new(mode: PadMode, k: usize, input: &Tensor, g: PadGeometry) -> Padding {
        let (nd, s) = (input.dim(), input.sizes());
        let prod = |v: &[i64]| v.iter().product::<i64>() as usize;
        Padding {
            planes: prod(&s[..nd - k]),
            plane_in: prod(&s[nd - k..]),
            plane_out: prod(&g.out_shape[nd - k..]),
            pads: g.pads,
            mode,
        }
    }

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
fn source(mode: PadMode, j: i64, size: i64, l: i64) -> i64 {
    let (i_start, o_start) = ((-l).max(0), l.max(0));
    let ip = match mode {
        PadMode::Reflect if j < l => l * 2 - j,
        PadMode::Replicate if j < l => l,
        _ if j < size + l => j,
        PadMode::Reflect => (size + l - 1) * 2 - j,
        PadMode::Replicate => size + l - 1,
    };
    ip - o_start + i_start
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

/// A `k`-d padding of `input` after its meta function, into `out` when given.
fn pad(
    mode: PadMode,
    k: usize,
    input: &Tensor,
    padding: &[i64],
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let (g, meta) = structured::pad_meta(mode, k, input, padding)?;
    check_cpu(&mode.name(k), meta.device)?;
    let dtype = input.dtype();
    if dtype == switchboard_tensor::ScalarType::Bool {
        return Err(crate::error::not_implemented(&mode.name(k), dtype));
    }
    let p = Padding::new(mode, k, input, g);
    let result = structured_output(meta, out)?;
    if p.planes == 0 {
        return Ok(result);
    }
    let x = input.contiguous()?;
    compute_contiguous(&result, &[input], |dense| {
        dispatch_all_types!(dtype, "pad", T => {
            pad_planes::<T>(&x.data::<T>()?, &mut dense.data_mut::<T>()?, &p);
            Ok(())
        })
    })?;
    Ok(result)
}

/// A `k`-d padding's backward after its meta function, into `grad_input` when given.
fn pad_backward(
    mode: PadMode,
    k: usize,
    grad_output: &Tensor,
    input: &Tensor,
    padding: &[i64],
    grad_input: Option<&Tensor>,
) -> Result<Tensor> {
    let (g, meta) = structured::pad_backward_meta(mode, k, grad_output, input, padding)?;
    let name = format!("{}_backward", mode.name(k));
    check_cpu(&name, meta.device)?;
    let dtype = input.dtype();
    if !dtype.is_floating_point() {
        return Err(crate::error::not_implemented(&name, dtype));
    }
    let p = Padding::new(mode, k, input, g);
    let result = structured_output(meta, grad_input)?;
    if p.planes == 0 {
        return Ok(result);
    }
    let go = grad_output.contiguous()?;
    compute_contiguous(&result, &[grad_output, input], |dense| {
        dispatch_floating_types!(dtype, &name, T => {
            unpad_planes::<T>(&go.data::<T>()?, &mut dense.data_mut::<T>()?, &p);
            Ok(())
        })
    })?;
    Ok(result)
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
    pad(PadMode::Reflect, 1, self_, padding, None)
}

/// `reflection_pad2d(Tensor self, SymInt[4] padding) -> Tensor`: padding `(left, right,
/// top, bottom)`.
pub fn reflection_pad2d(self_: &Tensor, padding: &[i64]) -> Result<Tensor> {
    pad(PadMode::Reflect, 2, self_, padding, None)
}

/// `reflection_pad3d(Tensor self, SymInt[6] padding) -> Tensor`: padding `(left, right,
/// top, bottom, front, back)`.
pub fn reflection_pad3d(self_: &Tensor, padding: &[i64]) -> Result<Tensor> {
    pad(PadMode::Reflect, 3, self_, padding, None)
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
    pad(PadMode::Replicate, 2, self_, padding, None)
}

/// `replication_pad3d(Tensor self, SymInt[6] padding) -> Tensor`.
pub fn replication_pad3d(self_: &Tensor, padding: &[i64]) -> Result<Tensor> {
    pad(PadMode::Replicate, 3, self_, padding, None)
}

/// `reflection_pad1d_backward(Tensor grad_output, Tensor self, SymInt[2] padding) -> Tensor`:
/// each output's gradient added to the input element it was read from.
pub fn reflection_pad1d_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    padding: &[i64],
) -> Result<Tensor> {
    pad_backward(PadMode::Reflect, 1, grad_output, self_, padding, None)
}

/// `reflection_pad2d_backward(Tensor grad_output, Tensor self, SymInt[4] padding) -> Tensor`.
pub fn reflection_pad2d_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    padding: &[i64],
) -> Result<Tensor> {
    pad_backward(PadMode::Reflect, 2, grad_output, self_, padding, None)
}

/// `reflection_pad3d_backward(Tensor grad_output, Tensor self, SymInt[6] padding) -> Tensor`.
pub fn reflection_pad3d_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    padding: &[i64],
) -> Result<Tensor> {
    pad_backward(PadMode::Reflect, 3, grad_output, self_, padding, None)
}

/// `replication_pad2d_backward(Tensor grad_output, Tensor self, SymInt[4] padding) -> Tensor`.
pub fn replication_pad2d_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    padding: &[i64],
) -> Result<Tensor> {
    pad_backward(PadMode::Replicate, 2, grad_output, self_, padding, None)
}

/// `replication_pad3d_backward(Tensor grad_output, Tensor self, SymInt[6] padding) -> Tensor`.
pub fn replication_pad3d_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    padding: &[i64],
) -> Result<Tensor> {
    pad_backward(PadMode::Replicate, 3, grad_output, self_, padding, None)
}

/// `reflection_pad1d.out(Tensor self, SymInt[2] padding, *, Tensor(a!) out)`.
pub fn reflection_pad1d_out(self_: &Tensor, padding: &[i64], out: &Tensor) -> Result<Tensor> {
    pad(PadMode::Reflect, 1, self_, padding, Some(out))
}

/// `reflection_pad3d.out(Tensor self, SymInt[6] padding, *, Tensor(a!) out)`.
pub fn reflection_pad3d_out(self_: &Tensor, padding: &[i64], out: &Tensor) -> Result<Tensor> {
    pad(PadMode::Reflect, 3, self_, padding, Some(out))
}

/// `replication_pad2d.out(Tensor self, SymInt[4] padding, *, Tensor(a!) out)`.
pub fn replication_pad2d_out(self_: &Tensor, padding: &[i64], out: &Tensor) -> Result<Tensor> {
    pad(PadMode::Replicate, 2, self_, padding, Some(out))
}

/// `replication_pad3d.out(Tensor self, SymInt[6] padding, *, Tensor(a!) out)`.
pub fn replication_pad3d_out(self_: &Tensor, padding: &[i64], out: &Tensor) -> Result<Tensor> {
    pad(PadMode::Replicate, 3, self_, padding, Some(out))
}

/// `reflection_pad1d_backward.grad_input(Tensor grad_output, Tensor self, SymInt[2] padding,
/// *, Tensor(a!) grad_input)`.
pub fn reflection_pad1d_backward_grad_input(
    grad_output: &Tensor,
    self_: &Tensor,
    padding: &[i64],
    grad_input: &Tensor,
) -> Result<Tensor> {
    pad_backward(
        PadMode::Reflect,
        1,
        grad_output,
        self_,
        padding,
        Some(grad_input),
    )
}

/// `reflection_pad3d_backward.grad_input(Tensor grad_output, Tensor self, SymInt[6] padding,
/// *, Tensor(a!) grad_input)`.
pub fn reflection_pad3d_backward_grad_input(
    grad_output: &Tensor,
    self_: &Tensor,
    padding: &[i64],
    grad_input: &Tensor,
) -> Result<Tensor> {
    pad_backward(
        PadMode::Reflect,
        3,
        grad_output,
        self_,
        padding,
        Some(grad_input),
    )
}

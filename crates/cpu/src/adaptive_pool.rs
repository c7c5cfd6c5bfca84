//! Adaptive average pooling: `_adaptive_avg_pool2d` and its backward, over 3-d `(C, H, W)`
//! and 4-d `(N, C, H, W)` inputs. Output cell `o` of `osize` along an input dim of `isize`
//! averages inputs `floor(o * isize / osize)` to `ceil((o + 1) * isize / osize)`.

use switchboard_tensor::{RawOps, Tensor};

use crate::avg_pool::{for_each_plane, in_format_of, pool_output_format};
use crate::dispatch_dtype::{FloatElement, Num};
use crate::dispatch_floating_types;
use crate::error::{check_cpu_or_meta, invalid, same_device, shape_str, Result};

/// The input range `[start, end)` of output cell `o` (in i128: `o * isize` may exceed i64 for
/// a user-given output size).
pub(crate) fn cell(o: i64, osize: i64, isize: i64) -> (usize, usize) {
    let (o, os, is) = (o as i128, osize as i128, isize as i128);
    let start = o * is / os;
    let end = ((o + 1) * is + os - 1) / os;
    (start as usize, end as usize)
}

/// The checked geometry: planes, input and output plane sizes.
struct Adaptive {
    h: i64,
    w: i64,
    oh: i64,
    ow: i64,
    plane_in: usize,
    plane_out: usize,
}

/// PyTorch's `adaptive_avg_pool2d_out_cpu_template` checks.
fn check(op: &str, input: &Tensor, output_size: &[i64], extra: &[&Tensor]) -> Result<Adaptive> {
    let mut all = vec![input];
    all.extend_from_slice(extra);
    let device = same_device(&all)?;
    check_cpu_or_meta(op, device)?;
    let &[oh, ow] = output_size else {
        return Err(invalid("adaptive_avg_pool2d: output_size must be 2"));
    };
    if oh < 0 || ow < 0 {
        return Err(invalid(format!(
            "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 \
             but received {{{oh}, {ow}}}"
        )));
    }
    let nd = input.dim();
    if nd != 3 && nd != 4 {
        return Err(invalid(format!(
            "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got {}",
            shape_str(input.sizes())
        )));
    }
    let s = input.sizes();
    for d in [nd - 2, nd - 1] {
        if s[d] == 0 {
            return Err(invalid(format!(
                "adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch \
                 dimensions, but input has sizes {} with dimension {d} being empty",
                shape_str(s)
            )));
        }
    }
    if !input.dtype().is_floating_point() {
        return Err(crate::error::not_implemented(
            "adaptive_avg_pool2d",
            input.dtype(),
        ));
    }
    let (h, w) = (s[nd - 2], s[nd - 1]);
    let plane_out = oh.checked_mul(ow).ok_or_else(|| {
        invalid(format!(
            "adaptive_avg_pool2d: output_size [{oh}, {ow}] is too large"
        ))
    })?;
    Ok(Adaptive {
        h,
        w,
        oh,
        ow,
        plane_in: (h * w) as usize,
        plane_out: plane_out as usize,
    })
}

fn pool_planes<T: FloatElement>(x: &[T], out: &mut [T], a: &Adaptive) {
    let w = a.w as usize;
    for_each_plane(out, a.plane_out, a.plane_in, |pl, o| {
        let xp = &x[pl * a.plane_in..][..a.plane_in];
        for oy in 0..a.oh {
            let (y0, y1) = cell(oy, a.oh, a.h);
            for ox in 0..a.ow {
                let (x0, x1) = cell(ox, a.ow, a.w);
                let mut sum = <T::F as Num>::ZERO;
                for row in xp[y0 * w..y1 * w].chunks(w) {
                    for v in &row[x0..x1] {
                        sum = sum.add(v.to_acc());
                    }
                }
                let count = <T::F as Num>::from_f64(((y1 - y0) * (x1 - x0)) as f64);
                o[(oy * a.ow + ox) as usize] = T::from_acc(sum.div(count));
            }
        }
    });
}

/// `_adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor`: the mean of each
/// adaptive window (floating dtypes; channels-last in, channels-last out).
///
/// ```
/// use switchboard_tensor::Tensor;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[1, 2, 3]).unwrap();
/// let y = switchboard_cpu::_adaptive_avg_pool2d(&x, &[1, 2]).unwrap();
/// assert_eq!(y.to_vec::<f32>().unwrap(), [3.0, 4.0]);
/// ```
pub fn _adaptive_avg_pool2d(self_: &Tensor, output_size: &[i64]) -> Result<Tensor> {
    let a = check("adaptive_avg_pool2d", self_, output_size, &[])?;
    let nd = self_.dim();
    let mut shape = self_.sizes()[..nd - 2].to_vec();
    shape.extend([a.oh, a.ow]);
    let (dtype, device) = (self_.dtype(), self_.device());
    if device.is_meta() {
        return Tensor::empty_with_format(&shape, dtype, device, pool_output_format(self_));
    }
    let x = self_.contiguous()?;
    let out = Tensor::empty_on(&shape, dtype, device)?;
    dispatch_floating_types!(dtype, "adaptive_avg_pool2d", T => {
        pool_planes::<T>(&x.data::<T>()?, &mut out.data_mut::<T>()?, &a);
        Ok(())
    })?;
    in_format_of(self_, out)
}

fn backward_planes<T: FloatElement>(go: &[T], gi: &mut [T], a: &Adaptive) {
    let w = a.w as usize;
    for_each_plane(gi, a.plane_in, a.plane_in, |pl, g| {
        g.fill(T::from_acc(<T::F as Num>::ZERO));
        let gp = &go[pl * a.plane_out..][..a.plane_out];
        for oy in 0..a.oh {
            let (y0, y1) = cell(oy, a.oh, a.h);
            for ox in 0..a.ow {
                let (x0, x1) = cell(ox, a.ow, a.w);
                let count = <T::F as Num>::from_f64(((y1 - y0) * (x1 - x0)) as f64);
                let share = gp[(oy * a.ow + ox) as usize].to_acc().div(count);
                for row in g[y0 * w..y1 * w].chunks_mut(w) {
                    for v in &mut row[x0..x1] {
                        *v = T::from_acc(v.to_acc().add(share));
                    }
                }
            }
        }
    });
}

/// `_adaptive_avg_pool2d_backward(Tensor grad_output, Tensor self) -> Tensor`: each output's
/// gradient divided by its window's size and added to the window's inputs (the output size
/// is `grad_output`'s).
pub fn _adaptive_avg_pool2d_backward(grad_output: &Tensor, self_: &Tensor) -> Result<Tensor> {
    const OP: &str = "adaptive_avg_pool2d_backward_out_cpu_template";
    let nd = self_.dim();
    if grad_output.dim() != nd {
        return Err(invalid(format!(
            "{OP}: Expected dimensions {nd} for `grad_output` but got dimensions {}",
            grad_output.dim()
        )));
    }
    if grad_output.dtype() != self_.dtype() {
        return Err(invalid(format!(
            "{OP}: Expected dtype {} for `grad_output` but got dtype {}",
            self_.dtype().type_meta_name(),
            grad_output.dtype().type_meta_name()
        )));
    }
    let go_sizes = grad_output.sizes();
    let output_size = &go_sizes[go_sizes.len().saturating_sub(2)..];
    let a = check(
        "adaptive_avg_pool2d_backward",
        self_,
        output_size,
        &[grad_output],
    )?;
    if go_sizes[..nd - 2] != self_.sizes()[..nd - 2] {
        return Err(invalid(format!(
            "{OP}: expected grad_output of sizes {} to match the input's leading sizes {}",
            shape_str(go_sizes),
            shape_str(self_.sizes())
        )));
    }
    let (dtype, device) = (self_.dtype(), self_.device());
    if device.is_meta() {
        return Tensor::empty_with_format(self_.sizes(), dtype, device, pool_output_format(self_));
    }
    let go = grad_output.contiguous()?;
    let gi = Tensor::empty_on(self_.sizes(), dtype, device)?;
    dispatch_floating_types!(dtype, "adaptive_avg_pool2d_backward_cpu", T => {
        backward_planes::<T>(&go.data::<T>()?, &mut gi.data_mut::<T>()?, &a);
        Ok(())
    })?;
    in_format_of(self_, gi)
}

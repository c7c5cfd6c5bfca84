//! 3-d adaptive average pooling: `_adaptive_avg_pool3d` and its backward, over 4-d
//! `(C, T, H, W)` and 5-d `(N, C, T, H, W)` inputs (the windows of `adaptive_pool`'s `cell`
//! along each of T, H and W). Outputs are contiguous, as PyTorch's CPU kernels give them.

use switchboard_tensor::{RawOps, Tensor};

use crate::adaptive_pool::cell;
use crate::avg_pool::for_each_plane;
use crate::dispatch_dtype::{FloatElement, Num};
use crate::dispatch_floating_types;
use crate::error::{check_cpu_or_meta, invalid, same_device, shape_str, Result};
use crate::pool::saturated_usize;

/// The checked geometry: input and output `(T, H, W)`.
struct Adaptive3d {
    input: [i64; 3],
    output: [i64; 3],
}

impl Adaptive3d {
    fn plane_in(&self) -> usize {
        saturated_usize(self.input.iter().product())
    }
    fn plane_out(&self) -> usize {
        saturated_usize(self.output.iter().product())
    }
    /// Each output position with its window (`[start, end)` along T, H, W).
    fn windows(&self) -> impl Iterator<Item = [(usize, usize); 3]> + '_ {
        let [ot, oh, ow] = self.output;
        let [it, ih, iw] = self.input;
        (0..ot).flat_map(move |t| {
            (0..oh).flat_map(move |h| {
                (0..ow).map(move |w| [cell(t, ot, it), cell(h, oh, ih), cell(w, ow, iw)])
            })
        })
    }
}

/// PyTorch's `adaptive_avg_pool3d_out_cpu_template` checks.
fn check(input: &Tensor, output_size: &[i64], extra: &[&Tensor]) -> Result<Adaptive3d> {
    let mut all = vec![input];
    all.extend_from_slice(extra);
    let device = same_device(&all)?;
    check_cpu_or_meta("adaptive_avg_pool3d", device)?;
    let &[ot, oh, ow] = output_size else {
        return Err(invalid("adaptive_avg_pool3d: output_size must be 3"));
    };
    if ot < 0 || oh < 0 || ow < 0 {
        return Err(invalid(format!(
            "adaptive_avg_pool3d: elements of output_size must be greater than or equal to 0 \
             but received {{{ot}, {oh},{ow}}}"
        )));
    }
    let nd = input.dim();
    if nd != 4 && nd != 5 {
        return Err(invalid(format!(
            "adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got {}",
            shape_str(input.sizes())
        )));
    }
    let s = input.sizes();
    for (d, &size) in s.iter().enumerate().skip(1) {
        if size == 0 {
            return Err(invalid(format!(
                "adaptive_avg_pool3d(): Expected input to have non-zero size for non-batch \
                 dimensions, but input has sizes {} with dimension {d} being empty",
                shape_str(s)
            )));
        }
    }
    if [ot, oh, ow]
        .iter()
        .try_fold(1i64, |a, &b| a.checked_mul(b))
        .is_none()
    {
        return Err(invalid(format!(
            "adaptive_avg_pool3d: output_size [{ot}, {oh}, {ow}] is too large"
        )));
    }
    Ok(Adaptive3d {
        input: [s[nd - 3], s[nd - 2], s[nd - 1]],
        output: [ot, oh, ow],
    })
}

fn pool_planes<T: FloatElement>(x: &[T], out: &mut [T], a: &Adaptive3d) {
    let (plane_in, plane_out) = (a.plane_in(), a.plane_out());
    let (h, w) = (a.input[1] as usize, a.input[2] as usize);
    for_each_plane(out, plane_out, plane_in, |p, o| {
        let xp = &x[p * plane_in..][..plane_in];
        for (v, [t, y, xr]) in o.iter_mut().zip(a.windows()) {
            let mut sum = <T::F as Num>::ZERO;
            for it in t.0..t.1 {
                for iy in y.0..y.1 {
                    for e in &xp[(it * h + iy) * w..][xr.0..xr.1] {
                        sum = sum.add(e.to_acc());
                    }
                }
            }
            let count = ((t.1 - t.0) * (y.1 - y.0) * (xr.1 - xr.0)) as f64;
            *v = T::from_acc(sum.div(<T::F as Num>::from_f64(count)));
        }
    });
}

/// `_adaptive_avg_pool3d(Tensor self, SymInt[3] output_size) -> Tensor`: the mean of each
/// adaptive 3-d window (floating dtypes).
///
/// ```
/// use switchboard_tensor::Tensor;
/// let x = Tensor::from_vec((0..8).map(|v| v as f32).collect(), &[1, 2, 2, 2]).unwrap();
/// let y = switchboard_cpu::_adaptive_avg_pool3d(&x, &[1, 1, 2]).unwrap();
/// assert_eq!(y.to_vec::<f32>().unwrap(), [3.0, 4.0]);
/// ```
pub fn _adaptive_avg_pool3d(self_: &Tensor, output_size: &[i64]) -> Result<Tensor> {
    let a = check(self_, output_size, &[])?;
    let nd = self_.dim();
    let mut shape = self_.sizes()[..nd - 3].to_vec();
    shape.extend(a.output);
    let (dtype, device) = (self_.dtype(), self_.device());
    let out = Tensor::empty_on(&shape, dtype, device)?;
    if device.is_meta() {
        return Ok(out);
    }
    let x = self_.contiguous()?;
    dispatch_floating_types!(dtype, "adaptive_avg_pool3d_cpu", T => {
        pool_planes::<T>(&x.data::<T>()?, &mut out.data_mut::<T>()?, &a);
        Ok(())
    })?;
    Ok(out)
}

fn backward_planes<T: FloatElement>(go: &[T], gi: &mut [T], a: &Adaptive3d) {
    let (plane_in, plane_out) = (a.plane_in(), a.plane_out());
    let (h, w) = (a.input[1] as usize, a.input[2] as usize);
    for_each_plane(gi, plane_in, plane_in, |p, g| {
        g.fill(T::from_acc(<T::F as Num>::ZERO));
        let gp = &go[p * plane_out..][..plane_out];
        for (v, [t, y, xr]) in gp.iter().zip(a.windows()) {
            let count = ((t.1 - t.0) * (y.1 - y.0) * (xr.1 - xr.0)) as f64;
            let share = v.to_acc().div(<T::F as Num>::from_f64(count));
            for it in t.0..t.1 {
                for iy in y.0..y.1 {
                    for e in &mut g[(it * h + iy) * w..][xr.0..xr.1] {
                        *e = T::from_acc(e.to_acc().add(share));
                    }
                }
            }
        }
    });
}

/// `_adaptive_avg_pool3d_backward(Tensor grad_output, Tensor self) -> Tensor`: each output's
/// gradient divided by its window's size and added to the window's inputs (the output size
/// is `grad_output`'s).
pub fn _adaptive_avg_pool3d_backward(grad_output: &Tensor, self_: &Tensor) -> Result<Tensor> {
    const OP: &str = "adaptive_avg_pool3d_backward_out_cpu_template";
    let nd = self_.dim();
    if grad_output.dim() != nd {
        return Err(invalid(format!(
            "{OP}: Expected dimensions {nd} for `gradOutput_` but got dimensions {}",
            grad_output.dim()
        )));
    }
    if grad_output.dtype() != self_.dtype() {
        return Err(invalid(format!(
            "expected scalar type {} but found {}",
            self_.dtype().c10_name(),
            grad_output.dtype().c10_name()
        )));
    }
    let go_sizes = grad_output.sizes();
    let a = check(
        self_,
        &go_sizes[go_sizes.len().saturating_sub(3)..],
        &[grad_output],
    )?;
    if go_sizes[..nd - 3] != self_.sizes()[..nd - 3] {
        // PyTorch reads out of bounds here; a named error instead.
        return Err(invalid(format!(
            "{OP}: expected grad_output of sizes {} to match the input's leading sizes {}",
            shape_str(go_sizes),
            shape_str(self_.sizes())
        )));
    }
    let (dtype, device) = (self_.dtype(), self_.device());
    let gi = Tensor::empty_on(self_.sizes(), dtype, device)?;
    if device.is_meta() {
        return Ok(gi);
    }
    let go = grad_output.contiguous()?;
    dispatch_floating_types!(dtype, "adaptive_avg_pool3d_backward_cpu", T => {
        backward_planes::<T>(&go.data::<T>()?, &mut gi.data_mut::<T>()?, &a);
        Ok(())
    })?;
    Ok(gi)
}

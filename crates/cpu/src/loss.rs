//! Losses: `nll_loss_forward` / `nll_loss_backward` (class-index targets, optional class
//! weights, `ignore_index`) and `mse_loss` / `mse_loss_backward`, with PyTorch's reductions
//! (0 = none, 1 = mean, 2 = sum) and messages.

use switchboard_ops::structured;
use switchboard_tensor::RawOps;
use switchboard_tensor::{ScalarType, Tensor};

use crate::copy::copy_into;
use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{check_cpu, check_cpu_or_meta, invalid, not_implemented, Result};
use crate::iter::IterConfig;
use crate::structured_output::{compute_contiguous, structured_output};
use crate::{dispatch_floating_types, mean, sum};

/// PyTorch's `at::Reduction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reduction {
    None,
    Mean,
    Sum,
}

impl Reduction {
    fn parse(r: i64) -> Result<Reduction> {
        match r {
            0 => Ok(Reduction::None),
            1 => Ok(Reduction::Mean),
            2 => Ok(Reduction::Sum),
            _ => Err(invalid(format!(
                "{r} is not a valid value for reduction (expected 0 = 'none', 1 = 'mean' or 2 \
                 = 'sum')"
            ))),
        }
    }
}

/// The dtype checks of the CPU kernels, after the meta function's: PyTorch's dispatch on the
/// input's dtype, then the typed reads of the target (int64 unless Byte) and of the weight
/// and the other tensors the kernel reads in the input's dtype.
fn nll_kernel_dtypes(
    kernel: &str,
    self_: &Tensor,
    target: &Tensor,
    same_dtype_as_input: &[Option<&Tensor>],
) -> Result<()> {
    if !self_.dtype().is_floating_point() {
        return Err(not_implemented(kernel, self_.dtype()));
    }
    let mismatch = |expected: ScalarType, found: ScalarType| {
        invalid(format!(
            "expected scalar type {} but found {}",
            expected.c10_name(),
            found.c10_name()
        ))
    };
    if !matches!(target.dtype(), ScalarType::Long | ScalarType::Byte) {
        return Err(mismatch(ScalarType::Long, target.dtype()));
    }
    for t in same_dtype_as_input.iter().flatten() {
        if t.dtype() != self_.dtype() {
            return Err(mismatch(self_.dtype(), t.dtype()));
        }
    }
    Ok(())
}

/// The targets as `i64` and the class weights as `f64` (CPU tensors).
fn nll_inputs(target: &Tensor, weight: Option<&Tensor>) -> Result<(Vec<i64>, Option<Vec<f64>>)> {
    let t = target.to_vec_as::<i64>()?;
    let w = weight.map(|w| w.to_vec_as::<f64>()).transpose()?;
    Ok((t, w))
}

/// Checks one target against the class count (PyTorch's `TORCH_CHECK_INDEX`).
fn check_target(t: i64, n_classes: i64) -> Result<()> {
    if t < 0 || t >= n_classes {
        return Err(invalid(format!("Target {t} is out of bounds.")));
    }
    Ok(())
}

/// The elements of `t` (any floating dtype) at the flat row-major positions `at`, as `f64`.
fn gather(t: &Tensor, at: &[usize]) -> Result<Vec<f64>> {
    let c = t.contiguous()?;
    dispatch_floating_types!(c.dtype(), "nll_loss_out_frame", T => {
        let d = c.data::<T>()?;
        Ok(at.iter().map(|&i| d[i].to_acc().to_f64()).collect())
    })
}

/// Writes zeros into the contiguous `out`, and `vals` at the flat positions `at`.
fn scatter(out: &Tensor, at: &[usize], vals: &[f64]) -> Result<()> {
    dispatch_floating_types!(out.dtype(), "nll_loss_backward_out_frame", T => {
        let mut d = out.data_mut::<T>()?;
        d.fill(T::from_acc(<<T as CpuElement>::Acc as Num>::ZERO));
        for (&i, &v) in at.iter().zip(vals) {
            d[i] = T::from_acc(<<T as CpuElement>::Acc as Num>::from_f64(v));
        }
        Ok(())
    })
}

/// `nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt
/// ignore_index) -> (Tensor output, Tensor total_weight)`: the negative log-likelihood of
/// log-probabilities `self` (`(N, C)` or `(C,)`) at class indices `target` (`Long` or
/// `Byte`), weighted per class. `total_weight` is the sum of the weights of the targets not
/// ignored (0 for `reduction=0` on 2-d input). A mean over no targets is NaN.
///
/// ```
/// use switchboard_tensor::Tensor;
/// let logp = Tensor::from_vec(vec![-1.0f32, -2.0, -3.0, -4.0], &[2, 2]).unwrap();
/// let target = Tensor::from_vec(vec![1i64, 0], &[2]).unwrap();
/// let (loss, total) = switchboard_cpu::nll_loss_forward(&logp, &target, None, 1, -100).unwrap();
/// assert_eq!(loss.to_vec::<f32>().unwrap(), [2.5]);
/// assert_eq!(total.to_vec::<f32>().unwrap(), [2.0]);
/// ```
pub fn nll_loss_forward(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
) -> Result<(Tensor, Tensor)> {
    nll_loss_forward_impl(self_, target, weight, reduction, ignore_index, None)
}

/// `nll_loss_forward.output(..., *, Tensor(a!) output, Tensor(b!) total_weight)`.
pub fn nll_loss_forward_output(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    output: &Tensor,
    total_weight: &Tensor,
) -> Result<(Tensor, Tensor)> {
    nll_loss_forward_impl(
        self_,
        target,
        weight,
        reduction,
        ignore_index,
        Some([output, total_weight]),
    )
}

/// `nll_loss_forward` after its meta function, into `outputs` when given.
fn nll_loss_forward_impl(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    outputs: Option<[&Tensor; 2]>,
) -> Result<(Tensor, Tensor)> {
    let [loss_meta, total_meta] =
        structured::nll_loss_forward(self_, target, weight, reduction, ignore_index, outputs)?;
    check_cpu("nll_loss", loss_meta.device)?;
    let output = structured_output(loss_meta, outputs.map(|o| o[0]))?;
    let total = structured_output(total_meta, outputs.map(|o| o[1]))?;
    nll_kernel_dtypes("nll_loss_out_frame", self_, target, &[weight])?;
    let red = Reduction::parse(reduction)?;
    let per_sample = red == Reduction::None && self_.dim() == 2;
    let n_classes = self_.sizes()[self_.dim() - 1];
    let (t, w) = nll_inputs(target, weight)?;
    let class_w = |c: i64| w.as_ref().map_or(1.0, |w| w[c as usize]);
    // The samples that count: (sample, class), with every target checked.
    let batch = if self_.dim() == 1 { 1 } else { t.len() };
    let mut picked = Vec::with_capacity(batch);
    for (b, &tb) in t.iter().take(batch).enumerate() {
        if tb != ignore_index {
            check_target(tb, n_classes)?;
            picked.push((b, tb));
        }
    }
    let at: Vec<usize> = picked
        .iter()
        .map(|&(b, c)| b * n_classes as usize + c as usize)
        .collect();
    let x = gather(self_, &at)?;
    let mut total_weight = 0.0;
    let out: Vec<f64> = if per_sample {
        let mut out = vec![0.0; t.len()];
        for (&(b, c), &v) in picked.iter().zip(&x) {
            out[b] = -v * class_w(c);
        }
        out
    } else if target.numel() == 0 {
        vec![if red == Reduction::Mean {
            f64::NAN
        } else {
            0.0
        }]
    } else {
        let mut loss = 0.0;
        for (&(_, c), &v) in picked.iter().zip(&x) {
            loss -= v * class_w(c);
            total_weight += class_w(c);
        }
        if red == Reduction::Mean {
            loss /= total_weight;
        }
        vec![loss]
    };
    copy_into(&output, &Tensor::from_vec(out, output.sizes())?)?;
    copy_into(
        &total,
        &Tensor::scalar_tensor(total_weight, ScalarType::Double),
    )?;
    Ok((output, total))
}

/// `nll_loss_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, int
/// reduction, SymInt ignore_index, Tensor total_weight) -> Tensor`: the gradient with respect
/// to `self` (zero except at each sample's target class).
#[allow(clippy::too_many_arguments)]
pub fn nll_loss_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    total_weight: &Tensor,
) -> Result<Tensor> {
    nll_loss_backward_impl(
        grad_output,
        self_,
        target,
        weight,
        reduction,
        ignore_index,
        total_weight,
        None,
    )
}

/// `nll_loss_backward.grad_input(..., *, Tensor(a!) grad_input)`.
#[allow(clippy::too_many_arguments)]
pub fn nll_loss_backward_grad_input(
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    total_weight: &Tensor,
    grad_input: &Tensor,
) -> Result<Tensor> {
    nll_loss_backward_impl(
        grad_output,
        self_,
        target,
        weight,
        reduction,
        ignore_index,
        total_weight,
        Some(grad_input),
    )
}

/// `nll_loss_backward` after its meta function, into `grad_input` when given.
#[allow(clippy::too_many_arguments)]
fn nll_loss_backward_impl(
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: i64,
    ignore_index: i64,
    total_weight: &Tensor,
    grad_input: Option<&Tensor>,
) -> Result<Tensor> {
    let meta = structured::nll_loss_backward(
        grad_output,
        self_,
        target,
        weight,
        reduction,
        ignore_index,
        total_weight,
        grad_input,
    )?;
    check_cpu("nll_loss", meta.device)?;
    let result = structured_output(meta, grad_input)?;
    nll_kernel_dtypes(
        "nll_loss_backward_out_frame",
        self_,
        target,
        &[weight, Some(total_weight), Some(grad_output)],
    )?;
    let red = Reduction::parse(reduction)?;
    let per_sample = red == Reduction::None && self_.dim() == 2;
    let n_classes = self_.sizes()[self_.dim() - 1] as usize;
    let (t, w) = nll_inputs(target, weight)?;
    let class_w = |c: i64| w.as_ref().map_or(1.0, |w| w[c as usize]);
    let go = grad_output.to_vec_as::<f64>()?;
    let grad = if per_sample {
        0.0
    } else {
        let tw = total_weight.to_vec_as::<f64>()?[0];
        -if red == Reduction::Mean {
            go[0] / tw
        } else {
            go[0]
        }
    };
    let batch = if self_.dim() == 1 { 1 } else { t.len() };
    let (mut at, mut vals) = (Vec::with_capacity(batch), Vec::with_capacity(batch));
    for (b, &tb) in t.iter().take(batch).enumerate() {
        if tb == ignore_index {
            continue;
        }
        check_target(tb, n_classes as i64)?;
        at.push(b * n_classes + tb as usize);
        vals.push(if per_sample {
            -class_w(tb) * go[b]
        } else {
            class_w(tb) * grad
        });
    }
    compute_contiguous(&result, &[], |dense| scatter(dense, &at, &vals))?;
    Ok(result)
}

/// Checks `mse_loss`'s tensors' devices.
fn mse_device(tensors: &[&Tensor]) -> Result<()> {
    let device = crate::error::common_device(tensors)?;
    check_cpu_or_meta("mse_loss", device)
}

/// `mse_loss(Tensor self, Tensor target, int reduction=Mean) -> Tensor`: `(self -
/// target)^2`, broadcast and type-promoted like a binary op, then averaged (1), summed (2)
/// or kept elementwise (0). Floating dtypes.
///
/// ```
/// use switchboard_tensor::Tensor;
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 4.0], &[3]).unwrap();
/// let b = Tensor::from_vec(vec![1.0f32, 0.0, 0.0], &[3]).unwrap();
/// assert_eq!(switchboard_cpu::mse_loss(&a, &b, 2).unwrap().to_vec::<f32>().unwrap(), [20.0]);
/// ```
pub fn mse_loss(self_: &Tensor, target: &Tensor, reduction: i64) -> Result<Tensor> {
    mse_loss_impl(self_, target, reduction, None)
}

/// `mse_loss.out(Tensor self, Tensor target, int reduction=Mean, *, Tensor(a!) out)`.
pub fn mse_loss_out(
    self_: &Tensor,
    target: &Tensor,
    reduction: i64,
    out: &Tensor,
) -> Result<Tensor> {
    mse_loss_impl(self_, target, reduction, Some(out))
}

/// `mse_loss` after its meta function, into `out` when given: the squared differences, then
/// their mean or sum into the 0-dim result (PyTorch's `mean_out` / `sum_out`).
fn mse_loss_impl(
    self_: &Tensor,
    target: &Tensor,
    reduction: i64,
    out: Option<&Tensor>,
) -> Result<Tensor> {
    let meta = structured::mse_loss(self_, target, reduction, out)?;
    check_cpu("mse_loss", meta.device)?;
    let result = structured_output(meta, out)?;
    let red = Reduction::parse(reduction)?;
    let squared = |into: Option<&Tensor>| -> Result<Tensor> {
        let iter = IterConfig::new("mse_loss")
            .maybe_out(into)
            .input(self_)
            .input(target)
            .build()?;
        dispatch_floating_types!(iter.common_dtype(), "mse_cpu", T => {
            iter.for_each2(|a: T, b: T| {
                let d = a.to_acc().sub(b.to_acc());
                T::from_acc(d.mul(d))
            })
        })?;
        iter.finish()
    };
    if red == Reduction::None {
        return squared(Some(&result));
    }
    let loss = squared(None)?;
    let reduced = match red {
        Reduction::Mean => mean(&loss, None)?,
        _ => sum(&loss, None)?,
    };
    copy_into(&result, &reduced)?;
    Ok(result)
}

/// `mse_loss_backward(Tensor grad_output, Tensor self, Tensor target, int reduction) ->
/// Tensor`: `norm * (self - target) * grad_output` with `norm = 2 / numel(self)` for a mean
/// and 2 otherwise, shaped like `self` (contiguous).
pub fn mse_loss_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    reduction: i64,
) -> Result<Tensor> {
    mse_device(&[grad_output, self_, target])?;
    let red = Reduction::parse(reduction)?;
    let norm = if red == Reduction::Mean {
        2.0 / self_.numel() as f64
    } else {
        2.0
    };
    let gi = Tensor::zeros_on(self_.sizes(), self_.dtype(), self_.device())?;
    let iter = IterConfig::new("mse_loss_backward")
        .out(&gi)
        .input(self_)
        .input(target)
        .input(grad_output)
        .build()?;
    dispatch_floating_types!(iter.common_dtype(), "mse_backward_cpu_out", T => {
        let n = <<T as CpuElement>::Acc as Num>::from_f64(norm);
        iter.for_each3(|x: T, y: T, g: T| {
            T::from_acc(n.mul(x.to_acc().sub(y.to_acc())).mul(g.to_acc()))
        })
    })?;
    iter.finish()
}

#[cfg(test)]
#[path = "loss_tests.rs"]
mod tests;

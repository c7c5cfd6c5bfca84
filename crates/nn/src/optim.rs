//! Optimizers: [`Sgd`] and [`Adam`] (with AdamW), PyTorch's `torch.optim` update rules (the
//! single-tensor, non-foreach implementations) as dispatched in-place tensor operators.

use switchboard_autograd::{no_grad, AutogradTensor};
use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use crate::module::value_error;
use crate::norm::py_float;

/// An optimizer over a fixed list of parameters (`torch.optim.Optimizer`).
pub trait Optimizer {
    /// One update of every parameter that has a gradient (under `no_grad`).
    fn step(&mut self) -> Result<()>;

    /// The parameters.
    fn parameters(&self) -> &[Tensor];

    /// Drops the gradients (`zero_grad(set_to_none=True)`, PyTorch's default).
    fn zero_grad(&self) {
        for p in self.parameters() {
            p.set_grad(None);
        }
    }

    /// The learning rate.
    fn lr(&self) -> f64;

    /// Changes the learning rate (for schedules).
    fn set_lr(&mut self, lr: f64);
}

/// `torch.optim.SGD`: stochastic gradient descent with optional momentum, dampening, weight
/// decay (L2, added to the gradient) and Nesterov momentum.
///
/// Per parameter `p` with gradient `g`:
/// ```text
/// g = g + weight_decay * p
/// buf = g                                  (first step)
/// buf = momentum * buf + (1 - dampening) * g
/// g = g + momentum * buf  (nesterov)  or  g = buf
/// p = p - lr * g
/// ```
pub struct Sgd {
    params: Vec<Tensor>,
    lr: f64,
    momentum: f64,
    dampening: f64,
    weight_decay: f64,
    nesterov: bool,
    buffers: Vec<Option<Tensor>>,
}

impl Sgd {
    /// Plain SGD with learning rate `lr` (no momentum, no weight decay).
    pub fn new(params: Vec<Tensor>, lr: f64) -> Sgd {
        let n = params.len();
        Sgd {
            params,
            lr,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            buffers: vec![None; n],
        }
    }

    /// Sets the momentum factor (default 0).
    pub fn momentum(mut self, momentum: f64) -> Sgd {
        self.momentum = momentum;
        self
    }

    /// Sets the dampening of the momentum (default 0).
    pub fn dampening(mut self, dampening: f64) -> Sgd {
        self.dampening = dampening;
        self
    }

    /// Sets the L2 weight decay (default 0).
    pub fn weight_decay(mut self, weight_decay: f64) -> Sgd {
        self.weight_decay = weight_decay;
        self
    }

    /// Turns Nesterov momentum on or off (default off). PyTorch requires a momentum and no
    /// dampening for it; [`Sgd::step`] reports the same error otherwise.
    pub fn nesterov(mut self, nesterov: bool) -> Sgd {
        self.nesterov = nesterov;
        self
    }
}

impl Optimizer for Sgd {
    fn step(&mut self) -> Result<()> {
        if self.nesterov && (self.momentum <= 0.0 || self.dampening != 0.0) {
            return Err(switchboard_tensor::TensorError::invalid(
                "Nesterov momentum requires a momentum and zero dampening",
            )
            .into());
        }
        let _guard = no_grad();
        for (p, buf) in self.params.iter().zip(&mut self.buffers) {
            let Some(mut g) = p.grad() else { continue };
            if self.weight_decay != 0.0 {
                g = ops::add_with(&g, p, ops::AddOptions::default().alpha(self.weight_decay))?;
            }
            if self.momentum != 0.0 {
                // PyTorch's `buf.mul_(momentum).add_(grad, alpha=1 - dampening)`: the same two
                // operators, so traces and rounding are PyTorch's.
                let b = match buf {
                    None => buf.insert(ops::clone(&g)?.detach()),
                    Some(b) => {
                        ops::mul_(b, &Tensor::wrapped_scalar(self.momentum))?;
                        ops::add_with_(
                            b,
                            &g,
                            ops::AddInplaceOptions::default().alpha(1.0 - self.dampening),
                        )?;
                        b
                    }
                };
                g = if self.nesterov {
                    ops::add_with(&g, b, ops::AddOptions::default().alpha(self.momentum))?
                } else {
                    b.clone()
                };
            }
            ops::add_with_(p, &g, ops::AddInplaceOptions::default().alpha(-self.lr))?;
        }
        Ok(())
    }

    fn parameters(&self) -> &[Tensor] {
        &self.params
    }

    fn lr(&self) -> f64 {
        self.lr
    }

    fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }
}

/// `torch.optim.Adam`, and `torch.optim.AdamW` ([`Adam::adamw`]: the same with decoupled
/// weight decay, as PyTorch 2.15 defines it), optionally AMSGrad.
///
/// Per parameter `p` with gradient `g`, at step `t` (from 1):
/// ```text
/// p = p * (1 - lr * weight_decay)   (decoupled, AdamW)  or  g = g + weight_decay * p  (Adam)
/// m = beta1 * m + (1 - beta1) * g
/// v = beta2 * v + (1 - beta2) * g * g
/// v_max = max(v_max, v)                     (AMSGrad: v_max replaces v below)
/// p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
/// ```
pub struct Adam {
    params: Vec<Tensor>,
    lr: f64,
    betas: (f64, f64),
    eps: f64,
    weight_decay: f64,
    decoupled_weight_decay: bool,
    amsgrad: bool,
    state: Vec<Option<AdamState>>,
}

struct AdamState {
    step: i32,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    /// AMSGrad's running maximum of `exp_avg_sq`.
    max_exp_avg_sq: Option<Tensor>,
}

impl Adam {
    /// Adam with learning rate `lr` and PyTorch's defaults: betas (0.9, 0.999), eps 1e-8,
    /// no weight decay.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Adam {
        let n = params.len();
        Adam {
            params,
            lr,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled_weight_decay: false,
            amsgrad: false,
            state: (0..n).map(|_| None).collect(),
        }
    }

    /// `torch.optim.AdamW` with learning rate `lr` and PyTorch's defaults: betas (0.9, 0.999),
    /// eps 1e-8, decoupled weight decay 0.01, no AMSGrad.
    pub fn adamw(params: Vec<Tensor>, lr: f64) -> Adam {
        Adam {
            weight_decay: 1e-2,
            decoupled_weight_decay: true,
            ..Adam::new(params, lr)
        }
    }

    /// Uses AMSGrad's running maximum of the second moment (default off).
    pub fn amsgrad(mut self, amsgrad: bool) -> Adam {
        self.amsgrad = amsgrad;
        self
    }

    /// Decays the parameters directly (`p *= 1 - lr * weight_decay`, AdamW) instead of adding
    /// the L2 term to the gradient (Adam).
    pub fn decoupled_weight_decay(mut self, decoupled: bool) -> Adam {
        self.decoupled_weight_decay = decoupled;
        self
    }

    /// PyTorch's checks of the hyperparameters (its `ValueError`s, which PyTorch raises when
    /// the optimizer is made and [`Optimizer::step`] returns here).
    fn check(&self) -> Result<()> {
        let (beta1, beta2) = self.betas;
        let bad = if !(0.0..).contains(&self.lr) {
            Some(format!("Invalid learning rate: {}", py_float(self.lr)))
        } else if !(0.0..).contains(&self.eps) {
            Some(format!("Invalid epsilon value: {}", py_float(self.eps)))
        } else if !(0.0..1.0).contains(&beta1) {
            Some(format!(
                "Invalid beta parameter at index 0: {}",
                py_float(beta1)
            ))
        } else if !(0.0..1.0).contains(&beta2) {
            Some(format!(
                "Invalid beta parameter at index 1: {}",
                py_float(beta2)
            ))
        } else if !(0.0..).contains(&self.weight_decay) {
            Some(format!(
                "Invalid weight_decay value: {}",
                py_float(self.weight_decay)
            ))
        } else {
            None
        };
        match bad {
            Some(msg) => Err(value_error(msg)),
            None => Ok(()),
        }
    }

    /// Sets the coefficients of the running averages of the gradient and its square.
    pub fn betas(mut self, beta1: f64, beta2: f64) -> Adam {
        self.betas = (beta1, beta2);
        self
    }

    /// Sets the term added to the denominator.
    pub fn eps(mut self, eps: f64) -> Adam {
        self.eps = eps;
        self
    }

    /// Sets the L2 weight decay.
    pub fn weight_decay(mut self, weight_decay: f64) -> Adam {
        self.weight_decay = weight_decay;
        self
    }
}

impl Optimizer for Adam {
    fn step(&mut self) -> Result<()> {
        self.check()?;
        let _guard = no_grad();
        let (beta1, beta2) = self.betas;
        for (p, state) in self.params.iter().zip(&mut self.state) {
            let Some(mut g) = p.grad() else { continue };
            let s = match state {
                Some(s) => s,
                None => state.insert(AdamState {
                    step: 0,
                    exp_avg: ops::zeros_like(p)?,
                    exp_avg_sq: ops::zeros_like(p)?,
                    max_exp_avg_sq: self.amsgrad.then(|| ops::zeros_like(p)).transpose()?,
                }),
            };
            s.step += 1;
            // PyTorch's single-tensor Adam, operator for operator (a Python number as a
            // wrapped number, as its binding passes it).
            if self.weight_decay != 0.0 {
                if self.decoupled_weight_decay {
                    let decay = 1.0 - self.lr * self.weight_decay;
                    ops::mul_(p, &Tensor::wrapped_scalar(decay))?;
                } else {
                    g = ops::add_with(&g, p, ops::AddOptions::default().alpha(self.weight_decay))?;
                }
            }
            ops::lerp_(&s.exp_avg, &g, 1.0 - beta1)?;
            ops::mul_(&s.exp_avg_sq, &Tensor::wrapped_scalar(beta2))?;
            ops::addcmul_with_(
                &s.exp_avg_sq,
                &g,
                &g,
                ops::AddcmulInplaceOptions::default().value(1.0 - beta2),
            )?;
            let bias_correction1 = 1.0 - beta1.powf(f64::from(s.step));
            let bias_correction2 = 1.0 - beta2.powf(f64::from(s.step));
            let step_size = self.lr / bias_correction1;
            // denom = sqrt(v) / sqrt(bias_correction2) + eps, with AMSGrad's maximum
            // (`torch.maximum(..., out=max_exp_avg_sq)`) for v.
            let second = match &s.max_exp_avg_sq {
                Some(max) => ops::maximum_out(max, &s.exp_avg_sq, max)?,
                None => s.exp_avg_sq.clone(),
            };
            let denom = ops::div(
                &ops::sqrt(&second)?,
                &Tensor::wrapped_scalar(bias_correction2.powf(0.5)),
            )?;
            ops::add_(&denom, &Tensor::wrapped_scalar(self.eps))?;
            ops::addcdiv_with_(
                p,
                &s.exp_avg,
                &denom,
                ops::AddcdivInplaceOptions::default().value(-step_size),
            )?;
        }
        Ok(())
    }

    fn parameters(&self) -> &[Tensor] {
        &self.params
    }

    fn lr(&self) -> f64 {
        self.lr
    }

    fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Linear, Module};
    use switchboard_cpu as _;
    use switchboard_tensor::Generator;

    fn param(v: &[f32]) -> Tensor {
        Tensor::from_vec(v.to_vec(), &[v.len() as i64])
            .unwrap()
            .requires_grad_(true)
            .unwrap()
    }

    /// Sets each parameter's gradient by hand (no autograd needed) and steps.
    fn step_with(opt: &mut dyn Optimizer, grad: impl Fn(&[f32]) -> Vec<f32>) -> Vec<Vec<f32>> {
        for p in opt.parameters() {
            let v = p.to_vec::<f32>().unwrap();
            let g = Tensor::from_vec(grad(&v), p.sizes()).unwrap();
            p.set_grad(Some(g));
        }
        opt.step().unwrap();
        opt.parameters()
            .iter()
            .map(|p| p.to_vec::<f32>().unwrap())
            .collect()
    }

    fn close(a: &[f32], b: &[f64]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((*x as f64 - y).abs() < 1e-6, "{a:?} vs {b:?}");
        }
    }

    fn square_grad(w: &[f32]) -> Vec<f32> {
        w.iter().map(|x| 2.0 * x).collect()
    }

    // Expected values: PyTorch's update rules evaluated by hand (in f64) for loss = sum(w^2).

    #[test]
    fn sgd_momentum_weight_decay() {
        let mut opt = Sgd::new(vec![param(&[1.0, 2.0])], 0.1)
            .momentum(0.9)
            .weight_decay(0.01);
        close(&step_with(&mut opt, square_grad)[0], &[0.799, 1.598]);
        close(&step_with(&mut opt, square_grad)[0], &[0.457501, 0.915002]);
    }

    #[test]
    fn sgd_plain_nesterov_dampening() {
        let mut plain = Sgd::new(vec![param(&[1.0, 2.0])], 0.1);
        close(&step_with(&mut plain, square_grad)[0], &[0.8, 1.6]);
        close(&step_with(&mut plain, square_grad)[0], &[0.64, 1.28]);

        let mut nesterov = Sgd::new(vec![param(&[1.0, 2.0])], 0.1)
            .momentum(0.9)
            .nesterov(true);
        close(&step_with(&mut nesterov, square_grad)[0], &[0.62, 1.24]);
        close(&step_with(&mut nesterov, square_grad)[0], &[0.2224, 0.4448]);

        let mut damp = Sgd::new(vec![param(&[1.0, 2.0])], 0.1)
            .momentum(0.9)
            .dampening(0.5);
        close(&step_with(&mut damp, square_grad)[0], &[0.8, 1.6]);
        close(&step_with(&mut damp, square_grad)[0], &[0.54, 1.08]);

        let mut bad = Sgd::new(vec![param(&[1.0])], 0.1).nesterov(true);
        assert!(bad.step().is_err());
    }

    #[test]
    fn sgd_skips_parameters_without_grad() {
        let p = param(&[1.0, 2.0]);
        let mut opt = Sgd::new(vec![p.clone()], 0.1).momentum(0.9);
        opt.step().unwrap();
        assert_eq!(p.to_vec::<f32>().unwrap(), [1.0, 2.0]);
        p.set_grad(Some(Tensor::from_vec(vec![1.0f32, 1.0], &[2]).unwrap()));
        opt.zero_grad();
        assert!(p.grad().is_none());
    }

    #[test]
    fn adam_default_three_steps() {
        let mut opt = Adam::new(vec![param(&[1.0, -2.0, 0.5])], 0.1);
        close(
            &step_with(&mut opt, square_grad)[0],
            &[0.9, -1.9, 0.400000001],
        );
        close(
            &step_with(&mut opt, square_grad)[0],
            &[0.800412229, -1.800166486, 0.301187422],
        );
        close(
            &step_with(&mut opt, square_grad)[0],
            &[0.701586273, -1.700623392, 0.204871253],
        );
    }

    #[test]
    fn adam_weight_decay_betas_eps() {
        // loss = sum(c * w), c = [1, -2, 3]: the gradient is c + weight_decay * w.
        let c = [1.0f32, -2.0, 3.0];
        let lin = |_: &[f32]| c.to_vec();
        let mut opt = Adam::new(vec![param(&[1.0, -2.0, 0.5])], 0.1).weight_decay(0.5);
        close(&step_with(&mut opt, lin)[0], &[0.900000001, -1.9, 0.4]);
        close(
            &step_with(&mut opt, lin)[0],
            &[0.800102708, -1.800047338, 0.300043416],
        );
        close(
            &step_with(&mut opt, lin)[0],
            &[0.700381525, -1.700174571, 0.200160024],
        );

        let mut opt = Adam::new(vec![param(&[1.0, -2.0, 0.5])], 0.01)
            .betas(0.5, 0.9)
            .eps(0.1);
        close(
            &step_with(&mut opt, square_grad)[0],
            &[0.990476190, -1.990243902, 0.490909091],
        );
        close(
            &step_with(&mut opt, square_grad)[0],
            &[0.980967560, -1.980495142, 0.481849908],
        );
    }

    // Expected values: torch 2.15's AdamW with the same gradients (2 w each step).

    #[test]
    fn adamw_defaults_decouple_the_weight_decay() {
        let mut opt = Adam::adamw(vec![param(&[1.0, -2.0, 0.5])], 0.1);
        close(
            &step_with(&mut opt, square_grad)[0],
            &[0.899000049, -1.898000002, 0.399500012],
        );
        close(
            &step_with(&mut opt, square_grad)[0],
            &[0.798519075, -1.796272635, 0.300297856],
        );
        close(
            &step_with(&mut opt, square_grad)[0],
            &[0.698911250, -1.694944620, 0.203712404],
        );
    }

    #[test]
    fn adamw_amsgrad_keeps_the_largest_second_moment() {
        // AdamW(lr=0.1, betas=(0.9, 0.5), weight_decay=0.1, amsgrad=True): the shrinking
        // gradients make the second moment fall, so the maximum differs at step 3.
        let make = |amsgrad| {
            Adam::adamw(vec![param(&[1.0, -2.0, 0.5])], 0.1)
                .betas(0.9, 0.5)
                .weight_decay(0.1)
                .amsgrad(amsgrad)
        };
        let mut opt = make(true);
        close(
            &step_with(&mut opt, square_grad)[0],
            &[0.889999986, -1.879999995, 0.395000011],
        );
        close(
            &step_with(&mut opt, square_grad)[0],
            &[0.779592752, -1.760366559, 0.288301349],
        );
        close(
            &step_with(&mut opt, square_grad)[0],
            &[0.669135392, -1.640531182, 0.188842058],
        );
        let mut opt = make(false);
        step_with(&mut opt, square_grad);
        step_with(&mut opt, square_grad);
        close(
            &step_with(&mut opt, square_grad)[0],
            &[0.667579830, -1.640531182, 0.177155912],
        );
    }

    #[test]
    fn adam_refuses_pytorchs_invalid_hyperparameters() {
        let p = || vec![param(&[1.0])];
        let cases = [
            (Adam::adamw(p(), -1.0), "Invalid learning rate: -1.0"),
            (
                Adam::adamw(p(), 0.1).eps(-1.0),
                "Invalid epsilon value: -1.0",
            ),
            (
                Adam::adamw(p(), 0.1).betas(1.0, 0.9),
                "Invalid beta parameter at index 0: 1.0",
            ),
            (
                Adam::adamw(p(), 0.1).betas(0.9, 1.5),
                "Invalid beta parameter at index 1: 1.5",
            ),
            (
                Adam::new(p(), 0.1).weight_decay(-0.5),
                "Invalid weight_decay value: -0.5",
            ),
        ];
        for (mut opt, msg) in cases {
            let e = opt.step().err().unwrap().to_string();
            assert!(e.contains(msg), "{e}");
        }
    }

    /// A tiny regression trained end to end with autograd: y = 3x - 2 from 16 points.
    #[test]
    fn linear_regression_trains() {
        let xs: Vec<f32> = (0..16).map(|i| i as f32 / 8.0 - 1.0).collect();
        let ys: Vec<f32> = xs.iter().map(|x| 3.0 * x - 2.0).collect();
        let x = Tensor::from_vec(xs, &[16, 1]).unwrap();
        let y = Tensor::from_vec(ys, &[16, 1]).unwrap();
        for adam in [false, true] {
            let model = Linear::new(1, 1, true, &Generator::new(0)).unwrap();
            let mut opt: Box<dyn Optimizer> = if adam {
                Box::new(Adam::new(model.parameters(), 0.1))
            } else {
                Box::new(Sgd::new(model.parameters(), 0.1).momentum(0.9))
            };
            let mut last = f64::INFINITY;
            for _ in 0..300 {
                let pred = model.forward(&x).unwrap();
                let d = ops::sub(&pred, &y).unwrap();
                let loss = ops::mean(&ops::mul(&d, &d).unwrap()).unwrap();
                opt.zero_grad();
                loss.backward().unwrap();
                opt.step().unwrap();
                last = loss.item().unwrap().to_f64();
            }
            assert!(last < 1e-4, "adam={adam}: loss {last}");
            let w = model.weight.to_vec::<f32>().unwrap()[0];
            let b = model.bias.as_ref().unwrap().to_vec::<f32>().unwrap()[0];
            assert!((w - 3.0).abs() < 1e-2 && (b + 2.0).abs() < 1e-2, "{w} {b}");
        }
    }
}

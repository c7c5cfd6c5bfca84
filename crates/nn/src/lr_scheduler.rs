//! Learning-rate schedules, after `torch.optim.lr_scheduler`: [`LambdaLR`] and the cosine
//! decay with linear warm-up built on it ([`cosine_schedule_with_warmup`]).

use crate::optim::Optimizer;

/// `torch.optim.lr_scheduler.LambdaLR`: the learning rate at step `t` is `initial_lr *
/// lambda(t)`, where `initial_lr` is the optimizer's rate when the schedule was made and `t`
/// counts [`LambdaLR::step`] calls (one per optimizer step, after it). Making the schedule
/// sets the rate for step 0.
pub struct LambdaLR {
    initial_lr: f64,
    last_epoch: u64,
    last_lr: f64,
    lambda: Box<dyn Fn(u64) -> f64 + Send + Sync>,
}

impl LambdaLR {
    /// A schedule of `optimizer`'s rate; sets it to `initial_lr * lambda(0)`.
    pub fn new(
        optimizer: &mut dyn Optimizer,
        lambda: impl Fn(u64) -> f64 + Send + Sync + 'static,
    ) -> LambdaLR {
        let initial_lr = optimizer.lr();
        let mut schedule = LambdaLR {
            initial_lr,
            last_epoch: 0,
            last_lr: initial_lr,
            lambda: Box::new(lambda),
        };
        schedule.apply(optimizer);
        schedule
    }

    fn apply(&mut self, optimizer: &mut dyn Optimizer) {
        self.last_lr = self.initial_lr * (self.lambda)(self.last_epoch);
        optimizer.set_lr(self.last_lr);
    }

    /// Moves to the next step and sets `optimizer`'s rate for it.
    pub fn step(&mut self, optimizer: &mut dyn Optimizer) {
        self.last_epoch = self.last_epoch.saturating_add(1);
        self.apply(optimizer);
    }

    /// The rate last set (`get_last_lr()`).
    pub fn last_lr(&self) -> f64 {
        self.last_lr
    }

    /// The steps taken (`last_epoch`).
    pub fn last_epoch(&self) -> u64 {
        self.last_epoch
    }
}

/// The multiplier of the cosine schedule with warm-up at `step`: linear from 0 to 1 over
/// `num_warmup_steps`, then half a cosine period from 1 down to 0 at `num_training_steps`
/// (and, like the formula it follows, back up past it; clamped at 0 from below).
///
/// Note [Cosine schedule with warm-up]
/// This is `get_cosine_schedule_with_warmup` (num_cycles 0.5) as a `LambdaLR` lambda:
/// `step / max(1, warmup)` during warm-up, then
/// `max(0, 0.5 * (1 + cos(pi * 2 * 0.5 * progress)))` with
/// `progress = (step - warmup) / max(1, total - warmup)`.
pub fn cosine_with_warmup_factor(step: u64, num_warmup_steps: u64, num_training_steps: u64) -> f64 {
    if step < num_warmup_steps {
        return step as f64 / num_warmup_steps.max(1) as f64;
    }
    let progress = (step - num_warmup_steps) as f64
        / num_training_steps.saturating_sub(num_warmup_steps).max(1) as f64;
    (0.5 * (1.0 + (std::f64::consts::PI * 0.5 * 2.0 * progress).cos())).max(0.0)
}

/// A [`LambdaLR`] of [`cosine_with_warmup_factor`]: the optimizer's rate rises linearly to its
/// current value over `num_warmup_steps`, then decays to 0 along a cosine at
/// `num_training_steps`.
pub fn cosine_schedule_with_warmup(
    optimizer: &mut dyn Optimizer,
    num_warmup_steps: u64,
    num_training_steps: u64,
) -> LambdaLR {
    LambdaLR::new(optimizer, move |step| {
        cosine_with_warmup_factor(step, num_warmup_steps, num_training_steps)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::Adam;
    use switchboard_autograd::AutogradTensor;
    use switchboard_cpu as _;
    use switchboard_tensor::Tensor;

    #[test]
    fn cosine_with_warmup_matches_pytorch() {
        // torch 2.15: LambdaLR(AdamW([p], lr=0.1), get_cosine_schedule_with_warmup's lambda
        // with 3 warm-up and 10 training steps); the rate after making it and after each of
        // 11 `opt.step(); sched.step()`.
        let expected = [
            0.0,
            0.03333333333333333,
            0.06666666666666667,
            0.1,
            0.09504844339512096,
            0.08117449009293669,
            0.06112604669781572,
            0.03887395330218429,
            0.018825509907063328,
            0.004951556604879049,
            0.0,
            0.004951556604879043,
        ];
        let p = Tensor::from_vec(vec![1.0f32], &[1])
            .unwrap()
            .requires_grad_(true)
            .unwrap();
        let mut opt = Adam::adamw(vec![p], 0.1);
        let mut schedule = cosine_schedule_with_warmup(&mut opt, 3, 10);
        let mut lrs = vec![opt.lr()];
        for _ in 0..11 {
            opt.step().unwrap();
            schedule.step(&mut opt);
            lrs.push(opt.lr());
        }
        for (a, b) in lrs.iter().zip(expected) {
            assert!((a - b).abs() < 1e-15, "{lrs:?}");
        }
        assert_eq!(schedule.last_lr(), opt.lr());
        assert_eq!(schedule.last_epoch(), 11);
        // No warm-up, and a total within the warm-up: no division by zero.
        assert_eq!(cosine_with_warmup_factor(0, 0, 0), 1.0);
        assert_eq!(cosine_with_warmup_factor(5, 10, 3), 0.5);
    }
}

//! Why the training loss stopped being finite, in words that name the option to change.

use super::{OptimizerKind, TrainConfig};

// Note [Divergence hints]
// A non-finite loss has one of a few causes, told apart from the configuration alone (the data
// is checked finite and scaled into [-1, 1] before training, and a weight decay beyond
// float32's range is refused with the options):
// - with SGD, the decay alone overshoots: each step multiplies a weight by `1 - lr * wd`
//   (momentum `m` feeding back `m` of the previous step), which grows without bound once
//   `lr * wd >= 2 * (1 + m)`, the stability limit of that linear recurrence;
// - otherwise the gradient steps grew the weights without bound: the learning rate is too high
//   for this data and model.
// Only the last one is answered with "lower --lr".

/// The message for a loss that became `loss` in `epoch`: what diverged and the option that
/// caused it.
pub(super) fn divergence_message(cfg: &TrainConfig, loss: f64, epoch: usize) -> String {
    let (lr, wd) = (cfg.learning_rate(), cfg.weight_decay);
    let (lr_text, wd_text) = (number(lr), number(wd));
    let cause = if cfg.optimizer == OptimizerKind::Sgd && lr * wd >= 2.0 * (1.0 + cfg.momentum) {
        format!(
            "with --lr {lr_text} and --weight-decay {wd_text}, each SGD step's decay \
             overshoots (lr * weight_decay = {}, stable below 2 * (1 + momentum) = {}): lower \
             --weight-decay or --lr",
            number(lr * wd),
            number(2.0 * (1.0 + cfg.momentum))
        )
    } else {
        format!("the updates grew the weights without bound at --lr {lr_text}: lower --lr")
    };
    format!("the loss diverged ({loss}) at epoch {epoch}: {cause}")
}

/// `v` as written on a command line: `0.05`, `1e308` (not 309 digits).
fn number(v: f64) -> String {
    if v != 0.0 && !(1e-4..1e16).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hint_names_the_cause() {
        let cfg = |optimizer, lr, weight_decay| TrainConfig {
            optimizer,
            lr: Some(lr),
            weight_decay,
            ..TrainConfig::default()
        };
        let m = divergence_message(&cfg(OptimizerKind::Sgd, 1.0, 4.0), f64::INFINITY, 2);
        assert!(m.contains("decay overshoots"), "{m}");
        let m = divergence_message(&cfg(OptimizerKind::Adam, 1.0, 4.0), f64::INFINITY, 2);
        assert!(m.ends_with("lower --lr"), "{m}");
        let m = divergence_message(&cfg(OptimizerKind::Sgd, 1e3, 5e-4), f64::NAN, 3);
        assert_eq!(
            m,
            "the loss diverged (NaN) at epoch 3: the updates grew the weights without bound at \
             --lr 1000: lower --lr"
        );
    }
}

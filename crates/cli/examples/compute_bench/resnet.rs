//! `resnet_train_step`: a small ResNet of basic blocks in training mode.

use switchboard_autograd::AutogradTensor;
use switchboard_nn::{Module, Optimizer, ResNet, Sgd};
use switchboard_ops as ops;

use crate::measure::{data, measure, BoxError};

/// Stage widths and blocks per stage: three stages of two basic blocks.
const WIDTHS: [i64; 3] = [16, 32, 64];
const BLOCKS: [usize; 3] = [2, 2, 2];

pub fn resnet_train_step(steps: usize, threads: usize) -> Result<(), BoxError> {
    // Training mode (a new model's): batch statistics, running statistics updated.
    let model = ResNet::new(3, 10, &WIDTHS, &BLOCKS, 0)?;
    let mut opt = Sgd::new(model.parameters(), 0.1)
        .momentum(0.9)
        .weight_decay(5e-4);
    let (x, y) = data(32, &[3, 32, 32])?;
    let describe = serde_json::json!({
        "model": "ResNet stem16 + 3 stages x 2 basic blocks (16, 32, 64), batch norm, avgpool, fc10",
        "batch": 32,
        "loss": "cross_entropy",
        "optimizer": "SGD(lr=0.1, momentum=0.9, weight_decay=5e-4)",
    });
    measure("resnet_train_step", describe, steps, threads, |ph| {
        ph.start();
        let loss = ops::cross_entropy_loss(&model.forward(&x)?, &y)?;
        ph.end(0);
        loss.backward()?;
        ph.end(1);
        opt.step()?;
        opt.zero_grad();
        ph.end(2);
        Ok(loss.item()?.to_f64())
    })
}

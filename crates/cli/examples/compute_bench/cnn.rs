//! `cnn_train_step`: PyTorch's MNIST example network without its dropouts.

use switchboard_autograd::{no_grad, AutogradTensor};
use switchboard_nn::{Linear, Module, Optimizer, Sgd};
use switchboard_ops as ops;
use switchboard_tensor::{Generator, ScalarType, Tensor};

use crate::measure::{data, measure, BoxError};

/// The CNN of `cnn_train_step`, initialized as PyTorch's modules are (kaiming-uniform with
/// `a = sqrt(5)`: `U(-1/sqrt(fan_in), 1/sqrt(fan_in))` for weights and biases).
struct Cnn {
    conv1: (Tensor, Tensor),
    conv2: (Tensor, Tensor),
    fc1: Linear,
    fc2: Linear,
}

impl Cnn {
    fn new(seed: u64) -> Result<Cnn, BoxError> {
        let gen = Generator::new(seed);
        let conv = |cin: i64, cout: i64| -> Result<(Tensor, Tensor), BoxError> {
            let bound = 1.0 / ((cin * 9) as f64).sqrt();
            let _g = no_grad();
            let uniform = |sizes: &[i64]| -> Result<Tensor, BoxError> {
                let t =
                    ops::empty_with(sizes, ops::EmptyOptions::default().dtype(ScalarType::Float))?;
                ops::uniform_with_(
                    &t,
                    ops::UniformInplaceOptions::default()
                        .from(-bound)
                        .to(bound)
                        .generator(&gen),
                )?;
                Ok(t.requires_grad_(true)?)
            };
            Ok((uniform(&[cout, cin, 3, 3])?, uniform(&[cout])?))
        };
        Ok(Cnn {
            conv1: conv(1, 32)?,
            conv2: conv(32, 64)?,
            fc1: Linear::new(9216, 128, true, &gen)?,
            fc2: Linear::new(128, 10, true, &gen)?,
        })
    }

    /// The log-probabilities of the classes.
    fn forward(&self, x: &Tensor) -> Result<Tensor, BoxError> {
        let conv = |x: &Tensor, (w, b): &(Tensor, Tensor)| {
            ops::conv2d_with(x, w, ops::Conv2dOptions::default().bias(b))
        };
        let x = ops::relu(&conv(x, &self.conv1)?)?;
        let x = ops::relu(&conv(&x, &self.conv2)?)?;
        let x = ops::max_pool2d(&x, &[2])?;
        let x = ops::flatten_with(&x, ops::FlattenOptions::default().start_dim(1))?;
        let x = ops::relu(&self.fc1.forward(&x)?)?;
        Ok(ops::log_softmax(&self.fc2.forward(&x)?, 1)?)
    }

    fn parameters(&self) -> Vec<Tensor> {
        let (c1, c2) = (&self.conv1, &self.conv2);
        [&c1.0, &c1.1, &c2.0, &c2.1]
            .into_iter()
            .cloned()
            .chain(self.fc1.parameters())
            .chain(self.fc2.parameters())
            .collect()
    }
}

pub fn cnn_train_step(steps: usize, threads: usize) -> Result<(), BoxError> {
    let model = Cnn::new(0)?;
    let mut opt = Sgd::new(model.parameters(), 0.01).momentum(0.9);
    let (x, y) = data(64, &[1, 28, 28])?;
    let describe = serde_json::json!({
        "model": "MNIST CNN conv32-conv64-maxpool-fc128-fc10 (no dropout)",
        "batch": 64,
        "loss": "log_softmax + nll_loss",
        "optimizer": "SGD(lr=0.01, momentum=0.9)",
    });
    measure("cnn_train_step", describe, steps, threads, |ph| {
        ph.start();
        let loss = ops::nll_loss(&model.forward(&x)?, &y)?;
        ph.end(0);
        loss.backward()?;
        ph.end(1);
        opt.step()?;
        opt.zero_grad();
        ph.end(2);
        Ok(loss.item()?.to_f64())
    })
}

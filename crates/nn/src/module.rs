//! Modules: [`Module`] (with its training mode), [`Linear`], [`ReLU`], [`Sequential`],
//! [`mlp`].

use switchboard_autograd::{no_grad, AutogradTensor};
use switchboard_dispatcher::{DispatchError, DispatchErrorKind, Result};
use switchboard_ops as ops;
use switchboard_tensor::{Device, Generator, Tensor};

use crate::init::{default_bound, dimension, uniform_parameter};

/// A layer or a model (`torch.nn.Module`): a function of one tensor with trainable
/// parameters.
pub trait Module: Send + Sync {
    /// Computes the output (autograd records the graph when a parameter requires grad).
    fn forward(&self, input: &Tensor) -> Result<Tensor>;

    /// The trainable parameters, in a fixed order (handles to the same tensors).
    fn parameters(&self) -> Vec<Tensor>;

    /// The parameters with their dotted names (`0.weight`, `0.bias`, ...).
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.parameters()
            .into_iter()
            .enumerate()
            .map(|(i, p)| (i.to_string(), p))
            .collect()
    }

    /// Drops the parameters' gradients (`zero_grad(set_to_none=True)`, PyTorch's default).
    fn zero_grad(&self) {
        for p in self.parameters() {
            p.set_grad(None);
        }
    }

    /// A short description, as PyTorch prints modules.
    fn describe(&self) -> String;

    /// The buffers (state that is not trained: `running_mean`, ...) with their dotted names,
    /// as `named_buffers()`. Modules without buffers keep this default.
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        Vec::new()
    }

    /// Sets training mode (`module.train(mode)`), recursively: batch norm normalizes with the
    /// batch statistics and updates its running ones in training, and uses the running ones
    /// in evaluation. Modules whose computation does not depend on the mode keep this default,
    /// which does nothing.
    fn train(&mut self, mode: bool) {
        let _ = mode;
    }

    /// Evaluation mode (`module.eval()`): `train(false)`.
    fn eval(&mut self) {
        self.train(false);
    }

    /// Whether the module is in training mode (modules that do not depend on it report the
    /// default, training).
    fn is_training(&self) -> bool {
        true
    }

    /// Moves the parameters to `device` (`module.to(device)`): each becomes a new leaf on
    /// that device with the same values and `requires_grad`, and gradients are dropped. Make
    /// optimizers after moving, over the moved parameters. Modules without parameters keep
    /// this default, which does nothing.
    fn to_device(&mut self, device: Device) -> Result<()> {
        let _ = device;
        Ok(())
    }
}

/// A module's argument error (PyTorch raises `ValueError`).
pub(crate) fn value_error(msg: String) -> DispatchError {
    DispatchErrorKind::Kernel(msg).into()
}

/// The named tensors of a child module under `prefix` (`layer1.0` + `conv1.weight`).
pub(crate) fn prefixed(prefix: &str, named: Vec<(String, Tensor)>) -> Vec<(String, Tensor)> {
    named
        .into_iter()
        .map(|(n, t)| (format!("{prefix}.{n}"), t))
        .collect()
}

/// `p` on `device`, as a new leaf with the same values and `requires_grad`.
pub(crate) fn moved(p: &Tensor, device: Device) -> Result<Tensor> {
    if p.device() == device {
        return Ok(p.clone());
    }
    let requires_grad = p.requires_grad();
    let t = {
        let _guard = no_grad();
        ops::_to_copy_with(p, ops::ToCopyOptions::default().device(device))?
    };
    t.requires_grad_(requires_grad)
}

/// `nn.Linear`: `y = x W^T + b`, with `W` of shape `[out_features, in_features]`.
pub struct Linear {
    /// `[out_features, in_features]`.
    pub weight: Tensor,
    /// `[out_features]`, or none.
    pub bias: Option<Tensor>,
}

impl Linear {
    /// A float32 layer initialized as PyTorch's `nn.Linear.reset_parameters` does:
    /// `kaiming_uniform_(weight, a=sqrt(5))`, which is `U(-1/sqrt(fan_in), 1/sqrt(fan_in))`,
    /// then the bias from the same bound; both drawn from `generator`, weight first.
    pub fn new(
        in_features: usize,
        out_features: usize,
        bias: bool,
        generator: &Generator,
    ) -> Result<Linear> {
        let fan_in = dimension("Linear: in_features", in_features)?;
        let fan_out = dimension("Linear: out_features", out_features)?;
        // Note [Default init bound]: weight first, then the bias, from the same generator.
        let bound = default_bound(fan_in);
        let weight = uniform_parameter(&[fan_out, fan_in], bound, generator)?;
        let bias = if bias {
            Some(uniform_parameter(&[fan_out], bound, generator)?)
        } else {
            None
        };
        Ok(Linear { weight, bias })
    }

    /// `in_features`.
    pub fn in_features(&self) -> i64 {
        self.weight.sizes()[1]
    }

    /// `out_features`.
    pub fn out_features(&self) -> i64 {
        self.weight.sizes()[0]
    }
}

impl Module for Linear {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        ops::linear_with(
            input,
            &self.weight,
            ops::LinearOptions {
                bias: self.bias.as_ref(),
            },
        )
    }

    fn parameters(&self) -> Vec<Tensor> {
        std::iter::once(self.weight.clone())
            .chain(self.bias.clone())
            .collect()
    }

    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        std::iter::once(("weight".to_string(), self.weight.clone()))
            .chain(self.bias.clone().map(|b| ("bias".to_string(), b)))
            .collect()
    }

    fn to_device(&mut self, device: Device) -> Result<()> {
        self.weight = moved(&self.weight, device)?;
        if let Some(b) = &self.bias {
            self.bias = Some(moved(b, device)?);
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!(
            "Linear(in_features={}, out_features={}, bias={})",
            self.in_features(),
            self.out_features(),
            if self.bias.is_some() { "True" } else { "False" }
        )
    }
}

/// `nn.ReLU`: `max(x, 0)` elementwise; no parameters.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReLU;

impl Module for ReLU {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        ops::relu(input)
    }

    fn parameters(&self) -> Vec<Tensor> {
        Vec::new()
    }

    fn describe(&self) -> String {
        "ReLU()".to_string()
    }
}

/// `nn.Sequential`: the modules applied in order.
pub struct Sequential {
    layers: Vec<Box<dyn Module>>,
    training: bool,
}

impl Default for Sequential {
    fn default() -> Sequential {
        Sequential {
            layers: Vec::new(),
            training: true,
        }
    }
}

impl Sequential {
    /// An empty sequence (the identity), in training mode.
    pub fn new() -> Sequential {
        Sequential::default()
    }

    /// Appends a module (builder style, `nn.Sequential.append`).
    pub fn append(mut self, m: impl Module + 'static) -> Sequential {
        self.layers.push(Box::new(m));
        self
    }

    /// Appends a module.
    pub fn push(&mut self, m: Box<dyn Module>) {
        self.layers.push(m);
    }

    /// The modules.
    pub fn layers(&self) -> &[Box<dyn Module>] {
        &self.layers
    }
}

impl Module for Sequential {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        let mut x = input.clone();
        for m in &self.layers {
            x = m.forward(&x)?;
        }
        Ok(x)
    }

    fn parameters(&self) -> Vec<Tensor> {
        self.layers.iter().flat_map(|m| m.parameters()).collect()
    }

    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.layers
            .iter()
            .enumerate()
            .flat_map(|(i, m)| {
                m.named_parameters()
                    .into_iter()
                    .map(move |(n, p)| (format!("{i}.{n}"), p))
            })
            .collect()
    }

    fn to_device(&mut self, device: Device) -> Result<()> {
        self.layers.iter_mut().try_for_each(|m| m.to_device(device))
    }

    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        self.layers
            .iter()
            .enumerate()
            .flat_map(|(i, m)| {
                m.named_buffers()
                    .into_iter()
                    .map(move |(n, b)| (format!("{i}.{n}"), b))
            })
            .collect()
    }

    fn train(&mut self, mode: bool) {
        self.training = mode;
        self.layers.iter_mut().for_each(|m| m.train(mode));
    }

    fn is_training(&self) -> bool {
        self.training
    }

    fn describe(&self) -> String {
        let mut s = "Sequential(\n".to_string();
        for (i, m) in self.layers.iter().enumerate() {
            s += &format!("  ({i}): {}\n", m.describe());
        }
        s + ")"
    }
}

/// A multi-layer perceptron: `Linear(sizes[0], sizes[1])`, `ReLU`, ..., ending with a
/// `Linear` (no activation on the output), initialized from `Generator::new(seed)` in layer
/// order, as `torch.manual_seed(seed)` followed by building the same `nn.Sequential` would.
pub fn mlp(sizes: &[usize], seed: u64) -> Result<Sequential> {
    let gen = Generator::new(seed);
    let mut model = Sequential::new();
    for (i, w) in sizes.windows(2).enumerate() {
        if i > 0 {
            model.push(Box::new(ReLU));
        }
        model.push(Box::new(Linear::new(w[0], w[1], true, &gen)?));
    }
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_cpu as _;

    #[test]
    fn linear_sizes_must_be_dimensions() {
        let gen = Generator::new(0);
        let e = Linear::new(usize::MAX, 4, true, &gen)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("without overflow"), "{e}");
        let e = Linear::new(4, 1 << 63, true, &gen)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("without overflow"), "{e}");
        // Too large for memory: an error, not an abort.
        assert!(Linear::new(1 << 40, 1 << 20, false, &gen).is_err());
    }

    #[test]
    fn linear_init_bounds_shapes_and_determinism() {
        let gen = Generator::new(0);
        let l = Linear::new(16, 4, true, &gen).unwrap();
        assert_eq!(l.weight.sizes(), [4, 16]);
        assert_eq!(l.bias.as_ref().unwrap().sizes(), [4]);
        assert!(l.weight.requires_grad() && l.weight.is_leaf());
        let w = l.weight.to_vec::<f32>().unwrap();
        assert!(w.iter().all(|v| v.abs() <= 0.25));
        // Not all equal, roughly centred.
        assert!(w.iter().any(|v| *v > 0.1) && w.iter().any(|v| *v < -0.1));
        let l2 = Linear::new(16, 4, true, &Generator::new(0)).unwrap();
        assert_eq!(w, l2.weight.to_vec::<f32>().unwrap());
        assert_eq!(
            l.bias.as_ref().unwrap().to_vec::<f32>().unwrap(),
            l2.bias.as_ref().unwrap().to_vec::<f32>().unwrap()
        );
        assert_eq!(
            l.describe(),
            "Linear(in_features=16, out_features=4, bias=True)"
        );
    }

    #[test]
    fn linear_forward_matches_hand_computation() {
        let l = Linear {
            weight: Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap(),
            bias: Some(Tensor::from_vec(vec![0.5f32, -1.0], &[2]).unwrap()),
        };
        let x = Tensor::from_vec(vec![1.0f32, 0.0, -1.0, 2.0, 1.0, 0.0], &[2, 3]).unwrap();
        let y = l.forward(&x).unwrap();
        assert_eq!(y.sizes(), [2, 2]);
        assert_eq!(y.to_vec::<f32>().unwrap(), [-1.5, -3.0, 4.5, 12.0]);
    }

    #[test]
    fn mlp_structure_and_parameters() {
        let m = mlp(&[8, 5, 3], 1).unwrap();
        assert_eq!(m.layers().len(), 3);
        let names: Vec<_> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["0.weight", "0.bias", "2.weight", "2.bias"]);
        let x = ops::ones(&[4, 8]).unwrap();
        let y = m.forward(&x).unwrap();
        assert_eq!(y.sizes(), [4, 3]);
        let r = ReLU
            .forward(&Tensor::from_vec(vec![-1.0f32, 2.0], &[2]).unwrap())
            .unwrap();
        assert_eq!(r.to_vec::<f32>().unwrap(), [0.0, 2.0]);
    }
}

//! Activation modules without parameters: [`GELU`], [`Dropout`] and [`Flatten`].

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use crate::module::{value_error, Module};
use crate::norm::py_float;

/// `nn.GELU`: `x * Phi(x)` (`approximate = "none"`) or its tanh approximation (`"tanh"`).
#[derive(Debug, Clone)]
pub struct GELU {
    approximate: String,
}

impl Default for GELU {
    fn default() -> GELU {
        GELU::new("none")
    }
}

impl GELU {
    /// `GELU(approximate)`; like PyTorch, another value than `none` or `tanh` fails in
    /// forward.
    pub fn new(approximate: &str) -> GELU {
        GELU {
            approximate: approximate.to_string(),
        }
    }
}

impl Module for GELU {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        ops::gelu_with(
            input,
            ops::GeluOptions {
                approximate: &self.approximate,
            },
        )
    }

    fn parameters(&self) -> Vec<Tensor> {
        Vec::new()
    }

    fn describe(&self) -> String {
        format!("GELU(approximate='{}')", self.approximate)
    }
}

/// `nn.Dropout`: in training mode, zeroes each element with probability `p` and scales the
/// others by `1 / (1 - p)`; in evaluation mode, the identity.
#[derive(Debug, Clone)]
pub struct Dropout {
    p: f64,
    training: bool,
}

impl Dropout {
    /// `Dropout(p)`, in training mode; `p` must be in `[0, 1]`.
    pub fn new(p: f64) -> Result<Dropout> {
        if !(0.0..=1.0).contains(&p) {
            return Err(value_error(format!(
                "dropout probability has to be between 0 and 1, but got {}",
                py_float(p)
            )));
        }
        Ok(Dropout { p, training: true })
    }
}

impl Module for Dropout {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        ops::dropout(input, self.p, self.training)
    }

    fn parameters(&self) -> Vec<Tensor> {
        Vec::new()
    }

    fn train(&mut self, mode: bool) {
        self.training = mode;
    }

    fn is_training(&self) -> bool {
        self.training
    }

    fn describe(&self) -> String {
        format!("Dropout(p={}, inplace=False)", py_float(self.p))
    }
}

/// `nn.Flatten`: merges the dims `start_dim..=end_dim` into one (by default all but the
/// batch dim).
#[derive(Debug, Clone, Copy)]
pub struct Flatten {
    start_dim: i64,
    end_dim: i64,
}

impl Default for Flatten {
    fn default() -> Flatten {
        Flatten::new(1, -1)
    }
}

impl Flatten {
    /// `Flatten(start_dim, end_dim)`.
    pub fn new(start_dim: i64, end_dim: i64) -> Flatten {
        Flatten { start_dim, end_dim }
    }
}

impl Module for Flatten {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        ops::flatten_with(
            input,
            ops::FlattenOptions {
                start_dim: self.start_dim,
                end_dim: self.end_dim,
            },
        )
    }

    fn parameters(&self) -> Vec<Tensor> {
        Vec::new()
    }

    fn describe(&self) -> String {
        format!(
            "Flatten(start_dim={}, end_dim={})",
            self.start_dim, self.end_dim
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_cpu as _;

    #[test]
    fn gelu_matches_pytorch_and_refuses_unknown_approximations() {
        let x = Tensor::from_vec(vec![-1.0f32, 0.5, 2.0], &[3]).unwrap();
        // torch 2.15: F.gelu(x), F.gelu(x, approximate='tanh').
        let exact = GELU::default()
            .forward(&x)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        let tanh = GELU::new("tanh")
            .forward(&x)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        for (a, b) in exact.iter().zip([-0.158_655_26, 0.345_731_1, 1.954_5]) {
            assert!((a - b).abs() < 1e-5, "{exact:?}");
        }
        for (a, b) in tanh.iter().zip([-0.158_808, 0.345_714, 1.954_597_7]) {
            assert!((a - b).abs() < 1e-5, "{tanh:?}");
        }
        let e = GELU::new("x").forward(&x).err().unwrap().to_string();
        assert!(
            e.contains("approximate argument must be either none or tanh"),
            "{e}"
        );
        assert_eq!(GELU::new("tanh").describe(), "GELU(approximate='tanh')");
    }

    #[test]
    fn dropout_train_and_eval() {
        let e = Dropout::new(1.5).err().unwrap().to_string();
        assert!(
            e.contains("dropout probability has to be between 0 and 1, but got 1.5"),
            "{e}"
        );
        let mut d = Dropout::new(0.5).unwrap();
        assert_eq!(d.describe(), "Dropout(p=0.5, inplace=False)");
        let x = ops::ones(&[1000]).unwrap();
        let y = d.forward(&x).unwrap().to_vec::<f32>().unwrap();
        // Each element is dropped (0) or scaled by 2; about half of each.
        assert!(y.iter().all(|v| *v == 0.0 || *v == 2.0));
        let kept = y.iter().filter(|v| **v == 2.0).count();
        assert!((350..650).contains(&kept), "{kept}");
        d.eval();
        assert!(!d.is_training());
        assert_eq!(
            d.forward(&x).unwrap().to_vec::<f32>().unwrap(),
            vec![1.0; 1000]
        );
    }

    #[test]
    fn flatten_dims() {
        let x = ops::ones(&[2, 3, 4, 5]).unwrap();
        assert_eq!(Flatten::default().forward(&x).unwrap().sizes(), [2, 60]);
        assert_eq!(Flatten::new(0, 2).forward(&x).unwrap().sizes(), [24, 5]);
        assert_eq!(
            Flatten::default().describe(),
            "Flatten(start_dim=1, end_dim=-1)"
        );
    }
}

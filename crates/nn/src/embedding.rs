//! [`Embedding`]: a lookup table of learnt vectors (`torch.nn.Embedding`).

use switchboard_autograd::no_grad;
use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{Device, Generator, Tensor};

use crate::init::{dimension, normal_parameter};
use crate::module::{moved, value_error, Module};

/// `nn.Embedding`: row `i` of `weight` (`[num_embeddings, embedding_dim]`, drawn from
/// `N(0, 1)`) for each index `i` of the input. The row of `padding_idx`, if any, starts at zero
/// and gets no gradient.
pub struct Embedding {
    /// `[num_embeddings, embedding_dim]`.
    pub weight: Tensor,
    padding_idx: Option<i64>,
}

impl Embedding {
    /// `Embedding(num_embeddings, embedding_dim, padding_idx)` drawn from `generator`; a
    /// negative `padding_idx` counts from the end, as PyTorch's.
    pub fn new(
        num_embeddings: usize,
        embedding_dim: usize,
        padding_idx: Option<i64>,
        generator: &Generator,
    ) -> Result<Embedding> {
        let (weight, padding_idx) = embedding_weight(
            "Embedding",
            num_embeddings,
            embedding_dim,
            padding_idx,
            "Padding_idx must be within num_embeddings",
            generator,
        )?;
        Ok(Embedding {
            weight,
            padding_idx,
        })
    }

    /// The padding index, made non-negative.
    pub fn padding_idx(&self) -> Option<i64> {
        self.padding_idx
    }
}

/// The weight of an `Embedding` or `EmbeddingBag` (`module`): `[num_embeddings,
/// embedding_dim]` drawn from `N(0, 1)`, the `padding_idx` row zeroed
/// (`_fill_padding_idx_with_zero`), with `padding_idx` made non-negative. `out_of_range` is the
/// module's message for a `padding_idx` outside the table (the two modules' differ in case, as
/// PyTorch's).
pub(crate) fn embedding_weight(
    module: &str,
    num_embeddings: usize,
    embedding_dim: usize,
    padding_idx: Option<i64>,
    out_of_range: &str,
    generator: &Generator,
) -> Result<(Tensor, Option<i64>)> {
    let n = dimension(&format!("{module}: num_embeddings"), num_embeddings)?;
    let d = dimension(&format!("{module}: embedding_dim"), embedding_dim)?;
    let padding_idx = match padding_idx {
        Some(p) if p >= 0 && p < n => Some(p),
        Some(p) if p < 0 && p >= -n => Some(n + p),
        Some(_) => return Err(value_error(out_of_range.into())),
        None => None,
    };
    let weight = normal_parameter(&[n, d], generator)?;
    if let Some(p) = padding_idx {
        let _guard = no_grad();
        ops::zero_(&ops::select(&weight, 0, p)?)?;
    }
    Ok((weight, padding_idx))
}

impl Module for Embedding {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        ops::embedding_with(
            &self.weight,
            input,
            ops::EmbeddingOptions {
                padding_idx: self.padding_idx.unwrap_or(-1),
                scale_grad_by_freq: false,
                sparse: false,
            },
        )
    }

    fn parameters(&self) -> Vec<Tensor> {
        vec![self.weight.clone()]
    }

    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![("weight".to_string(), self.weight.clone())]
    }

    fn to_device(&mut self, device: Device) -> Result<()> {
        self.weight = moved(&self.weight, device)?;
        Ok(())
    }

    fn describe(&self) -> String {
        let s = self.weight.sizes();
        match self.padding_idx {
            Some(p) => format!("Embedding({}, {}, padding_idx={p})", s[0], s[1]),
            None => format!("Embedding({}, {})", s[0], s[1]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_autograd::AutogradTensor;
    use switchboard_cpu as _;

    #[test]
    fn embedding_init_padding_and_gradient() {
        // torch 2.15: torch.manual_seed(0); nn.Embedding(3, 2, padding_idx=1).weight.
        let e = Embedding::new(3, 2, Some(1), &Generator::new(0)).unwrap();
        let w = e.weight.to_vec::<f32>().unwrap();
        let expected = [
            1.540_996_1,
            -0.293_428_9,
            0.0,
            0.0,
            -1.084_522_4,
            -1.398_595_5,
        ];
        for (a, b) in w.iter().zip(expected) {
            assert!((a - b).abs() < 1e-6, "{w:?}");
        }
        assert_eq!(e.describe(), "Embedding(3, 2, padding_idx=1)");
        let idx = Tensor::from_vec(vec![1i64, 2, 1], &[3]).unwrap();
        let y = e.forward(&idx).unwrap();
        assert_eq!(y.sizes(), [3, 2]);
        ops::sum(&y).unwrap().backward().unwrap();
        // The padding row gets no gradient; row 2 is used once.
        assert_eq!(
            e.weight.grad().unwrap().to_vec::<f32>().unwrap(),
            [0.0, 0.0, 0.0, 0.0, 1.0, 1.0]
        );
        let last = Embedding::new(10, 4, Some(-1), &Generator::new(0)).unwrap();
        assert_eq!(last.padding_idx(), Some(9));
        for bad in [10, -11] {
            let e = Embedding::new(10, 4, Some(bad), &Generator::new(0))
                .err()
                .unwrap()
                .to_string();
            assert!(
                e.contains("Padding_idx must be within num_embeddings"),
                "{e}"
            );
        }
    }
}

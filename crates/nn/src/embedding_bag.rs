//! [`EmbeddingBag`]: sums, means or maxima of bags of learnt vectors
//! (`torch.nn.EmbeddingBag`), with `torch.nn.functional.embedding_bag`'s input handling.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{Device, Generator, Tensor};

use crate::embedding::embedding_weight;
use crate::module::{moved, value_error, Module};

/// `nn.EmbeddingBag`: `weight` (`[num_embeddings, embedding_dim]`, drawn from `N(0, 1)`,
/// the `padding_idx` row zeroed) reduced over each bag of indices with `mode` (`"sum"`,
/// `"mean"`, `"max"`).
pub struct EmbeddingBag {
    /// `[num_embeddings, embedding_dim]`.
    pub weight: Tensor,
    mode: String,
    padding_idx: Option<i64>,
    include_last_offset: bool,
}

impl EmbeddingBag {
    /// `EmbeddingBag(num_embeddings, embedding_dim, mode=mode, padding_idx=padding_idx)` drawn
    /// from `generator`; a negative `padding_idx` counts from the end, as PyTorch's.
    pub fn new(
        num_embeddings: usize,
        embedding_dim: usize,
        mode: &str,
        padding_idx: Option<i64>,
        generator: &Generator,
    ) -> Result<EmbeddingBag> {
        mode_number(mode)?;
        let (weight, padding_idx) = embedding_weight(
            "EmbeddingBag",
            num_embeddings,
            embedding_dim,
            padding_idx,
            "padding_idx must be within num_embeddings",
            generator,
        )?;
        Ok(EmbeddingBag {
            weight,
            mode: mode.to_owned(),
            padding_idx,
            include_last_offset: false,
        })
    }

    /// With `include_last_offset`: `offsets` ends with the end of the indices.
    pub fn include_last_offset(mut self, include_last_offset: bool) -> EmbeddingBag {
        self.include_last_offset = include_last_offset;
        self
    }

    /// The padding index, made non-negative.
    pub fn padding_idx(&self) -> Option<i64> {
        self.padding_idx
    }

    /// `forward(input, offsets, per_sample_weights)`: a 1-d `input` of indices split into bags
    /// at `offsets`, or a 2-d `input` of equal bags (one per row, no `offsets`), as
    /// `torch.nn.functional.embedding_bag` takes them.
    pub fn forward_bags(
        &self,
        input: &Tensor,
        offsets: Option<&Tensor>,
        per_sample_weights: Option<&Tensor>,
    ) -> Result<Tensor> {
        if let Some(p) = per_sample_weights {
            if p.sizes() != input.sizes() {
                return Err(value_error(format!(
                    "embedding_bag: If per_sample_weights ({:?}) is not None, then it must have \
                     the same shape as the input ({:?})",
                    p.sizes(),
                    input.sizes()
                )));
            }
            if self.mode != "sum" {
                return Err(value_error(format!(
                    "embedding_bag: per_sample_weights was not None. per_sample_weights is only \
                     supported for mode='sum' (got mode='{}'). Please open a feature request on \
                     GitHub.",
                    self.mode
                )));
            }
        }
        let (indices, offsets, psw) = match input.dim() {
            2 => {
                if offsets.is_some() {
                    return Err(value_error(
                        "if input is 2D, then offsets has to be None, as input is treated is a \
                         mini-batch of fixed length sequences. However, found offsets of type \
                         Tensor"
                            .into(),
                    ));
                }
                let (rows, cols) = (input.sizes()[0], input.sizes()[1]);
                let starts: Vec<i64> = (0..rows).map(|r| r * cols).collect();
                let starts = Tensor::from_vec(starts, &[rows])?;
                let starts = ops::_to_copy_with(
                    &starts,
                    ops::ToCopyOptions {
                        dtype: Some(input.dtype()),
                        device: Some(input.device()),
                        ..Default::default()
                    },
                )?;
                let flat = |t: &Tensor| ops::reshape(t, &[-1]);
                (
                    flat(input)?,
                    starts,
                    per_sample_weights.map(flat).transpose()?,
                )
            }
            1 => {
                let Some(offsets) = offsets else {
                    return Err(value_error(
                        "offsets has to be a 1D Tensor but got None".into(),
                    ));
                };
                if offsets.dim() != 1 {
                    return Err(value_error("offsets has to be a 1D Tensor".into()));
                }
                (input.clone(), offsets.clone(), per_sample_weights.cloned())
            }
            d => {
                return Err(value_error(format!(
                    "input has to be 1D or 2D Tensor, but got Tensor of dimension {d}"
                )))
            }
        };
        let (output, ..) = ops::embedding_bag_padding_idx(
            &self.weight,
            &indices,
            &offsets,
            false,
            mode_number(&self.mode)?,
            false,
            psw.as_ref(),
            self.include_last_offset,
            self.padding_idx,
        )?;
        Ok(output)
    }
}

/// PyTorch's mode numbers: sum 0, mean 1, max 2.
fn mode_number(mode: &str) -> Result<i64> {
    match mode {
        "sum" => Ok(0),
        "mean" => Ok(1),
        "max" => Ok(2),
        _ => Err(value_error("mode has to be one of sum, mean or max".into())),
    }
}

impl Module for EmbeddingBag {
    /// A 2-d `input`: one bag per row.
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        self.forward_bags(input, None, None)
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
        let mut d = format!("EmbeddingBag({}, {}, mode='{}'", s[0], s[1], self.mode);
        if let Some(p) = self.padding_idx {
            d.push_str(&format!(", padding_idx={p}"));
        }
        d.push(')');
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_autograd::AutogradTensor;
    use switchboard_cpu as _;
    use switchboard_tensor::ScalarType;

    fn close(a: &[f32], b: &[f32]) {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-6, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn embedding_bag_module_matches_pytorch() {
        // torch 2.15: torch.manual_seed(0); nn.EmbeddingBag(3, 2, padding_idx=1).
        let e = EmbeddingBag::new(3, 2, "mean", Some(1), &Generator::new(0)).unwrap();
        let w = [
            1.540_996_1,
            -0.293_428_9,
            0.0,
            0.0,
            -1.084_522_4,
            -1.398_595_5,
        ];
        close(&e.weight.to_vec::<f32>().unwrap(), &w);
        assert_eq!(
            e.describe(),
            "EmbeddingBag(3, 2, mode='mean', padding_idx=1)"
        );
        assert_eq!(e.named_parameters()[0].0, "weight");
        let x = Tensor::from_vec(vec![0i64, 2, 1, 2], &[2, 2]).unwrap();
        let y = e.forward(&x).unwrap();
        close(
            &y.to_vec::<f32>().unwrap(),
            &[0.228_236_85, -0.846_012_2, -1.084_522_4, -1.398_595_5],
        );
        ops::sum(&y).unwrap().backward().unwrap();
        close(
            &e.weight.grad().unwrap().to_vec::<f32>().unwrap(),
            &[0.5, 0.5, 0.0, 0.0, 1.5, 1.5],
        );
        let flat = Tensor::from_vec(vec![0i64, 2, 1, 2], &[4]).unwrap();
        let offsets = Tensor::from_vec(vec![0i64, 1], &[2]).unwrap();
        let y = e.forward_bags(&flat, Some(&offsets), None).unwrap();
        close(
            &y.to_vec::<f32>().unwrap(),
            &[1.540_996_1, -0.293_428_9, -1.084_522_4, -1.398_595_5],
        );
        let e = e.forward_bags(&flat, None, None).unwrap_err().to_string();
        assert!(
            e.contains("offsets has to be a 1D Tensor but got None"),
            "{e}"
        );
        let bad = EmbeddingBag::new(3, 2, "median", None, &Generator::new(0));
        assert!(bad.is_err());
        let psw = Tensor::from_vec(vec![1.0f32; 4], &[4]).unwrap();
        let e = EmbeddingBag::new(3, 2, "max", None, &Generator::new(0)).unwrap();
        let err = e
            .forward_bags(&flat, Some(&offsets), Some(&psw))
            .unwrap_err();
        assert!(err.to_string().contains("only supported for mode='sum'"));
        assert_eq!(ScalarType::Float, e.weight.dtype());
    }
}

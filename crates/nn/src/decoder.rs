//! A small decoder-only transformer language model ([`DecoderLm`]): token and learned
//! position embeddings, pre-norm blocks ([`DecoderBlock`]: layer norm, causal multi-head
//! self-attention, residual; layer norm, GELU MLP, residual), a final layer norm and an
//! untied linear head.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{Device, Generator, ScalarType, Tensor};

use crate::activation::GELU;
use crate::attention::MultiheadAttention;
use crate::embedding::Embedding;
use crate::module::{prefixed, value_error, Linear, Module};
use crate::norm::LayerNorm;

/// A pre-norm block: `x + attn(ln1(x))`, then `x + mlp(ln2(x))` with `mlp` = `Linear(d, 4d)`,
/// GELU, `Linear(4d, d)` (`mlp.0`, `mlp.2`).
pub struct DecoderBlock {
    ln1: LayerNorm,
    attn: MultiheadAttention,
    ln2: LayerNorm,
    fc: Linear,
    gelu: GELU,
    proj: Linear,
}

impl DecoderBlock {
    /// A block of width `d_model` with `num_heads` causal heads.
    pub fn new(d_model: usize, num_heads: usize, generator: &Generator) -> Result<DecoderBlock> {
        let d = crate::init::dimension("DecoderBlock: d_model", d_model)?;
        let hidden = d_model
            .checked_mul(4)
            .ok_or_else(|| value_error("DecoderBlock: d_model is too large".into()))?;
        let mut attn = MultiheadAttention::new(d_model, num_heads, generator)?;
        attn.causal = true;
        Ok(DecoderBlock {
            ln1: LayerNorm::new(&[d])?,
            attn,
            ln2: LayerNorm::new(&[d])?,
            fc: Linear::new(d_model, hidden, true, generator)?,
            gelu: GELU::default(),
            proj: Linear::new(hidden, d_model, true, generator)?,
        })
    }

    fn children(&self) -> [(&str, &dyn Module); 5] {
        [
            ("ln1", &self.ln1),
            ("attn", &self.attn),
            ("ln2", &self.ln2),
            ("mlp.0", &self.fc),
            ("mlp.2", &self.proj),
        ]
    }

    fn children_mut(&mut self) -> [&mut dyn Module; 5] {
        [
            &mut self.ln1,
            &mut self.attn,
            &mut self.ln2,
            &mut self.fc,
            &mut self.proj,
        ]
    }
}

impl Module for DecoderBlock {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = ops::add(x, &self.attn.forward(&self.ln1.forward(x)?)?)?;
        let h = self
            .gelu
            .forward(&self.fc.forward(&self.ln2.forward(&x)?)?)?;
        ops::add(&x, &self.proj.forward(&h)?)
    }

    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, p)| p)
            .collect()
    }

    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.children()
            .into_iter()
            .flat_map(|(n, m)| prefixed(n, m.named_parameters()))
            .collect()
    }

    fn to_device(&mut self, device: Device) -> Result<()> {
        self.children_mut()
            .into_iter()
            .try_for_each(|m| m.to_device(device))
    }

    fn describe(&self) -> String {
        let mut s = "DecoderBlock(\n".to_string();
        for (name, m) in self.children() {
            s += &format!("  ({name}): {}\n", m.describe().replace('\n', "\n  "));
        }
        s + ")"
    }
}

/// The language model: `[N, T]` token ids (Long) to `[N, T, vocab]` logits, each position
/// seeing itself and the positions before it.
pub struct DecoderLm {
    tok_emb: Embedding,
    pos_emb: Embedding,
    blocks: Vec<DecoderBlock>,
    ln_f: LayerNorm,
    head: Linear,
}

impl DecoderLm {
    /// `vocab` tokens, at most `max_len` positions, `layers` blocks of width `d_model` with
    /// `num_heads` heads, drawn from `Generator::new(seed)` in module order.
    pub fn new(
        vocab: usize,
        max_len: usize,
        d_model: usize,
        num_heads: usize,
        layers: usize,
        seed: u64,
    ) -> Result<DecoderLm> {
        let gen = Generator::new(seed);
        let tok_emb = Embedding::new(vocab, d_model, None, &gen)?;
        let pos_emb = Embedding::new(max_len, d_model, None, &gen)?;
        let blocks = (0..layers)
            .map(|_| DecoderBlock::new(d_model, num_heads, &gen))
            .collect::<Result<Vec<_>>>()?;
        let d = crate::init::dimension("DecoderLm: d_model", d_model)?;
        Ok(DecoderLm {
            tok_emb,
            pos_emb,
            blocks,
            ln_f: LayerNorm::new(&[d])?,
            head: Linear::new(d_model, vocab, true, &gen)?,
        })
    }

    fn children(&self) -> Vec<(String, &dyn Module)> {
        let mut c: Vec<(String, &dyn Module)> = vec![
            ("tok_emb".into(), &self.tok_emb),
            ("pos_emb".into(), &self.pos_emb),
        ];
        for (i, b) in self.blocks.iter().enumerate() {
            c.push((format!("blocks.{i}"), b));
        }
        c.push(("ln_f".into(), &self.ln_f));
        c.push(("head".into(), &self.head));
        c
    }
}

impl Module for DecoderLm {
    fn forward(&self, tokens: &Tensor) -> Result<Tensor> {
        if tokens.dim() != 2 {
            return Err(value_error(format!(
                "DecoderLm: expected [N, T] token ids, got a {}-D input",
                tokens.dim()
            )));
        }
        let t = tokens.sizes()[1];
        let max_len = self.pos_emb.weight.sizes()[0];
        if t > max_len {
            return Err(value_error(format!(
                "DecoderLm: a sequence of {t} tokens is longer than the {max_len} positions"
            )));
        }
        let positions = ops::arange_with(
            t,
            ops::ArangeOptions {
                dtype: Some(ScalarType::Long),
                device: Some(tokens.device()),
                ..Default::default()
            },
        )?;
        let mut x = ops::add(
            &self.tok_emb.forward(tokens)?,
            &self.pos_emb.forward(&positions)?,
        )?;
        for b in &self.blocks {
            x = b.forward(&x)?;
        }
        self.head.forward(&self.ln_f.forward(&x)?)
    }

    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, p)| p)
            .collect()
    }

    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.children()
            .into_iter()
            .flat_map(|(n, m)| prefixed(&n, m.named_parameters()))
            .collect()
    }

    fn to_device(&mut self, device: Device) -> Result<()> {
        self.tok_emb.to_device(device)?;
        self.pos_emb.to_device(device)?;
        for b in &mut self.blocks {
            b.to_device(device)?;
        }
        self.ln_f.to_device(device)?;
        self.head.to_device(device)
    }

    fn describe(&self) -> String {
        let mut s = "DecoderLm(\n".to_string();
        for (name, m) in self.children() {
            s += &format!("  ({name}): {}\n", m.describe().replace('\n', "\n  "));
        }
        s + ")"
    }
}

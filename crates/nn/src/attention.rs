//! Attention: [`scaled_dot_product_attention`] (the `aten::scaled_dot_product_attention`
//! operator with `torch.nn.functional`'s arguments) and [`MultiheadAttention`]
//! (self-attention with `nn.MultiheadAttention`'s parameters).

use switchboard_dispatcher::{DispatchErrorKind, Result};
use switchboard_ops as ops;
use switchboard_tensor::{Device, Generator, Tensor};

use crate::init::{constant_parameter, uniform_parameter};
use crate::module::{moved, prefixed, value_error, Linear, Module};

fn runtime_error(msg: String) -> switchboard_dispatcher::DispatchError {
    DispatchErrorKind::Kernel(msg).into()
}

/// `torch.nn.functional.scaled_dot_product_attention`: `softmax(q k^T * scale + mask) v` over
/// the last two dims (`[..., L, E]` queries, `[..., S, E]` keys, `[..., S, Ev]` values), with
/// `scale` `1 / sqrt(E)` by default; `is_causal` masks the keys after each query (`ones(L,
/// S).tril()`); a boolean `attn_mask` keeps where it is true, a float one is added; rows whose
/// every key is masked give zeros; `dropout_p` drops attention weights; `enable_gqa` lets key
/// and value have fewer heads than the query (grouped-query attention). The operator
/// `aten::scaled_dot_product_attention`, which runs the fused flash kernel on CPU when
/// `_fused_sdp_choice` allows (Note [Choosing the attention kernel] in switchboard-cpu), else
/// the math path (Note [Attention as a composite] in switchboard-ops).
#[allow(clippy::too_many_arguments)]
pub fn scaled_dot_product_attention(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
    is_causal: bool,
    scale: Option<f64>,
    enable_gqa: bool,
) -> Result<Tensor> {
    ops::scaled_dot_product_attention_with(
        query,
        key,
        value,
        ops::ScaledDotProductAttentionOptions {
            attn_mask,
            dropout_p,
            is_causal,
            scale,
            enable_gqa,
        },
    )
}

/// `nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)` used for self-attention:
/// one projection to queries, keys and values (`in_proj_weight` `[3E, E]`, `in_proj_bias`),
/// [`scaled_dot_product_attention`] per head, and `out_proj`. Initialized as PyTorch's:
/// `out_proj` as a `Linear` (then its bias zeroed), `in_proj_weight` Xavier-uniform, the
/// biases zeros.
pub struct MultiheadAttention {
    /// `[3 * embed_dim, embed_dim]`: the query, key and value projections stacked.
    pub in_proj_weight: Tensor,
    /// `[3 * embed_dim]`.
    pub in_proj_bias: Tensor,
    /// The output projection.
    pub out_proj: Linear,
    num_heads: i64,
    /// Masks the keys after each query (decoder self-attention).
    pub causal: bool,
}

impl MultiheadAttention {
    /// `embed_dim` split among `num_heads` heads, drawn from `generator`.
    pub fn new(
        embed_dim: usize,
        num_heads: usize,
        generator: &Generator,
    ) -> Result<MultiheadAttention> {
        if num_heads == 0 || !embed_dim.is_multiple_of(num_heads) {
            return Err(value_error(format!(
                "embed_dim must be divisible by num_heads, got embed_dim {embed_dim} and \
                 num_heads {num_heads}"
            )));
        }
        let out_proj = Linear::new(embed_dim, embed_dim, true, generator)?;
        let e = crate::init::dimension("MultiheadAttention: embed_dim", embed_dim)?;
        let three_e = e
            .checked_mul(3)
            .ok_or_else(|| value_error("MultiheadAttention: embed_dim is too large".into()))?;
        // xavier_uniform_: bound = sqrt(6 / (fan_in + fan_out)) with fan_in E, fan_out 3E.
        let bound = (6.0 / (e as f64 + three_e as f64)).sqrt();
        let in_proj_weight = uniform_parameter(&[three_e, e], bound, generator)?;
        let in_proj_bias = constant_parameter(&[three_e], 0.0)?;
        if let Some(b) = &out_proj.bias {
            let _guard = switchboard_autograd::no_grad();
            ops::zero_(b)?;
        }
        Ok(MultiheadAttention {
            in_proj_weight,
            in_proj_bias,
            out_proj,
            num_heads: num_heads as i64,
            causal: false,
        })
    }

    /// Self-attention of `x` (`[N, L, E]`), causal or not.
    pub fn self_attention(&self, x: &Tensor, is_causal: bool) -> Result<Tensor> {
        if x.dim() != 3 {
            return Err(runtime_error(format!(
                "MultiheadAttention: expected a batched [N, L, E] input, got {}-D",
                x.dim()
            )));
        }
        let (n, l, e) = (x.sizes()[0], x.sizes()[1], x.sizes()[2]);
        let h = self.num_heads;
        let qkv = ops::linear_with(
            x,
            &self.in_proj_weight,
            ops::LinearOptions {
                bias: Some(&self.in_proj_bias),
            },
        )?;
        // [N, L, 3E] -> [3, N, H, L, E/H], unbound as Python's `q, k, v = qkv` unpacking does
        // (one `UnbindBackward0`, whose backward stacks the three gradients).
        let qkv = ops::permute(&ops::view(&qkv, &[n, l, 3, h, e / h])?, &[2, 0, 3, 1, 4])?;
        let [q, k, v]: [Tensor; 3] = ops::unbind(&qkv)?
            .try_into()
            .map_err(|_| runtime_error("MultiheadAttention: expected 3 projections".into()))?;
        let out = scaled_dot_product_attention(&q, &k, &v, None, 0.0, is_causal, None, false)?;
        let out = ops::reshape(&ops::transpose(&out, 1, 2)?, &[n, l, e])?;
        self.out_proj.forward(&out)
    }
}

impl Module for MultiheadAttention {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        self.self_attention(input, self.causal)
    }

    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, p)| p)
            .collect()
    }

    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut named = vec![
            ("in_proj_weight".to_string(), self.in_proj_weight.clone()),
            ("in_proj_bias".to_string(), self.in_proj_bias.clone()),
        ];
        named.extend(prefixed("out_proj", self.out_proj.named_parameters()));
        named
    }

    fn to_device(&mut self, device: Device) -> Result<()> {
        self.in_proj_weight = moved(&self.in_proj_weight, device)?;
        self.in_proj_bias = moved(&self.in_proj_bias, device)?;
        self.out_proj.to_device(device)
    }

    fn describe(&self) -> String {
        format!(
            "MultiheadAttention(\n  (out_proj): NonDynamicallyQuantizableLinear(in_features={e}, \
             out_features={e}, bias=True)\n)",
            e = self.out_proj.in_features()
        )
    }
}

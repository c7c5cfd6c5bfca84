//! Attention: [`scaled_dot_product_attention`] (PyTorch's math path) and
//! [`MultiheadAttention`] (self-attention with `nn.MultiheadAttention`'s parameters).

use switchboard_dispatcher::{DispatchErrorKind, Result};
use switchboard_ops as ops;
use switchboard_tensor::{Device, Generator, ScalarType, Tensor};

use crate::attention_backend::{sdp_backend, SdpBackend};
use crate::init::{constant_parameter, uniform_parameter};
use crate::module::{moved, prefixed, value_error, Linear, Module};
use crate::norm::py_float;

fn runtime_error(msg: String) -> switchboard_dispatcher::DispatchError {
    DispatchErrorKind::Kernel(msg).into()
}

/// `torch.nn.functional.scaled_dot_product_attention`: `softmax(q k^T * scale + mask) v` over
/// the last two dims (`[..., L, E]` queries, `[..., S, E]` keys, `[..., S, Ev]` values), with
/// `scale` `1 / sqrt(E)` by default; `is_causal` masks the keys after each query (`ones(L,
/// S).tril()`); a boolean `attn_mask` keeps where it is true, a float one is added; rows whose
/// every key is masked give zeros; `dropout_p` drops attention weights. As PyTorch on CPU, it
/// runs the fused `_scaled_dot_product_flash_attention_for_cpu` when [`sdp_backend`] allows
/// (Note [Choosing the attention kernel]), else [`scaled_dot_product_attention_math`].
pub fn scaled_dot_product_attention(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
    is_causal: bool,
    scale: Option<f64>,
) -> Result<Tensor> {
    validate(query, key, value, attn_mask, dropout_p, is_causal)?;
    if sdp_backend(query, key, value, attn_mask, dropout_p) == SdpBackend::Flash {
        return flash_attention(query, key, value, attn_mask, is_causal, scale);
    }
    math(query, key, value, attn_mask, dropout_p, is_causal, scale)
}

/// PyTorch's math path of [`scaled_dot_product_attention`]
/// (`_scaled_dot_product_attention_math` with `_safe_softmax`), whatever the inputs.
///
/// Note [Attention as a composite]
/// This composes dispatched operators (matmul, softmax, where, dropout), so autograd,
/// autocast and the lazy backend see those; PyTorch registers
/// `aten::scaled_dot_product_attention` as a CompositeImplicitAutograd operator that does the
/// same on CPU. As in its math kernel, `sqrt(scale)` multiplies the queries and the keys each
/// (instead of `scale` the product), which keeps the scores' magnitude.
pub fn scaled_dot_product_attention_math(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
    is_causal: bool,
    scale: Option<f64>,
) -> Result<Tensor> {
    validate(query, key, value, attn_mask, dropout_p, is_causal)?;
    math(query, key, value, attn_mask, dropout_p, is_causal, scale)
}

/// `validate_sdpa_input` and the math path's argument checks.
fn validate(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
    is_causal: bool,
) -> Result<()> {
    if query.dtype() != key.dtype() || query.dtype() != value.dtype() {
        return Err(runtime_error(format!(
            "Expected query, key, and value to have the same dtype, but got query.dtype: {} \
             key.dtype: {} and value.dtype: {} instead.",
            query.dtype().type_meta_name(),
            key.dtype().type_meta_name(),
            value.dtype().type_meta_name()
        )));
    }
    if query.dim() < 2 || key.dim() < 2 || value.dim() < 2 {
        return Err(runtime_error(format!(
            "Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: \
             {} key.dim: {} and value.dim: {} instead.",
            query.dim(),
            key.dim(),
            value.dim()
        )));
    }
    if let Some(mask) = attn_mask {
        let md = mask.dtype();
        if md != ScalarType::Bool && !md.is_floating_point() && md != query.dtype() {
            return Err(runtime_error(format!(
                "Expected attn_mask dtype to be bool or float or to match query dtype, but got \
                 attn_mask.dtype: {} and  query.dtype: {} instead.",
                md.type_meta_name(),
                query.dtype().type_meta_name()
            )));
        }
    }
    if is_causal && attn_mask.is_some() {
        return Err(runtime_error(
            "_scaled_dot_product_attention: Explicit attn_mask should not be set when \
             is_causal=True"
                .into(),
        ));
    }
    if !(0.0..=1.0).contains(&dropout_p) {
        return Err(runtime_error(format!(
            "dropout probability has to be between 0 and 1, but got {}",
            py_float(dropout_p)
        )));
    }
    Ok(())
}

/// The math path on checked arguments.
fn math(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
    is_causal: bool,
    scale: Option<f64>,
) -> Result<Tensor> {
    let (l, s) = (query.sizes()[query.dim() - 2], key.sizes()[key.dim() - 2]);
    let e = query.sizes()[query.dim() - 1];
    let scale = scale.unwrap_or(1.0 / (e as f64).sqrt());
    let root = scale.abs().sqrt();
    let q = ops::mul_scalar(query, if scale < 0.0 { -root } else { root })?;
    let k = ops::mul_scalar(&ops::transpose(key, -2, -1)?, root)?;
    let mut scores = ops::matmul(&q, &k)?;
    // A boolean mask (the causal one included) keeps where true: the rest gets -inf.
    let causal;
    let mask = if is_causal {
        let long = ops::ArangeOptions {
            dtype: Some(ScalarType::Long),
            device: Some(query.device()),
            ..Default::default()
        };
        let rows = ops::unsqueeze(&ops::arange_with(l, long)?, 1)?;
        let cols = ops::unsqueeze(&ops::arange_with(s, long)?, 0)?;
        causal = ops::ge(&rows, &cols)?;
        Some(&causal)
    } else {
        attn_mask
    };
    if let Some(mask) = mask {
        scores = if mask.dtype() == ScalarType::Bool {
            ops::where_scalar_other(mask, &scores, f64::NEG_INFINITY)?
        } else {
            ops::add(&scores, mask)?
        };
    }
    let weights = ops::softmax(&scores, -1)?;
    // `_safe_softmax`: a row whose every score is -inf attends to nothing (zeros, not NaN).
    let row_max = ops::amax_with(
        &scores,
        ops::AmaxOptions {
            dim: &[-1],
            keepdim: true,
        },
    )?;
    let weights =
        ops::where_scalar_self(&ops::eq_scalar(&row_max, f64::NEG_INFINITY)?, 0.0, &weights)?;
    let weights = if dropout_p > 0.0 {
        ops::dropout(&weights, dropout_p, true)?
    } else {
        weights
    };
    ops::matmul(&weights, value)
}

/// The flash branch of `scaled_dot_product_attention` (inputs [`sdp_backend`] chose): a bool
/// mask becomes `-inf` where false and 0 elsewhere in the query's dtype
/// (`convert_boolean_attn_mask`), 3-d inputs (and a 3-d mask) gain a batch dimension of 1.
fn flash_attention(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    attn_mask: Option<&Tensor>,
    is_causal: bool,
    scale: Option<f64>,
) -> Result<Tensor> {
    let batched = query.dim() == 4;
    let four = |t: &Tensor| {
        if batched {
            Ok(t.clone())
        } else {
            ops::unsqueeze(t, 0)
        }
    };
    let mask = match attn_mask {
        Some(m) if m.dtype() == ScalarType::Bool => {
            let zero = ops::scalar_tensor_with(
                0.0,
                ops::ScalarTensorOptions {
                    dtype: Some(query.dtype()),
                    device: Some(query.device()),
                    ..Default::default()
                },
            )?;
            Some(ops::where_scalar_self(
                &ops::logical_not(m)?,
                f64::NEG_INFINITY,
                &zero,
            )?)
        }
        m => m.cloned(),
    };
    let mask = match mask {
        Some(m) if m.dim() == 3 => Some(ops::unsqueeze(&m, 0)?),
        m => m,
    };
    let (out, _lse) = ops::_scaled_dot_product_flash_attention_for_cpu_with(
        &four(query)?,
        &four(key)?,
        &four(value)?,
        ops::ScaledDotProductFlashAttentionForCpuOptions {
            dropout_p: 0.0,
            is_causal,
            attn_mask: mask.as_ref(),
            scale,
        },
    )?;
    if batched {
        Ok(out)
    } else {
        ops::squeeze_dim(&out, 0)
    }
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
        // [N, L, 3E] -> [3, N, H, L, E/H].
        let qkv = ops::permute(&ops::reshape(&qkv, &[n, l, 3, h, e / h])?, &[2, 0, 3, 1, 4])?;
        let head = |i| ops::select(&qkv, 0, i);
        let out = scaled_dot_product_attention(
            &head(0)?,
            &head(1)?,
            &head(2)?,
            None,
            0.0,
            is_causal,
            None,
        )?;
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

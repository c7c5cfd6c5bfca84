//! Attention: `scaled_dot_product_attention` (each kernel it chooses), the choice itself
//! (`_fused_sdp_choice`), the math path with `_safe_softmax`, and the fused
//! `_scaled_dot_product_flash_attention_for_cpu` (plain, causal, masked, scaled, strided,
//! grouped-query heads) with its backward.

use switchboard_tensor::ScalarType::{BFloat16, Double};

use crate::info::{Family, Grad, OpInfo};
use crate::spec::{mask, t};
use crate::{sample, Registry};

/// The attention entries.
pub fn register(r: &mut Registry) {
    let (q, kv) = (t(&[2, 2, 5, 4]), t(&[2, 2, 6, 4]));
    let v = kv.clone().seed(3);
    r.add(
        OpInfo::new("scaled_dot_product_attention", Family::Nn)
            .differentiable()
            .samples(vec![
                // First, so that gradgradcheck runs on it: the math path (5-d inputs), which
                // is twice differentiable; the fused kernel's backward is not, as in PyTorch.
                sample![t(&[1, 2, 2, 5, 4]), t(&[1, 2, 2, 6, 4]), t(&[1, 2, 2, 6, 4]).seed(3)],
                // The flash kernel: plain, causal, a boolean and a float mask, a scale.
                sample![q.clone(), kv.clone(), v.clone()],
                sample![q.clone(), kv.clone(), v.clone(); is_causal = true],
                sample![q.clone(), kv.clone(), v.clone(); attn_mask = mask(&[5, 6])],
                sample![
                    q.clone(), kv.clone(), v.clone();
                    attn_mask = t(&[2, 1, 5, 6]).no_grad(),
                    scale = 0.3
                ],
                // 3-d inputs (a batch of one for flash), grouped-query heads.
                sample![t(&[2, 5, 4]), t(&[2, 6, 4]), t(&[2, 6, 4]).seed(3); is_causal = true],
                sample![
                    t(&[2, 4, 5, 4]), kv.clone(), v.clone();
                    is_causal = true,
                    enable_gqa = true
                ],
                // The math path: 2-d inputs, a mask that requires grad, a 3-d mask of 4-d
                // inputs, a negative scale, bfloat16 computed in float, grouped heads.
                sample![t(&[5, 4]), t(&[6, 4]), t(&[6, 4]).seed(3); is_causal = true],
                sample![q.clone(), kv.clone(), v.clone(); attn_mask = t(&[5, 6])],
                sample![q.clone(), kv.clone(), v.clone(); attn_mask = mask(&[2, 5, 6])],
                sample![q.clone(), kv.clone(), v.clone(); scale = -0.5],
                sample![
                    q.clone().dtype(BFloat16),
                    kv.clone().dtype(BFloat16),
                    v.clone().dtype(BFloat16);
                    attn_mask = t(&[5, 6]).no_grad()
                ],
                sample![
                    t(&[2, 4, 5, 4]).f64(), kv.clone().f64(), v.clone().f64();
                    attn_mask = t(&[5, 6]).f64().no_grad(),
                    enable_gqa = true
                ],
                // PyTorch's errors.
                sample![q.clone(), kv.clone(), v.clone().f64()].error(),
                sample![t(&[4]), t(&[4]), t(&[4])].error(),
                sample![q.clone(), kv.clone(), v.clone(); attn_mask = mask(&[5, 6]), is_causal = true]
                    .error(),
                sample![t(&[2, 3, 5, 4]), kv.clone(), v.clone(); enable_gqa = true].error(),
                sample![q.clone(), kv.clone(), v.clone(); attn_mask = t(&[5, 6]).dtype(Double)]
                    .error(),
            ]),
    );
    r.add(
        OpInfo::new("_fused_sdp_choice", Family::Nn)
            .samples(vec![
                sample![q.clone(), kv.clone(), v.clone()],
                sample![q.clone(), kv.clone(), v.clone(); dropout_p = 0.1],
                sample![t(&[2, 4, 5, 4]), kv.clone(), v.clone(); enable_gqa = true],
                sample![t(&[2, 4, 5, 4]), kv.clone(), v.clone()],
                sample![t(&[5, 4]), t(&[6, 4]), t(&[6, 4])],
                sample![q.clone(), kv.clone(), t(&[2, 2, 6, 3])],
                sample![q.clone().transposed(), kv.clone(), v.clone()],
            ])
            .meta()
            .grad(Grad::NotImplemented(
                "an int: the not-implemented kernel records nothing, as PyTorch's fallback",
            )),
    );
    r.add(
        OpInfo::new("_scaled_dot_product_attention_math", Family::Nn)
            .differentiable()
            .samples(vec![
                sample![q.clone(), kv.clone(), v.clone()],
                sample![q.clone(), kv.clone(), v.clone(); is_causal = true, scale = 0.3],
                sample![q.clone(), kv.clone(), v.clone(); attn_mask = t(&[2, 1, 5, 6])],
                sample![t(&[2, 4, 5, 4]), kv.clone(), v.clone(); enable_gqa = true],
                sample![
                    q.clone().dtype(BFloat16),
                    kv.clone().dtype(BFloat16),
                    v.clone().dtype(BFloat16)
                ],
                // A given dropout mask (true: keep) instead of random dropout.
                sample![
                    q.clone(), kv.clone(), v.clone();
                    dropout_p = 0.5,
                    dropout_mask = mask(&[2, 2, 5, 6])
                ],
                sample![q.clone(), kv.clone(), v.clone(); attn_mask = t(&[5, 6]), is_causal = true]
                    .error(),
                sample![t(&[2, 3, 5, 4]), kv.clone(), v.clone(); enable_gqa = true].error(),
            ]),
    );
    let inf = f64::NEG_INFINITY;
    // A row whose every element is -inf (zeros, where softmax gives NaN).
    let minus_inf_row = t(&[2, 3]).literal(&[inf, inf, inf, 0.5, -1.0, inf]);
    r.add(
        OpInfo::new("_safe_softmax", Family::Nn)
            .differentiable()
            .samples(vec![
                sample![t(&[2, 3]), 1i64],
                sample![t(&[2, 3, 4]), 0i64],
                sample![t(&[3, 4]).transposed(), -1i64],
                sample![t(&[]), 0i64],
                sample![t(&[0, 3]), 1i64],
                sample![minus_inf_row.clone().no_grad(), 1i64],
                sample![minus_inf_row.no_grad(), 0i64],
                sample![t(&[2, 3]).dtype(BFloat16), 1i64],
                sample![t(&[2, 3]), 1i64, Double],
                sample![t(&[2, 3]), 2i64].error(),
            ]),
    );
    r.add(
        OpInfo::new("_scaled_dot_product_flash_attention_for_cpu", Family::Nn)
            .differentiable()
            .samples(vec![
                sample![q.clone(), kv.clone(), kv.clone().seed(3)],
                sample![q.clone(), kv.clone(), kv.clone().seed(3), 0.0, true],
                sample![
                    q.clone(), kv.clone(), kv.clone().seed(3);
                    attn_mask = t(&[5, 6]).no_grad(),
                    scale = 0.3
                ],
                sample![
                    t(&[2, 4, 5, 4]).transposed(),
                    t(&[2, 1, 6, 4]).strided(),
                    t(&[2, 1, 6, 4]).seed(3),
                    0.0,
                    true
                ],
                sample![q.clone(), kv.clone(), t(&[2, 2, 6, 3])].error(),
                sample![q.clone(), kv.clone(), kv.clone(), 0.5].error(),
            ])
            .meta()
            .grad(Grad::CheckOnce(
                "its backward has no derivative, as in PyTorch (double backward fails)",
            )),
    );
    r.add(
        OpInfo::new(
            "_scaled_dot_product_flash_attention_for_cpu_backward",
            Family::Nn,
        )
        .samples(vec![sample![
            t(&[2, 2, 5, 4]),
            q.clone(),
            kv.clone(),
            kv.clone().seed(3),
            t(&[2, 2, 5, 4]).seed(4),
            t(&[2, 2, 5]).seed(5),
            0.0,
            true
        ]])
        .meta()
        .grad(Grad::NotImplemented(
            "derivative for aten::_scaled_dot_product_flash_attention_for_cpu_backward is \
                 not implemented, as in PyTorch",
        )),
    );
}

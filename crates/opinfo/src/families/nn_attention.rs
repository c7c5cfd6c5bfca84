//! Fused attention: `_scaled_dot_product_flash_attention_for_cpu` (plain, causal, masked,
//! scaled, strided, grouped-query heads) and its backward.

use crate::info::{Family, Grad, OpInfo};
use crate::spec::t;
use crate::{sample, Registry};

/// The fused-attention entries.
pub fn register(r: &mut Registry) {
    let (q, kv) = (t(&[2, 2, 5, 4]), t(&[2, 2, 6, 4]));
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

//! FlopCounterMode against hand-computed FLOPs (PyTorch's formulas; the convolution figures
//! are also what PyTorch 2.15's `FlopCounterMode` reports for the same shapes).

use std::rc::Rc;

use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_dispatcher::{IValue, Result};
use switchboard_modes::{with_mode, FlopCounterMode};
use switchboard_ops::{self as ops, TensorOps};

fn counted(f: impl FnOnce() -> Result<()>) -> Result<Rc<FlopCounterMode>> {
    let flops = FlopCounterMode::new();
    with_mode(flops.clone(), f)?;
    Ok(flops)
}

#[test]
fn matrix_products() -> Result<()> {
    let (a, b) = (ops::ones(&[5, 7])?, ops::ones(&[7, 3])?);
    let flops = counted(|| {
        ops::mm(&a, &b)?; //                              2*5*3*7 = 210
        ops::addmm(&ops::ones(&[3])?, &a, &b)?; //        210, the bias not counted
        ops::bmm(&ops::ones(&[4, 5, 7])?, &ops::ones(&[4, 7, 3])?)?; // 4*210 = 840
        ops::relu(&a)?; //                                no formula: 0
        Ok(())
    })?;
    let c = flops.flop_counts();
    assert_eq!(c["aten::mm"], 210);
    assert_eq!(c["aten::addmm"], 210);
    assert_eq!(c["aten::bmm"], 840);
    assert!(!c.contains_key("aten::relu"));
    assert_eq!(flops.total_flops(), 1260);
    let table = flops.table();
    assert!(
        table.contains("Global") && table.contains("1260"),
        "{table}"
    );
    Ok(())
}

/// `matmul` and `linear` have no formula: as in PyTorch, they are decomposed with the counter
/// active and counted through their parts, whether autograd decomposed them first or not.
#[test]
fn composite_operators_are_counted_through_their_parts() -> Result<()> {
    let (a, b) = (ops::ones(&[5, 7])?, ops::ones(&[7, 3])?);
    let below_autograd = counted(|| {
        let _g = switchboard_dispatcher::AutoDispatchBelowAutograd::new();
        ops::matmul(&a, &b)?;
        ops::matmul(&ops::ones(&[4, 5, 7])?, &ops::ones(&[4, 7, 3])?)?;
        Ok(())
    })?;
    let with_autograd = counted(|| {
        ops::matmul(&a, &b)?;
        ops::matmul(&ops::ones(&[4, 5, 7])?, &ops::ones(&[4, 7, 3])?)?;
        Ok(())
    })?;
    for f in [below_autograd, with_autograd] {
        assert_eq!(f.total_flops(), 210 + 840, "{:?}", f.flop_counts());
        assert!(!f.flop_counts().contains_key("aten::matmul"));
    }
    // linear(x [5, 7], w [3, 7], bias [3]): the matrix product of x by w^T, 210.
    let lin = counted(|| {
        ops::linear_with(
            &a,
            &ops::ones(&[3, 7])?,
            ops::LinearOptions::default().bias(&ops::ones(&[3])?),
        )?;
        Ok(())
    })?;
    assert_eq!(lin.total_flops(), 210);
    Ok(())
}

#[test]
fn convolution_forward_and_backward() -> Result<()> {
    // x [2, 3, 8, 8], w [4, 3, 3, 3], padding 1: out [2, 4, 8, 8].
    let x = ops::ones(&[2, 3, 8, 8])?.requires_grad_(true)?;
    let w = ops::ones(&[4, 3, 3, 3])?.requires_grad_(true)?;
    let flops = counted(|| {
        let y = ops::conv2d_with(&x, &w, ops::Conv2dOptions::default().padding(&[1, 1]))?;
        y.sum()?.backward()
    })?;
    let c = flops.flop_counts();
    // Forward: 2 * 8*8 output points * 3*3 filter * batch 2 * 4 * 3 channels.
    assert_eq!(c["aten::convolution"], 2 * 64 * 9 * 2 * 4 * 3);
    assert_eq!(c["aten::convolution"], 27648); // PyTorch 2.15
                                               // Backward: the input gradient (a transposed convolution, 27648) and the weight gradient
                                               // (a convolution of x^T by grad^T, 27648).
    assert_eq!(c["aten::convolution_backward"], 55296); // PyTorch 2.15
    Ok(())
}

#[test]
fn user_formulas() -> Result<()> {
    let flops = FlopCounterMode::new();
    fn per_element(args: &[IValue], _out: &[IValue]) -> Option<u64> {
        Some(args.first()?.as_tensor()?.numel() as u64)
    }
    flops.register_formula("aten::exp", per_element);
    with_mode(flops.clone(), || ops::ones(&[4, 5])?.exp())?;
    assert_eq!(flops.flop_counts()["aten::exp"], 20);
    flops.reset();
    assert_eq!(flops.total_flops(), 0);
    Ok(())
}

/// Attention on CPU runs the fused kernel, counted as PyTorch 2.15's `FlopCounterMode` counts
/// it: 32768 forward and 81920 backward for q, k, v of `[2, 4, 8, 16]` (its two and five
/// batched products); nothing for the kernel choice, which is no operator call there.
#[test]
fn fused_attention_forward_and_backward() -> Result<()> {
    let q = ops::ones(&[2, 4, 8, 16])?.requires_grad_(true)?;
    let f = counted(|| {
        let options = ops::ScaledDotProductAttentionOptions {
            is_causal: true,
            ..Default::default()
        };
        let out = ops::scaled_dot_product_attention_with(&q, &q, &q, options)?;
        out.sum()?.backward()
    })?;
    let counts = f.flop_counts();
    assert_eq!(
        counts["aten::_scaled_dot_product_flash_attention_for_cpu"],
        32768
    );
    assert_eq!(
        counts["aten::_scaled_dot_product_flash_attention_for_cpu_backward"],
        81920
    );
    assert_eq!(f.total_flops(), 114688, "{counts:?}");
    Ok(())
}

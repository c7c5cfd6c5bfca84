//! Convolution's double backward.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

/// `a + b` over optional terms.
fn accumulate(a: Option<Tensor>, b: Tensor) -> Result<Option<Tensor>> {
    Ok(Some(match a {
        Some(a) => ops::add(&a, &b)?,
        None => b,
    }))
}

/// A convolution's parameters.
struct Conv<'a> {
    stride: &'a [i64],
    padding: &'a [i64],
    dilation: &'a [i64],
    transposed: bool,
    output_padding: &'a [i64],
    groups: i64,
}

impl Conv<'_> {
    fn forward(&self, x: &Tensor, w: &Tensor) -> Result<Tensor> {
        ops::convolution(
            x,
            w,
            None,
            self.stride,
            self.padding,
            self.dilation,
            self.transposed,
            self.output_padding,
            self.groups,
        )
    }

    /// The input (`input_gradient`) or weight gradient of the convolution for `go`.
    fn backward(
        &self,
        go: &Tensor,
        x: &Tensor,
        w: &Tensor,
        input_gradient: bool,
    ) -> Result<Tensor> {
        let mask = [input_gradient, !input_gradient, false];
        let (gi, gw, _) = ops::convolution_backward(
            go,
            x,
            w,
            None,
            self.stride,
            self.padding,
            self.dilation,
            self.transposed,
            self.output_padding,
            self.groups,
            &mask,
        )?;
        Ok(if input_gradient { gi } else { gw })
    }
}

// Note [Convolution double backward]
// The convolution is bilinear: out = B(input, weight) + bias. Its backward gives
// gI = B(., weight)^T gO, gW = B(input, .)^T gO and gb = sum(gO). For the gradients ggI, ggW,
// ggb of those (PyTorch's `_convolution_double_backward`):
//   d/d gO     = B(ggI, weight) + B(input, ggW) + ggb (broadcast over the channel dim),
//   d/d weight = the weight gradient of B(ggI, weight) for the output gradient gO,
//   d/d input  = the input gradient of B(input, ggW) for the output gradient gO,
// all through dispatched convolution / convolution_backward calls, so differentiable again.

/// `convolution_backward`'s gradients of (grad_output, input, weight) from the gradients of its
/// three outputs (Note [Convolution double backward]).
#[allow(clippy::too_many_arguments)] // PyTorch's signature
pub(crate) fn convolution_double_backward(
    ggi: Option<&Tensor>,
    ggw: Option<&Tensor>,
    ggb: Option<&Tensor>,
    go: &Tensor,
    weight: &Tensor,
    input: &Tensor,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
    output_mask: [bool; 3],
) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
    let conv = Conv {
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
    };
    let mut d_go = None;
    if output_mask[0] {
        if let Some(ggi) = ggi {
            d_go = accumulate(d_go, conv.forward(ggi, weight)?)?;
        }
        if let Some(ggw) = ggw {
            d_go = accumulate(d_go, conv.forward(input, ggw)?)?;
        }
        if let Some(ggb) = ggb {
            // The channel dim: 1, or 0 for an unbatched call.
            let c = usize::from(go.dim() == weight.dim());
            let mut shape = vec![1i64; go.dim()];
            if let Some(s) = shape.get_mut(c) {
                *s = -1;
            }
            let b = ops::reshape(ggb, &shape)?;
            d_go = accumulate(d_go, ops::expand(&b, go.sizes())?)?;
        }
    }
    let d_input = match (ggw, output_mask[1]) {
        (Some(ggw), true) => Some(conv.backward(go, input, ggw, true)?),
        _ => None,
    };
    let d_weight = match (ggi, output_mask[2]) {
        (Some(ggi), true) => Some(conv.backward(go, ggi, weight, false)?),
        _ => None,
    };
    Ok((d_go, d_input, d_weight))
}

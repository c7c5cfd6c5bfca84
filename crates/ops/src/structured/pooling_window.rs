//! The window arithmetic of one pooling output, which the 2-d and 3-d CPU kernels share (as
//! PyTorch's `MaxPoolKernel.cpp` and `AvgPoolKernel.cpp` do for both): where a dilated
//! max-pooling window first enters the input, and an average-pooling window clipped to the
//! input with its divisor.

/// The first input position `>= 0` of a max-pooling window starting at `start` (possibly in
/// the padding) and stepping by `dilation`: `start` moved up by whole steps, in closed form (a
/// loop would take `padding / dilation` steps). The 2-d and 3-d kernels share it.
#[inline]
pub fn first_inside(start: i64, dilation: i64) -> i64 {
    if start >= 0 {
        start
    } else {
        start + (-start + dilation - 1) / dilation * dilation
    }
}

/// One output's average-pooling window, per dim (PyTorch's `AvgPoolKernel.cpp`, 2-d and 3-d
/// alike): `[start, end)` clipped to the input (empty for a window wholly in the padding),
/// and its divisor: `divisor_override`, else the window's size clipped to the padded input
/// with `count_include_pad`, else clipped to the input.
#[inline]
pub fn avg_pool_window<const N: usize>(
    output: [i64; N],
    input: [i64; N],
    [kernel, stride, padding]: [[i64; N]; 3],
    count_include_pad: bool,
    divisor_override: Option<i64>,
) -> ([(i64, i64); N], i64) {
    let mut range = [(0, 0); N];
    let (mut padded, mut inside) = (1i64, 1i64);
    for d in 0..N {
        let start = output[d] * stride[d] - padding[d];
        let end = (start + kernel[d]).min(input[d] + padding[d]);
        padded *= end - start;
        let (start, end) = (start.max(0), end.min(input[d]));
        inside *= (end - start).max(0);
        range[d] = (start, end);
    }
    let divisor = divisor_override.unwrap_or(if count_include_pad { padded } else { inside });
    (range, divisor)
}

//! The window of the 2-d and 3-d poolings, written once for both: the `int[2]` / `int[3]`
//! window arguments of their meta functions, and the window arithmetic of one output, which
//! their CPU kernels share (as PyTorch's `MaxPoolKernel.cpp` and `AvgPoolKernel.cpp` do for
//! both): where a dilated max-pooling window first enters the input, and an average-pooling
//! window clipped to the input with its divisor.

use switchboard_tensor::{to_int32, TensorError};

use super::Result;

/// An `int[N]` pooling argument: one value for every dim, or one per dim; `msg` otherwise.
/// PyTorch narrows every window parameter to a C++ `int` as it reads it (`safe_downcast`),
/// which bounds all the window arithmetic: with parameters under 2^31, the output-size formula
/// and the window bounds cannot overflow `i64` for any input size (Note [Checked size
/// arithmetic]).
pub fn pool_dims<const N: usize>(v: &[i64], msg: impl FnOnce() -> String) -> Result<[i64; N]> {
    let dims = match v {
        [a] => [*a; N],
        _ => <[i64; N]>::try_from(v).map_err(|_| TensorError::invalid(msg()))?,
    };
    for d in dims {
        to_int32(d)?;
    }
    Ok(dims)
}

/// The `kernel_size`, `stride` (empty: the kernel), `padding` and `dilation` (1 for average
/// pooling, which has none) of the `N`-d pooling `op`, read as PyTorch's meta functions do,
/// with their messages. `either` is what the messages say after "must": `"either "` for the
/// max poolings and `avg_pool2d`, nothing for `avg_pool3d`.
pub fn pool_window_args<const N: usize>(
    op: &str,
    either: &str,
    [kernel_size, stride, padding]: [&[i64]; 3],
    dilation: Option<&[i64]>,
) -> Result<[[i64; N]; 4]> {
    let ints = if N == 2 { "two" } else { "three" };
    let must = |arg: &'static str, forms: &'static str| {
        move || format!("{op}: {arg} must {either}{forms}, or a tuple of {ints} ints")
    };
    let kernel = pool_dims(kernel_size, must("kernel_size", "be a single int"))?;
    let stride = if stride.is_empty() {
        kernel
    } else {
        pool_dims(stride, must("stride", "be omitted, a single int"))?
    };
    let padding = pool_dims(padding, must("padding", "be a single int"))?;
    let dilation = match dilation {
        Some(d) => pool_dims(d, || {
            format!("{op}: dilation must be either a single int, or a tuple of {ints} ints")
        })?,
        None => [1; N],
    };
    Ok([kernel, stride, padding, dilation])
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// What reading `(kernel_size, stride, padding, dilation)` gives, or its message.
    fn read<const N: usize>(op: &str, either: &str, args: [&[i64]; 4]) -> String {
        let [kernel_size, stride, padding, dilation] = args;
        let window = [kernel_size, stride, padding];
        match pool_window_args::<N>(op, either, window, Some(dilation)) {
            Ok(w) => format!("{w:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn window_arguments_as_pytorch() {
        // One value for every dim; an empty stride is the kernel.
        assert_eq!(
            read::<2>("max_pool2d", "either ", [&[3], &[], &[1], &[2]]),
            "[[3, 3], [3, 3], [1, 1], [2, 2]]"
        );
        assert_eq!(
            read::<3>(
                "max_pool3d",
                "either ",
                [&[1, 2, 3], &[2], &[0, 1, 1], &[1]]
            ),
            "[[1, 2, 3], [2, 2, 2], [0, 1, 1], [1, 1, 1]]"
        );
        assert_eq!(
            pool_window_args::<3>("avg_pool3d", "", [&[2], &[], &[0]], None).unwrap(),
            [[2; 3], [2; 3], [0; 3], [1; 3]]
        );
        // PyTorch 2.15's messages.
        let cases: [(String, &str); 8] = [
            (
                read::<2>("max_pool2d", "either ", [&[2, 2, 2], &[], &[0], &[1]]),
                "max_pool2d: kernel_size must either be a single int, or a tuple of two ints",
            ),
            (
                read::<2>("max_pool2d", "either ", [&[2], &[1, 1, 1], &[0], &[1]]),
                "max_pool2d: stride must either be omitted, a single int, or a tuple of two ints",
            ),
            (
                read::<2>("max_pool2d", "either ", [&[2], &[], &[0, 0, 0], &[1]]),
                "max_pool2d: padding must either be a single int, or a tuple of two ints",
            ),
            (
                read::<2>("max_pool2d", "either ", [&[2], &[], &[0], &[1, 1, 1]]),
                "max_pool2d: dilation must be either a single int, or a tuple of two ints",
            ),
            (
                read::<3>("max_pool3d", "either ", [&[2, 2], &[], &[0], &[1]]),
                "max_pool3d: kernel_size must either be a single int, or a tuple of three ints",
            ),
            (
                read::<3>("max_pool3d", "either ", [&[2], &[1, 1], &[0], &[1]]),
                "max_pool3d: stride must either be omitted, a single int, or a tuple of three ints",
            ),
            (
                read::<3>("max_pool3d", "either ", [&[2], &[], &[0], &[1, 1]]),
                "max_pool3d: dilation must be either a single int, or a tuple of three ints",
            ),
            (
                read::<2>("max_pool2d", "either ", [&[1 << 31], &[], &[0], &[1]]),
                "value cannot be converted to type int without overflow",
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }
}

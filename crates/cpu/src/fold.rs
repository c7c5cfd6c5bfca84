//! Sliding blocks: `im2col` (nn.Unfold: every `kernel_size` block of a padded, dilated input
//! as a column) and `col2im` (nn.Fold: the columns summed back into an image), over batched
//! and unbatched inputs, with PyTorch's shape checks and messages (`Im2Col.h`).

use switchboard_tensor::{wrap_dim, RawOps, ScalarType, Tensor};

use crate::avg_pool::for_each_plane;
use crate::dispatch_dtype::{CpuElement, Num};
use crate::dispatch_floating_types;
use crate::error::{check_cpu_or_meta, invalid, shape_str, Result};

/// The block geometry: kernel, dilation, padding and stride as `(height, width)` pairs.
#[derive(Clone, Copy)]
struct Blocks {
    kernel: (i64, i64),
    dilation: (i64, i64),
    padding: (i64, i64),
    stride: (i64, i64),
}

/// An `int[2]` argument (exactly two values).
fn pair(v: &[i64], name: &str) -> Result<(i64, i64)> {
    match v {
        [a, b] => Ok((*a, *b)),
        _ => Err(invalid(format!(
            "It is expected {name} equals to 2, but got size {}",
            v.len()
        ))),
    }
}

fn parse(kernel_size: &[i64], dilation: &[i64], padding: &[i64], stride: &[i64]) -> Result<Blocks> {
    Ok(Blocks {
        kernel: pair(kernel_size, "kernel_size")?,
        dilation: pair(dilation, "dilation")?,
        padding: pair(padding, "padding")?,
        stride: pair(stride, "stride")?,
    })
}

impl Blocks {
    fn check_kernel(&self) -> Result<()> {
        let (kh, kw) = self.kernel;
        if kw <= 0 || kh <= 0 {
            return Err(invalid(format!(
                "kernel size should be greater than zero, but got kernel_height: {kh} \
                 kernel_width: {kw}"
            )));
        }
        Ok(())
    }
    fn check_dilation(&self) -> Result<()> {
        let (dh, dw) = self.dilation;
        if dw <= 0 || dh <= 0 {
            return Err(invalid(format!(
                "dilation should be greater than zero, but got dilation_height: {dh} \
                 dilation_width: {dw}"
            )));
        }
        Ok(())
    }
    fn check_padding(&self) -> Result<()> {
        let (ph, pw) = self.padding;
        if pw < 0 || ph < 0 {
            return Err(invalid(format!(
                "padding should be non-negative, but got pad_height: {ph} pad_width: {pw}"
            )));
        }
        Ok(())
    }
    fn check_stride(&self) -> Result<()> {
        let (sh, sw) = self.stride;
        if sw <= 0 || sh <= 0 {
            return Err(invalid(format!(
                "stride should be greater than zero, but got stride_height: {sh} \
                 stride_width: {sw}"
            )));
        }
        Ok(())
    }

    /// The number of blocks along a dim of `size` (PyTorch's `div_rtn` formula), in i128:
    /// the parameters are user-given.
    fn count(size: i64, k: i64, d: i64, p: i64, s: i64) -> i64 {
        let n = (size as i128 + 2 * p as i128 - (d as i128 * (k as i128 - 1) + 1))
            .div_euclid(s as i128)
            + 1;
        n.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// The blocks along height and width of an image of `(h, w)`.
    fn grid(&self, h: i64, w: i64) -> (i64, i64) {
        let b = self;
        (
            Self::count(h, b.kernel.0, b.dilation.0, b.padding.0, b.stride.0),
            Self::count(w, b.kernel.1, b.dilation.1, b.padding.1, b.stride.1),
        )
    }

    fn describe(&self) -> String {
        let b = self;
        format!(
            "kernel_size=({}, {}), dilation=({}, {}), padding=({}, {})",
            b.kernel.0, b.kernel.1, b.dilation.0, b.dilation.1, b.padding.0, b.padding.1
        )
    }
}

/// For each `(channel, ki, kj)` row and block `(bi, bj)`: the image position it reads
/// (`None` in the padding). `f(row, column, image_index)`.
fn for_each_tap(
    b: &Blocks,
    (h, w): (i64, i64),
    (bh, bw): (i64, i64),
    mut f: impl FnMut(usize, usize, Option<usize>),
) {
    let (kh, kw) = b.kernel;
    for ki in 0..kh {
        for kj in 0..kw {
            let row = (ki * kw + kj) as usize;
            for bi in 0..bh {
                let y = bi * b.stride.0 - b.padding.0 + ki * b.dilation.0;
                for bj in 0..bw {
                    let x = bj * b.stride.1 - b.padding.1 + kj * b.dilation.1;
                    let col = (bi * bw + bj) as usize;
                    let at = (y >= 0 && y < h && x >= 0 && x < w).then(|| (y * w + x) as usize);
                    f(row, col, at);
                }
            }
        }
    }
}

/// Each channel's blocks as columns: `out` holds `kh * kw` rows of `bh * bw` per channel.
fn unfold_planes<T: CpuElement>(
    x: &[T],
    out: &mut [T],
    b: &Blocks,
    image: (i64, i64),
    grid: (i64, i64),
) {
    let plane = (image.0 * image.1) as usize;
    let blocks = (grid.0 * grid.1) as usize;
    let per_channel = (b.kernel.0 * b.kernel.1) as usize * blocks;
    let zero = T::from_acc(<T::Acc as Num>::ZERO);
    for_each_plane(out, per_channel, per_channel, |p, o| {
        let xp = &x[p * plane..][..plane];
        for_each_tap(b, image, grid, |row, col, at| {
            o[row * blocks + col] = at.map_or(zero, |i| xp[i]);
        });
    });
}

/// Each channel's columns summed back into its image plane.
fn fold_planes<T: CpuElement>(
    cols: &[T],
    out: &mut [T],
    b: &Blocks,
    image: (i64, i64),
    grid: (i64, i64),
) {
    let plane = (image.0 * image.1) as usize;
    let blocks = (grid.0 * grid.1) as usize;
    let per_channel = (b.kernel.0 * b.kernel.1) as usize * blocks;
    let zero = T::from_acc(<T::Acc as Num>::ZERO);
    for_each_plane(out, plane, per_channel, |p, o| {
        o.fill(zero);
        let cp = &cols[p * per_channel..][..per_channel];
        for_each_tap(b, image, grid, |row, col, at| {
            if let Some(i) = at {
                o[i] = T::from_acc(o[i].to_acc().add(cp[row * blocks + col].to_acc()));
            }
        });
    });
}

/// Runs `$body` with `$T` bound to the element type of `$dtype` for the fold kernels'
/// dtypes: the floating types and Bool.
macro_rules! dispatch_fold_types {
    ($dtype:expr, $name:expr, $T:ident => $body:expr) => {{
        match $dtype {
            ScalarType::Bool => {
                type $T = bool;
                $body
            }
            dt => dispatch_floating_types!(dt, $name, $T => $body),
        }
    }};
}

/// `im2col(Tensor self, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride)
/// -> Tensor`: `(N, C, H, W)` to `(N, C * kh * kw, L)`, column `l` holding the `l`-th block
/// (row-major over the block grid), zeros where the block covers the padding.
///
/// ```
/// use switchboard_tensor::Tensor;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[1, 2, 2]).unwrap();
/// let y = switchboard_cpu::im2col(&x, &[1, 2], &[1, 1], &[0, 0], &[1, 1]).unwrap();
/// assert_eq!(y.sizes(), [2, 2]);
/// assert_eq!(y.to_vec::<f32>().unwrap(), [1.0, 3.0, 2.0, 4.0]);
/// ```
pub fn im2col(
    self_: &Tensor,
    kernel_size: &[i64],
    dilation: &[i64],
    padding: &[i64],
    stride: &[i64],
) -> Result<Tensor> {
    check_cpu_or_meta("im2col", self_.device())?;
    let b = parse(kernel_size, dilation, padding, stride)?;
    b.check_kernel()?;
    b.check_dilation()?;
    b.check_padding()?;
    b.check_stride()?;
    let nd = self_.dim();
    let s = self_.sizes();
    // `input.size(1)` and `input.size(2)`: "Dimension out of range" below 3 dims.
    wrap_dim(1, nd)?;
    wrap_dim(2, nd)?;
    let valid = s[1] != 0 && s[2] != 0;
    if !((nd == 3 && s[0] != 0 && valid) || (nd == 4 && valid && s[3] != 0)) {
        return Err(invalid(format!(
            "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero \
             dimensions for input, but got: {}",
            shape_str(s)
        )));
    }
    let (h, w) = (s[nd - 2], s[nd - 1]);
    let (bh, bw) = b.grid(h, w);
    if bh < 1 || bw < 1 {
        return Err(invalid(format!(
            "Given input with spatial size ({h}, {w}), {}, calculated shape of the array of \
             sliding blocks as ({bh}, {bw}), but its components must be at least one.",
            b.describe()
        )));
    }
    let c = s[nd - 3];
    let rows = c * b.kernel.0 * b.kernel.1;
    let blocks = bh
        .checked_mul(bw)
        .ok_or_else(|| invalid("im2col: the number of sliding blocks is too large"))?;
    let mut shape = s[..nd - 3].to_vec();
    shape.extend([rows, blocks]);
    let (dtype, device) = (self_.dtype(), self_.device());
    let out = Tensor::empty_on(&shape, dtype, device)?;
    if device.is_meta() {
        return Ok(out);
    }
    let x = self_.contiguous()?;
    dispatch_fold_types!(dtype, "im2col_out_cpu", T => {
        unfold_planes::<T>(&x.data::<T>()?, &mut out.data_mut::<T>()?, &b, (h, w), (bh, bw));
        Ok(())
    })?;
    Ok(out)
}

/// `col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation, int[2]
/// padding, int[2] stride) -> Tensor`: `(N, C * kh * kw, L)` to `(N, C, H, W)`, each column's
/// values added back at the positions its block covers (overlaps sum, the padding dropped).
pub fn col2im(
    self_: &Tensor,
    output_size: &[i64],
    kernel_size: &[i64],
    dilation: &[i64],
    padding: &[i64],
    stride: &[i64],
) -> Result<Tensor> {
    check_cpu_or_meta("col2im", self_.device())?;
    let (oh, ow) = pair(output_size, "output_size")?;
    let b = parse(kernel_size, dilation, padding, stride)?;
    b.check_kernel()?;
    b.check_stride()?;
    b.check_dilation()?;
    b.check_padding()?;
    let nd = self_.dim();
    let s = self_.sizes();
    let valid = (nd == 2 && s[0] != 0 && s[1] != 0) || (nd == 3 && s[1] != 0 && s[2] != 0);
    if !valid {
        return Err(invalid(format!(
            "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and \
             non-zero dimensions for input, but got: {}",
            shape_str(s)
        )));
    }
    let rows = s[nd - 2];
    let (kh, kw) = b.kernel;
    let k = kh.saturating_mul(kw);
    if rows % k != 0 {
        return Err(invalid(format!(
            "Expected size of input's dimension 1 to be divisible by the product of \
             kernel_size, but got input.size(1)={rows} and kernel_size=({kh}, {kw})."
        )));
    }
    let length = s[nd - 1];
    let (bh, bw) = b.grid(oh, ow);
    let given = || {
        format!(
            "Given output_size=({oh}, {ow}), {}, stride=({}, {})",
            b.describe(),
            b.stride.0,
            b.stride.1
        )
    };
    if bh.checked_mul(bw) != Some(length) {
        return Err(invalid(format!(
            "{}, expected size of input's dimension 2 to match the calculated number of sliding \
             blocks {bh} * {bw} = {}, but got input.size(2)={length}.",
            given(),
            bh.saturating_mul(bw)
        )));
    }
    if bh < 1 || bw < 1 {
        return Err(invalid(format!(
            "{}, calculated shape of the array of sliding blocks as ({bh}, {bw}), which is too \
             small (non-positive)",
            given()
        )));
    }
    if ow < 1 || oh < 1 {
        return Err(invalid(format!(
            "Expected output spatial size to be positive, but got: output_size=({oh}, {ow})."
        )));
    }
    let c = rows / k;
    let mut shape = s[..nd - 2].to_vec();
    shape.extend([c, oh, ow]);
    let (dtype, device) = (self_.dtype(), self_.device());
    let out = Tensor::empty_on(&shape, dtype, device)?;
    if device.is_meta() {
        return Ok(out);
    }
    let cols = self_.contiguous()?;
    dispatch_fold_types!(dtype, "col2im_out_cpu", T => {
        fold_planes::<T>(&cols.data::<T>()?, &mut out.data_mut::<T>()?, &b, (oh, ow), (bh, bw));
        Ok(())
    })?;
    Ok(out)
}

#[cfg(test)]
#[path = "fold_tests.rs"]
mod tests;

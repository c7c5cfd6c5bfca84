//! Grid sampling: PyTorch's argument checks of `grid_sampler_*` (GridSamplerUtils.h, shared
//! with the CPU kernels), the `grid_sampler` composite (CompositeImplicitAutograd), and
//! `affine_grid_generator` (CompositeExplicitAutograd) with its backward (implicit).

use switchboard_dispatcher::Result;
use switchboard_tensor::{Tensor, TensorError};

use super::error;

fn sizes_str(t: &Tensor) -> String {
    let items: Vec<String> = t.sizes().iter().map(|x| x.to_string()).collect();
    format!("[{}]", items.join(", "))
}

/// PyTorch's `check_grid_sampler_common`: one device, one batch size, a grid with one
/// coordinate per spatial dim of the input, and non-empty spatial dims.
pub fn check_grid_sampler_common(input: &Tensor, grid: &Tensor) -> Result<(), TensorError> {
    for (t, dim) in [(input, 0), (grid, -1)] {
        if t.dim() == 0 {
            return Err(TensorError::invalid(format!(
                "Dimension specified as {dim} but tensor has no dimensions"
            )));
        }
    }
    if input.device() != grid.device() {
        return Err(TensorError::invalid(format!(
            "grid_sampler(): expected input and grid to be on same device, but input is on {} \
             and grid is on {}",
            input.device(),
            grid.device()
        )));
    }
    if input.sizes()[0] != grid.sizes()[0] {
        return Err(TensorError::invalid(format!(
            "grid_sampler(): expected grid and input to have same batch size, but got input \
             with sizes {} and grid with sizes {}",
            sizes_str(input),
            sizes_str(grid)
        )));
    }
    let spatial = input.dim() as i64 - 2;
    if grid.sizes()[grid.dim() - 1] != spatial {
        return Err(TensorError::invalid(format!(
            "grid_sampler(): expected grid to have size {spatial} in last dimension, but got \
             grid with sizes {}",
            sizes_str(grid)
        )));
    }
    for i in 2..input.dim() {
        if input.sizes()[i] <= 0 {
            return Err(TensorError::invalid(format!(
                "grid_sampler(): expected input to have non-empty spatial dimensions, but input \
                 has sizes {} with dimension {i} being empty",
                sizes_str(input)
            )));
        }
    }
    Ok(())
}

/// PyTorch's `check_grid_sampler_2d`: a 4-d input and a 4-d grid.
pub fn check_grid_sampler_2d(input: &Tensor, grid: &Tensor) -> Result<(), TensorError> {
    if input.dim() != 4 || grid.dim() != 4 {
        return Err(TensorError::invalid(format!(
            "grid_sampler(): expected 4D input and grid with same number of dimensions, but \
             got input with sizes {} and grid with sizes {}",
            sizes_str(input),
            sizes_str(grid)
        )));
    }
    Ok(())
}

/// `grid_sampler(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool
/// align_corners) -> Tensor`: `grid_sampler_2d` for 4-d inputs. PyTorch sends the others to
/// `grid_sampler_3d`, which is not implemented here: they get its checks, then an error.
pub fn grid_sampler(
    input: &Tensor,
    grid: &Tensor,
    interpolation_mode: i64,
    padding_mode: i64,
    align_corners: bool,
) -> Result<Tensor> {
    if input.dim() == 4 {
        return crate::grid_sampler_2d(
            input,
            grid,
            interpolation_mode,
            padding_mode,
            align_corners,
        );
    }
    check_grid_sampler_common(input, grid)?;
    if input.dim() != 5 || grid.dim() != 5 {
        return Err(error(format!(
            "grid_sampler(): expected 5D input and grid with same number of dimensions, but got \
             input with sizes {} and grid with sizes {}",
            sizes_str(input),
            sizes_str(grid)
        )));
    }
    if interpolation_mode == 2 {
        return Err(error(
            "grid_sampler(): bicubic interpolation only supports 4D input",
        ));
    }
    Err(error(
        "grid_sampler(): 5-d (volumetric) sampling needs grid_sampler_3d, which is not \
         implemented; only 4-d inputs are supported",
    ))
}

/// PyTorch's `linspace_from_neg_one`: `steps` points from -1 to 1 (a single point is 0),
/// scaled by `(steps - 1) / steps` without `align_corners` (the pixel centres).
fn linspace_from_neg_one(steps: i64, align_corners: bool) -> Vec<f64> {
    if steps <= 1 {
        return vec![0.0; steps.max(0) as usize];
    }
    let step = 2.0 / (steps - 1) as f64;
    let half = steps / 2;
    (0..steps)
        .map(|i| {
            // linspace fills the second half from the end, as PyTorch's kernel does.
            let v = if i < half {
                -1.0 + step * i as f64
            } else {
                1.0 - step * (steps - 1 - i) as f64
            };
            if align_corners {
                v
            } else {
                v * (steps - 1) as f64 / steps as f64
            }
        })
        .collect()
}

/// The `(N, H, W, 3)` base grid of PyTorch's `make_base_grid_4D`: `(x, y, 1)` per location,
/// in `like`'s dtype and device.
fn base_grid(like: &Tensor, n: i64, h: i64, w: i64, align_corners: bool) -> Result<Tensor> {
    let (xs, ys) = (
        linspace_from_neg_one(w, align_corners),
        linspace_from_neg_one(h, align_corners),
    );
    let plane = (h as usize).saturating_mul(w as usize);
    let mut v = Vec::with_capacity(plane.saturating_mul(3));
    for &y in &ys {
        for &x in &xs {
            v.extend([x, y, 1.0]);
        }
    }
    let one = Tensor::from_vec(v, &[1, h, w, 3])?;
    let one = crate::_to_copy_with(
        &one,
        crate::ToCopyOptions {
            dtype: Some(like.dtype()),
            device: Some(like.device()),
            ..Default::default()
        },
    )?;
    crate::expand(&one, &[n, h, w, 3])
}

/// The `[N, C, H, W]` size of an affine grid, with PyTorch's checks.
fn affine_size(size: &[i64]) -> Result<[i64; 4]> {
    match *size {
        [n, c, h, w] => {
            if let Some(&bad) = size.iter().find(|&&s| s < 0) {
                return Err(error(format!(
                    "affine_grid_generator: expected non-negative sizes, but got {bad} in {size:?}"
                )));
            }
            Ok([n, c, h, w])
        }
        [_, _, _, _, _] => Err(error(
            "affine_grid_generator: 5-d (volumetric) grids are not implemented; only 4-d sizes \
             are supported",
        )),
        _ => Err(error(
            "AffineGridGenerator needs 4d (spatial) or 5d (volumetric) inputs.",
        )),
    }
}

/// `affine_grid_generator(Tensor theta, SymInt[] size, bool align_corners) -> Tensor`: the
/// `(N, H, W, 2)` sampling grid of the affine maps `theta` (`(N, 2, 3)`) for an output of
/// `size` `[N, C, H, W]`: each location's `(x, y, 1)` times `theta` transposed.
pub fn affine_grid_generator(theta: &Tensor, size: &[i64], align_corners: bool) -> Result<Tensor> {
    let [n, _, h, w] = affine_size(size)?;
    let hw = h
        .checked_mul(w)
        .ok_or_else(|| error(format!("affine_grid_generator: size {size:?} is too large")))?;
    let base = crate::reshape(&base_grid(theta, n, h, w, align_corners)?, &[n, hw, 3])?;
    let grid = crate::bmm(&base, &crate::transpose(theta, 1, 2)?)?;
    crate::view(&grid, &[n, h, w, 2])
}

/// `affine_grid_generator_backward(Tensor grad, SymInt[] size, bool align_corners) -> Tensor`:
/// the gradient with respect to `theta`, `(base^T grad)^T` per batch element.
pub fn affine_grid_generator_backward(
    grad: &Tensor,
    size: &[i64],
    align_corners: bool,
) -> Result<Tensor> {
    let [n, _, h, w] = affine_size(size)?;
    if grad.sizes() != [n, h, w, 2] {
        return Err(error(format!(
            "affine_grid_generator_backward: expected grad of sizes [{n}, {h}, {w}, 2], but got \
             {}",
            sizes_str(grad)
        )));
    }
    let hw = h * w;
    let base = crate::reshape(&base_grid(grad, n, h, w, align_corners)?, &[n, hw, 3])?;
    let g = crate::bmm(
        &crate::transpose(&base, 1, 2)?,
        &crate::reshape(grad, &[n, hw, 2])?,
    )?;
    crate::transpose(&g, 1, 2)
}

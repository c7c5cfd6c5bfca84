//! `torch.nn.functional.interpolate` for the upsampling operators Switchboard has: `nearest`
//! and `bilinear` on 4-D (N, C, H, W) input, with PyTorch's argument checks and errors.

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use crate::module::value_error;

/// The arguments of [`interpolate`] after the input, with PyTorch's defaults
/// (`mode="nearest"`, no size, no scale factor).
#[derive(Clone, Debug)]
pub struct Interpolate {
    /// The output's spatial size (one value per spatial dimension, or one for all).
    pub size: Option<Vec<i64>>,
    /// The multiplier of each spatial size (one value per spatial dimension, or one for all).
    pub scale_factor: Option<Vec<f64>>,
    /// `nearest`, `bilinear` (and PyTorch's other names, refused here when Switchboard has no
    /// operator for them).
    pub mode: String,
    /// For the interpolating modes: align the corner pixels' centres (default false).
    pub align_corners: Option<bool>,
    /// Compute the output size from the scale factor and pass no scale to the operator.
    pub recompute_scale_factor: Option<bool>,
    /// Anti-aliasing (PyTorch's `_upsample_bilinear2d_aa`), not available here.
    pub antialias: bool,
}

impl Default for Interpolate {
    fn default() -> Interpolate {
        Interpolate {
            size: None,
            scale_factor: None,
            mode: "nearest".into(),
            align_corners: None,
            recompute_scale_factor: None,
            antialias: false,
        }
    }
}

impl Interpolate {
    /// An output of `size`.
    pub fn size(mut self, size: &[i64]) -> Interpolate {
        self.size = Some(size.to_vec());
        self
    }

    /// Spatial sizes multiplied by `scale_factor`.
    pub fn scale_factor(mut self, scale_factor: &[f64]) -> Interpolate {
        self.scale_factor = Some(scale_factor.to_vec());
        self
    }

    /// The interpolation mode.
    pub fn mode(mut self, mode: &str) -> Interpolate {
        self.mode = mode.into();
        self
    }

    /// `align_corners`.
    pub fn align_corners(mut self, align_corners: bool) -> Interpolate {
        self.align_corners = Some(align_corners);
        self
    }

    /// `recompute_scale_factor`.
    pub fn recompute_scale_factor(mut self, recompute: bool) -> Interpolate {
        self.recompute_scale_factor = Some(recompute);
        self
    }
}

fn list<T: std::fmt::Debug>(v: &[T]) -> String {
    format!("{v:?}")
}

/// `torch.nn.functional.interpolate(input, size, scale_factor, mode, align_corners,
/// recompute_scale_factor, antialias)`: resizes the spatial dimensions of a 4-D input with
/// `upsample_nearest2d` or `upsample_bilinear2d`.
///
/// ```
/// use switchboard_nn::{interpolate, Interpolate};
/// use switchboard_tensor::Tensor;
/// # use switchboard_cpu as _;
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[1, 1, 2, 2]).unwrap();
/// let y = interpolate(&x, &Interpolate::default().scale_factor(&[2.0])).unwrap();
/// assert_eq!(y.sizes(), &[1, 1, 4, 4]);
/// let z = interpolate(&x, &Interpolate::default().size(&[3, 3]).mode("bilinear")).unwrap();
/// assert_eq!(z.sizes(), &[1, 1, 3, 3]);
/// ```
pub fn interpolate(input: &Tensor, options: &Interpolate) -> Result<Tensor> {
    let mode = options.mode.as_str();
    let interpolating = !matches!(mode, "nearest" | "area" | "nearest-exact");
    if !interpolating && options.align_corners.is_some() {
        return Err(value_error(
            "align_corners option can only be set with the interpolating modes: linear | \
             bilinear | bicubic | trilinear"
                .into(),
        ));
    }
    let align_corners = options.align_corners.unwrap_or(false);
    let dim = input.dim().saturating_sub(2);
    let spatial = list(&input.sizes()[input.sizes().len().min(2)..]);
    let (mut output_size, mut scale_factors) = match (&options.size, &options.scale_factor) {
        (Some(_), Some(_)) => {
            return Err(value_error(
                "only one of size or scale_factor should be defined".into(),
            ))
        }
        (Some(size), None) => {
            let size = match size.len() {
                1 if dim != 1 => vec![size[0]; dim],
                n if n == dim => size.clone(),
                _ => {
                    return Err(value_error(format!(
                        "Input and output must have the same number of spatial dimensions, but \
                         got input with spatial dimensions of {spatial} and output size of {}. \
                         Please provide input tensor in (N, C, d1, d2, ...,dK) format and output \
                         size in (o1, o2, ...,oK) format.",
                        list(size)
                    )))
                }
            };
            (Some(size), None)
        }
        (None, Some(scale)) => {
            let scale = match scale.len() {
                1 if dim != 1 => vec![scale[0]; dim],
                n if n == dim => scale.clone(),
                _ => {
                    return Err(value_error(format!(
                        "Input and scale_factor must have the same number of spatial \
                         dimensions, but got input with spatial dimensions of {spatial} and \
                         scale_factor of shape {}. Please provide input tensor in (N, C, d1, \
                         d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.",
                        list(scale)
                    )))
                }
            };
            (None, Some(scale))
        }
        (None, None) => {
            return Err(value_error(
                "either size or scale_factor should be defined".into(),
            ))
        }
    };
    let recompute = options.recompute_scale_factor == Some(true) || mode == "area";
    if options.recompute_scale_factor == Some(true) && options.size.is_some() {
        return Err(value_error(
            "recompute_scale_factor is not meaningful with an explicit size.".into(),
        ));
    }
    if recompute {
        if let Some(scales) = scale_factors.take() {
            let sizes = input.sizes().get(2..).unwrap_or_default();
            output_size = Some(
                sizes
                    .iter()
                    .zip(&scales)
                    .map(|(&s, &f)| (s as f64 * f).floor() as i64)
                    .collect(),
            );
        }
    }
    if options.antialias && !(matches!(mode, "bilinear" | "bicubic") && input.dim() == 4) {
        return Err(value_error(
            "Anti-alias option is restricted to bilinear and bicubic modes and requires a 4-D \
             tensor as input"
                .into(),
        ));
    }
    let (size, scales) = (output_size.as_deref(), scale_factors.as_deref());
    match (input.dim(), mode) {
        (4, "nearest") => ops::upsample_nearest2d_vec(input, size, scales),
        (4, "bilinear") if !options.antialias => {
            ops::upsample_bilinear2d_vec(input, size, align_corners, scales)
        }
        (3, "bilinear") => Err(value_error(
            "Got 3D input, but bilinear mode needs 4D input".into(),
        )),
        (5, "bilinear") => Err(value_error(
            "Got 5D input, but bilinear mode needs 4D input".into(),
        )),
        (
            3..=5,
            "nearest" | "linear" | "bilinear" | "bicubic" | "trilinear" | "lanczos" | "area"
            | "nearest-exact",
        ) => {
            Err(value_error(format!(
            "interpolate: mode '{mode}'{} on {}-D input needs an upsampling operator Switchboard \
             does not have (it has upsample_nearest2d and upsample_bilinear2d)",
            if options.antialias { " with antialias" } else { "" },
            input.dim()
        )))
        }
        _ => Err(value_error(format!(
            "Input Error: Only 3D, 4D and 5D input Tensors supported (got {}D) for the modes: \
             nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact \
             (got {mode})",
            input.dim()
        ))),
    }
}

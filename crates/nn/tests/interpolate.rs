//! `interpolate` against PyTorch 2.15's `torch.nn.functional.interpolate` (values recorded on
//! the CPU from `torch.arange(1., 7.).reshape(1, 1, 2, 3)`).

use switchboard_nn::{interpolate, Interpolate};
use switchboard_tensor::{RawOps, Tensor};

use switchboard_cpu as _;

fn x() -> Tensor {
    Tensor::from_vec((1..=6).map(|v| v as f32).collect(), &[1, 1, 2, 3]).unwrap()
}

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-6, "{got:?} against {want:?}");
    }
}

#[test]
fn nearest_and_bilinear_as_pytorch() {
    let y = interpolate(&x(), &Interpolate::default().scale_factor(&[2.0])).unwrap();
    assert_eq!(y.sizes(), &[1, 1, 4, 6]);
    assert_eq!(
        values(&y),
        [
            1., 1., 2., 2., 3., 3., 1., 1., 2., 2., 3., 3., 4., 4., 5., 5., 6., 6., 4., 4., 5., 5.,
            6., 6.
        ]
    );
    let bilinear = Interpolate::default().size(&[3, 4]).mode("bilinear");
    close(
        &values(&interpolate(&x(), &bilinear).unwrap()),
        &[
            1.0, 1.625, 2.375, 3.0, 2.5, 3.125, 3.875, 4.5, 4.0, 4.625, 5.375, 6.0,
        ],
    );
    close(
        &values(&interpolate(&x(), &bilinear.clone().align_corners(true)).unwrap()),
        &[
            1.0, 1.6666667, 2.3333335, 3.0, 2.5, 3.1666667, 3.8333335, 4.5, 4.0, 4.666667,
            5.3333335, 6.0,
        ],
    );
    // A scale factor reaches the kernel unless recompute_scale_factor derives the size.
    let scaled = Interpolate::default().scale_factor(&[1.5]).mode("bilinear");
    let y = interpolate(&x(), &scaled).unwrap();
    assert_eq!(y.sizes(), &[1, 1, 3, 4]);
    close(
        &values(&y),
        &[
            1.0, 1.5, 2.1666667, 2.8333333, 2.5, 3.0, 3.6666667, 4.3333335, 4.0, 4.5, 5.166667,
            5.833333,
        ],
    );
    let y = interpolate(&x(), &scaled.recompute_scale_factor(true)).unwrap();
    close(
        &values(&y),
        &[
            1.0, 1.625, 2.375, 3.0, 2.5, 3.125, 3.875, 4.5, 4.0, 4.625, 5.375, 6.0,
        ],
    );
}

#[test]
fn bad_arguments_are_pytorchs_errors() {
    let err = |o: Interpolate, t: &Tensor| interpolate(t, &o).unwrap_err().to_string();
    let d = Interpolate::default;
    assert_eq!(
        err(d().size(&[3]).scale_factor(&[2.0]), &x()),
        "only one of size or scale_factor should be defined"
    );
    assert_eq!(
        err(d(), &x()),
        "either size or scale_factor should be defined"
    );
    assert!(err(d().size(&[1, 2, 3]), &x()).starts_with(
        "Input and output must have the same number of spatial dimensions, but got input with \
         spatial dimensions of [2, 3] and output size of [1, 2, 3]."
    ));
    assert_eq!(
        err(d().scale_factor(&[2.0]).align_corners(true), &x()),
        "align_corners option can only be set with the interpolating modes: linear | bilinear | \
         bicubic | trilinear"
    );
    assert_eq!(
        err(d().size(&[3, 3]).recompute_scale_factor(true), &x()),
        "recompute_scale_factor is not meaningful with an explicit size."
    );
    let three_d = x().reshape(&[1, 2, 3]).unwrap();
    assert_eq!(
        err(d().size(&[3]).mode("bilinear"), &three_d),
        "Got 3D input, but bilinear mode needs 4D input"
    );
    assert_eq!(
        err(d().size(&[3]).mode("cubic"), &x()),
        "Input Error: Only 3D, 4D and 5D input Tensors supported (got 4D) for the modes: nearest \
         | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact (got cubic)"
    );
    // Fewer than 3 dimensions: PyTorch's input error, never a panic.
    let one_d = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    assert!(err(
        d().scale_factor(&[2.0]).recompute_scale_factor(true),
        &one_d
    )
    .starts_with("Input Error: Only 3D, 4D and 5D input Tensors supported (got 1D)"));
}

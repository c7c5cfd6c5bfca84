//! `nonzero` and its relatives (`nonzero.out`, `nonzero_static`, `argwhere`, `nonzero_numpy`,
//! `where(condition)`) and `view.dtype` through the dispatcher, with autograd and Meta in
//! the way: values, layouts and messages of PyTorch 2.15 (`torch.ops.aten.*` on the same
//! inputs).

use switchboard::ops::{self, TensorOps};
use switchboard::prelude::*;

mod common;
use common::*;

fn mixed() -> Tensor {
    Tensor::from_vec(vec![0.0f32, 1.5, -0.0, f32::NAN, 0.0, -2.0], &[2, 3]).unwrap()
}

fn longs(t: &Tensor) -> Vec<i64> {
    t.to_vec::<i64>().unwrap()
}

fn meta(t: &Tensor) -> Tensor {
    ops::empty_with(
        t.sizes(),
        ops::EmptyOptions::default()
            .dtype(t.dtype())
            .device(Device::META),
    )
    .unwrap()
}

#[test]
fn nonzero_family_matches_pytorch() {
    let x = mixed();
    let nz = ops::nonzero(&x).unwrap();
    assert_eq!((nz.sizes(), nz.strides()), (&[3i64, 2][..], &[1i64, 3][..]));
    assert_eq!(longs(&nz), [0, 1, 1, 0, 1, 2]);
    assert_eq!(longs(&x.nonzero().unwrap()), longs(&nz));
    assert_eq!(longs(&ops::argwhere(&x).unwrap()), longs(&nz));
    // where(condition) = nonzero_numpy(condition): the columns, views of nonzero's result.
    let cols = ops::where_default(&x).unwrap();
    assert_eq!(cols.len(), 2);
    assert_eq!(
        (longs(&cols[0]), longs(&cols[1])),
        (vec![0, 1, 1], vec![1, 0, 2])
    );
    assert_eq!(cols[0].strides(), &[1]);
    assert!(cols[0].is_alias_of(&cols[1]));
    let numpy = ops::nonzero_numpy(&x).unwrap();
    assert_eq!(longs(&numpy[1]), [1, 0, 2]);
    // A 0-dim condition counts as one element of a 1-d one.
    let one = Tensor::from_vec(vec![5i64], &[]).unwrap();
    let zero = Tensor::from_vec(vec![0i64], &[]).unwrap();
    assert_eq!(longs(&ops::where_default(&one).unwrap()[0]), [0]);
    assert_eq!(ops::where_default(&zero).unwrap()[0].sizes(), &[0]);
    assert_eq!(ops::nonzero(&one).unwrap().sizes(), &[1, 0]);
    let empty = ops::nonzero(&zero).unwrap();
    assert_eq!(
        (empty.sizes(), empty.strides()),
        (&[0i64, 0][..], &[1i64, 0][..])
    );
    // nonzero_static: exactly `size` rows, padded with fill_value.
    let s = ops::nonzero_static_with(&x, 5, ops::NonzeroStaticOptions::default().fill_value(-3))
        .unwrap();
    assert_eq!((s.sizes(), s.strides()), (&[5i64, 2][..], &[2i64, 1][..]));
    assert_eq!(longs(&s), [0, 1, 1, 0, 1, 2, -3, -3, -3, -3]);
    assert_eq!(longs(&ops::nonzero_static(&x, 1).unwrap()), [0, 1]);
    assert_eq!(
        ops::nonzero_static(&x, -1).unwrap_err().to_string(),
        "nonzero_static: 'size' must be an non-negative integer"
    );
}

#[test]
fn out_forms_match_pytorch() {
    let x = mixed();
    // Resized to the result's shape, with its column-major strides.
    let out = Tensor::zeros(&[5, 5], ScalarType::Long).unwrap();
    let r = ops::nonzero_out(&x, &out).unwrap();
    assert_eq!((r.sizes(), r.strides()), (&[3i64, 2][..], &[1i64, 3][..]));
    assert_eq!(longs(&r), [0, 1, 1, 0, 1, 2]);
    // Already of the result's shape: written through its own strides.
    let out = Tensor::zeros(&[3, 2], ScalarType::Long).unwrap();
    let r = ops::nonzero_out(&x, &out).unwrap();
    assert_eq!(r.strides(), &[2, 1]);
    assert_eq!(longs(&out), [0, 1, 1, 0, 1, 2]);
    let wrong = Tensor::zeros(&[0], ScalarType::Int).unwrap();
    assert!(ops::nonzero_out(&x, &wrong)
        .unwrap_err()
        .to_string()
        .contains("nonzero: Expected out tensor to have scalar type Long but got scalar typeInt"));
    let s =
        ops::nonzero_static_out(&x, 4, &Tensor::zeros(&[0], ScalarType::Long).unwrap()).unwrap();
    assert_eq!(longs(&s), [0, 1, 1, 0, 1, 2, -1, -1]);
}

#[test]
fn meta_fails_where_the_shape_needs_data() {
    let m = meta(&mixed());
    for r in [
        ops::nonzero(&m),
        ops::argwhere(&m),
        ops::nonzero_out(&m, &meta(&Tensor::zeros(&[0], ScalarType::Long).unwrap())),
    ] {
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("The register_meta function for torch.nonzero() raises unimplemented"),
            "{e}"
        );
    }
    assert!(ops::where_default(&m).is_err());
    let s = ops::nonzero_static(&m, 4).unwrap();
    assert_eq!((s.sizes(), s.is_meta()), (&[4i64, 2][..], true));
}

#[test]
fn nothing_here_is_differentiable() {
    let x = r(&[2, 3], 1, -1.0, 1.0).requires_grad_(true).unwrap();
    for t in [
        ops::nonzero(&x).unwrap(),
        ops::argwhere(&x).unwrap(),
        ops::nonzero_static(&x, 2).unwrap(),
        ops::where_default(&x).unwrap().remove(0),
        x.view_dtype(ScalarType::Int).unwrap(),
        // Even the same dtype: view.dtype's output is not differentiable in PyTorch.
        x.view_dtype(ScalarType::Double).unwrap(),
    ] {
        assert!(!t.requires_grad() && t.grad_fn().is_none());
    }
}

#[test]
fn view_dtype_is_a_non_differentiable_view() {
    let a = Tensor::zeros(&[4], ScalarType::Float).unwrap();
    let b = a.view_dtype(ScalarType::Int).unwrap();
    assert!(b.is_alias_of(&a));
    // Written through the view: the base sees it, and the shared version counter moves.
    ops::fill_(&b.narrow(0, 0, 1).unwrap(), 1).unwrap();
    assert_eq!(a.to_vec::<f32>().unwrap()[0], f32::from_bits(1));
    assert_eq!((a.version(), b.version()), (1, 1));
    // As in PyTorch's make_variable_non_differentiable_view: no `_base`.
    let x = r(&[2], 2, -1.0, 1.0).requires_grad_(true).unwrap();
    let y = x.view_dtype(ScalarType::Long).unwrap();
    assert!(y.base().is_none() && !y.requires_grad());
    // A write through it is seen by autograd's version checks of saved tensors.
    let z = ops::exp(&ops::mul_scalar(&x, 2).unwrap()).unwrap();
    ops::zero_(&z.view_dtype(ScalarType::Int).unwrap()).unwrap();
    let e = ops::sum(&z).unwrap().backward().unwrap_err().to_string();
    assert!(e.contains("modified by an inplace operation"), "{e}");
    // Meta: the same geometry and errors, no data.
    let m = meta(&Tensor::zeros(&[2, 4], ScalarType::Float).unwrap());
    let v = m.view_dtype(ScalarType::Double).unwrap();
    assert_eq!(
        (v.sizes(), v.strides(), v.is_meta()),
        (&[2i64, 2][..], &[2i64, 1][..], true)
    );
    assert_eq!(
        meta(&Tensor::zeros(&[2, 3], ScalarType::Float).unwrap())
            .view_dtype(ScalarType::Double)
            .unwrap_err()
            .to_string()
            .lines()
            .next()
            .unwrap(),
        "self.size(-1) must be divisible by 2 to view Float as Double (different element \
         sizes), but got 3"
    );
}

//! In-place operators and views on lazy tensors behave exactly as on CPU (Note [Lazy mutations
//! and views]): the same program runs on both devices and every tensor it made is compared,
//! values, metadata, versions and aliasing.

mod common;

use common::*;
use switchboard_autograd::AutogradTensor;
use switchboard_opinfo::viewed_input;
use switchboard_ops as ops;
use switchboard_tensor::{Device, ScalarType, Tensor};

/// Runs `program` on CPU tensors and on lazy tensors (its `input` argument moves a CPU
/// tensor to the device) and checks that every tensor it returns agrees.
/// On a device handing out functional tensors (Note [Lazy tensors are functional]), strides
/// are compared where functionalization keeps them: for views of the inputs (Note [Comparing
/// functionalized calls] in switchboard-opinfo).
fn same_on_both(program: impl Fn(&dyn Fn(Tensor) -> Tensor) -> Vec<Tensor>) {
    let d = own_device();
    let inputs = std::cell::RefCell::new(Vec::new());
    let cpu = program(&|t| {
        inputs.borrow_mut().push(t.clone());
        t
    });
    let lazy_out = program(&|t| d.lz(&t));
    assert_eq!(cpu.len(), lazy_out.len());
    let inputs = inputs.into_inner();
    for (i, (c, l)) in cpu.iter().zip(&lazy_out).enumerate() {
        assert_eq!(l.device(), d.device(), "tensor {i}");
        assert_eq!(c.sizes(), l.sizes(), "sizes of tensor {i}");
        if viewed_input(c, &inputs).is_some() {
            assert_eq!(c.strides(), l.strides(), "strides of tensor {i}");
        }
        assert_eq!(
            c.storage_offset(),
            l.storage_offset(),
            "offset of tensor {i}"
        );
        assert_eq!(c.dtype(), l.dtype(), "dtype of tensor {i}");
        assert_eq!(c.version(), l.version(), "version of tensor {i}");
        assert_eq!(values(c), values(l), "values of tensor {i}");
    }
    for i in 0..cpu.len() {
        for j in 0..cpu.len() {
            assert_eq!(
                cpu[i].is_alias_of(&cpu[j]),
                lazy_out[i].is_alias_of(&lazy_out[j]),
                "aliasing of tensors {i} and {j}"
            );
        }
    }
}

#[test]
fn a_write_through_a_view_is_seen_by_the_base_and_every_view() {
    same_on_both(|input| {
        let base = ops::view(&input(seq(&[12])), &[3, 4]).unwrap();
        let row = ops::select(&base, 0, 1).unwrap();
        let col = ops::select(&base, 1, 2).unwrap();
        let before = ops::mul_scalar(&col, 1).unwrap(); // read before the write
        ops::add_scalar_(&row, 100).unwrap();
        let after = ops::mul_scalar(&col, 1).unwrap();
        let flat = ops::view(&base, &[12]).unwrap();
        vec![base, row, col, before, after, flat]
    });
}

#[test]
fn writes_to_the_base_reach_existing_views() {
    same_on_both(|input| {
        let base = input(seq(&[3, 4]));
        let t = ops::t(&base).unwrap();
        let s =
            ops::slice_with(&base, ops::SliceOptions::default().dim(1).start(1).step(2)).unwrap();
        ops::mul_scalar_(&base, -1).unwrap();
        let t2 = ops::add(&t, &t).unwrap();
        ops::zero_(&ops::select(&s, 0, 0).unwrap()).unwrap();
        vec![base, t, s, t2]
    });
}

#[test]
fn in_place_on_transposed_views_and_copies_into_slices() {
    same_on_both(|input| {
        let base = input(seq(&[4, 3]));
        let t = ops::t(&base).unwrap(); // [3, 4] strides [1, 3]
        let src = input(seq(&[4]));
        ops::copy_(&ops::select(&t, 0, 2).unwrap(), &src).unwrap();
        ops::mul_(&t, &ops::transpose(&input(seq(&[4, 3])), 0, 1).unwrap()).unwrap();
        let part = ops::narrow(&base, 0, 1, 2).unwrap();
        ops::fill_(&part, 7).unwrap();
        let e = ops::expand(&input(seq(&[1, 3])), &[4, 3]).unwrap(); // read-only, stride 0
        let sum = ops::add(&base, &e).unwrap();
        vec![base, t, part, sum]
    });
}

#[test]
fn reads_and_writes_keep_program_order() {
    same_on_both(|input| {
        let a = input(Tensor::ones(&[3], ScalarType::Float).unwrap());
        let b = ops::mul_scalar(&a, 2).unwrap();
        ops::add_scalar_(&a, 1).unwrap();
        let c = ops::mul_scalar(&a, 2).unwrap();
        // Identical pure calls whose results are then written keep their own memory.
        let y = ops::add_scalar(&a, 1).unwrap();
        let z = ops::add_scalar(&a, 1).unwrap();
        ops::add_scalar_(&y, 10).unwrap();
        let d = a.detach();
        ops::mul_scalar_(&d, 3).unwrap(); // a detached alias writes the same memory
        vec![a, b, c, y, z, d]
    });
}

#[test]
fn out_variants_and_resizes() {
    same_on_both(|input| {
        let a = input(seq(&[2, 2]));
        let out = input(Tensor::zeros(&[2, 2], ScalarType::Float).unwrap());
        let r = ops::add_out(&a, &a, &out).unwrap();
        // A wrong-shaped out tensor: the returned tensor is resized (Note [Functional
        // resize]), the handle passed keeps its shape; within its storage, or in a new one.
        let parts = [a.clone(), a.clone()];
        let small = input(Tensor::zeros(&[10], ScalarType::Float).unwrap());
        let r2 = ops::cat_out(&parts, &small).unwrap();
        let big = input(Tensor::zeros(&[1], ScalarType::Float).unwrap());
        let r3 = ops::cat_out_with(&parts, &big, ops::CatOutOptions::default().dim(1)).unwrap();
        vec![out, r, small, r2, big, r3]
    });
}

#[test]
fn versions_and_autograds_checks() {
    let d = own_device();
    for device in [Device::CPU, d.device()] {
        let x = to(&seq(&[3]), device).requires_grad_(true).unwrap();
        let y = ops::exp(&x).unwrap();
        assert_eq!(y.version(), 0);
        ops::add_scalar_(&y, 1).unwrap();
        assert_eq!(y.version(), 1);
        let err = ops::sum(&y).unwrap().backward().unwrap_err().to_string();
        assert!(
            err.contains("modified by an inplace operation"),
            "{device}: {err}"
        );
        let err = ops::add_scalar_(&x, 1).unwrap_err().to_string();
        assert!(
            err.contains("a leaf Variable that requires grad"),
            "{device}: {err}"
        );
    }
}

#[test]
fn in_place_on_a_view_with_autograd() {
    let d = own_device();
    let run = |device: Device| -> (Vec<f32>, Vec<f32>) {
        let x = to(&seq(&[2, 3]), device).requires_grad_(true).unwrap();
        let y = ops::mul_scalar(&x, 1).unwrap();
        let row = ops::select(&y, 0, 1).unwrap();
        ops::mul_scalar_(&row, 3).unwrap(); // CopySlices on y
        let loss = ops::sum(&ops::mul(&y, &y).unwrap()).unwrap();
        loss.backward().unwrap();
        (values(&y), values(&x.grad().unwrap()))
    };
    let cpu = run(Device::CPU);
    let lzy = run(d.device());
    assert_eq!(cpu, lzy);
}

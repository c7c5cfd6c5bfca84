//! `arange.start`, `arange.out`, `item`, `numel`, `size.int` and `equal` through the
//! dispatcher, with PyTorch's results and errors.

use switchboard::ops;
use switchboard::prelude::*;

mod common;
use common::*;

#[test]
fn arange_start_and_out() {
    let a = ops::arange_start(2, 6).unwrap();
    assert_eq!(a.dtype(), ScalarType::Long);
    assert_eq!(a.to_vec::<i64>().unwrap(), [2, 3, 4, 5]);
    let f = ops::arange_start(0.5, 3).unwrap();
    assert_eq!(f.dtype(), ScalarType::Float);
    assert_eq!(f.to_vec::<f32>().unwrap(), [0.5, 1.5, 2.5]);
    let d = ops::arange_start_with(
        1,
        4,
        ops::ArangeStartOptions::default().dtype(ScalarType::Double),
    )
    .unwrap();
    assert_eq!(d.to_vec::<f64>().unwrap(), [1.0, 2.0, 3.0]);
    // The same as arange.start_step with step 1.
    let s = ops::arange_start_step(-3, 2).unwrap();
    assert_eq!(
        ops::arange_start(-3, 2).unwrap().to_vec::<i64>().unwrap(),
        s.to_vec::<i64>().unwrap()
    );
    let out = Tensor::zeros(&[0], ScalarType::Long).unwrap();
    let r = ops::arange_out(4, &out).unwrap();
    assert_eq!(r.to_vec::<i64>().unwrap(), [0, 1, 2, 3]);
    let m = ops::arange_start_with(
        0,
        10,
        ops::ArangeStartOptions::default().device(Device::META),
    )
    .unwrap();
    assert_eq!(m.sizes(), &[10]);
    let e = ops::arange_start(5, 1).unwrap_err().to_string();
    assert!(
        e.contains("upper bound and lower bound inconsistent with step sign"),
        "{e}"
    );
}

#[test]
fn item_numel_size() {
    let t = Tensor::from_vec(vec![2.5f32], &[1, 1]).unwrap();
    assert_eq!(TensorOps::item(&t).unwrap(), Scalar::Float(2.5));
    assert_eq!(TensorOps::item(&long(&[7], &[])).unwrap(), Scalar::Int(7));
    let b = Tensor::from_vec(vec![true], &[1]).unwrap();
    assert_eq!(TensorOps::item(&b).unwrap(), Scalar::Bool(true));
    let e = TensorOps::item(&long(&[1, 2], &[2]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("a Tensor with 2 elements cannot be converted to Scalar"),
        "{e}"
    );
    let meta = ops::empty_with(&[1], ops::EmptyOptions::default().device(Device::META)).unwrap();
    let e = TensorOps::item(&meta).unwrap_err().to_string();
    assert!(
        e.contains("Tensor.item() cannot be called on meta tensors"),
        "{e}"
    );

    let x = Tensor::zeros(&[2, 3, 4], ScalarType::Float).unwrap();
    assert_eq!(ops::numel(&x).unwrap(), 24);
    assert_eq!(
        ops::numel(&Tensor::zeros(&[0, 3], ScalarType::Float).unwrap()).unwrap(),
        0
    );
    assert_eq!(ops::size(&x, 1).unwrap(), 3);
    assert_eq!(ops::size(&x, -1).unwrap(), 4);
    let e = ops::size(&x, 3).unwrap_err().to_string();
    assert!(
        e.contains("Dimension out of range (expected to be in range of [-3, 2], but got 3)"),
        "{e}"
    );
    let e = ops::size(&Tensor::scalar_tensor(1.0, ScalarType::Float), 0)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("dimension specified as 0 but tensor has no dimensions"),
        "{e}"
    );
    // Below autograd too: a leaf that requires grad.
    let leaf = r(&[1], 1, 0.0, 1.0).requires_grad_(true).unwrap();
    assert!(matches!(TensorOps::item(&leaf).unwrap(), Scalar::Float(_)));
}

#[test]
fn equal() {
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    assert!(ops::equal(&a, &a.clone()).unwrap());
    assert!(
        ops::equal(&a, &long(&[1, 2, 3], &[3])).unwrap(),
        "compared in the promoted dtype"
    );
    assert!(!ops::equal(&a, &long(&[1, 2, 4], &[3])).unwrap());
    assert!(
        !ops::equal(&a, &a.view(&[1, 3]).unwrap()).unwrap(),
        "sizes differ"
    );
    let nan = Tensor::from_vec(vec![f32::NAN], &[1]).unwrap();
    assert!(
        !ops::equal(&nan, &nan).unwrap(),
        "NaN is not equal to itself"
    );
    assert!(a.equal(&a).unwrap());
    let meta = ops::empty_with(&[3], ops::EmptyOptions::default().device(Device::META)).unwrap();
    assert!(ops::equal(&a, &meta).is_err());
}

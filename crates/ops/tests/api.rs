//! The generated API end to end on the global dispatcher with the CPU backend linked.

use switchboard_dispatcher::{static_registration_errors, Dispatcher};
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{Device, ScalarType, Tensor};

// Links the CPU backend's registrations.
use switchboard_cpu as _;

fn t(v: &[f32], shape: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

#[test]
fn registrations_succeed() {
    let d = Dispatcher::global();
    assert!(
        static_registration_errors().is_empty(),
        "{:?}",
        static_registration_errors()
    );
    assert!(d.find_schema("aten::add.Tensor").is_some());
    assert_eq!(
        d.find_schema("aten::add.Tensor")
            .unwrap()
            .schema()
            .unwrap()
            .schema
            .to_string(),
        "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
    );
}

#[test]
fn functions_and_methods_dispatch_to_cpu() {
    let a = t(&[1., 2., 3., 4.], &[2, 2]);
    let b = ops::add_with(&a, &a, ops::AddOptions::default().alpha(2)).unwrap();
    assert_eq!(b.to_vec::<f32>().unwrap(), [3., 6., 9., 12.]);
    let s = b.sum().unwrap();
    assert_eq!(s.item().unwrap().to_f64(), 30.0);
    let m = ops::matmul(&a, &a).unwrap();
    assert_eq!(m.to_vec::<f32>().unwrap(), [7., 10., 15., 22.]);
    let tt = a.t().unwrap();
    assert!(tt.is_alias_of(&a));
}

#[test]
fn factories_go_through_backend_select() {
    let z = ops::zeros(&[2, 3]).unwrap();
    assert_eq!(z.sizes(), &[2, 3]);
    assert_eq!(z.dtype(), ScalarType::Float);
    assert_eq!(z.to_vec::<f32>().unwrap(), [0.0; 6]);
    // Meta is not linked into this test: the BackendSelect kernel routes to Meta, which has
    // no kernel here, and the error says so.
    let e = ops::ones_with(
        &[2],
        ops::OnesOptions::default()
            .dtype(ScalarType::Long)
            .device(Device::META),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("Is the backend for 'Meta' linked"),
        "{e}"
    );
    let f = ops::full(&[2], 7).unwrap();
    assert_eq!(f.dtype(), ScalarType::Long);
}

#[test]
fn composite_decompositions() {
    let x = t(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
    let w = t(&[1., 0., 0., 0., 1., 0.], &[2, 3]);
    let bias = t(&[10., 20.], &[2]);
    let y = ops::linear_with(&x, &w, ops::LinearOptions::default().bias(&bias)).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [11., 22., 14., 25.]);
    let r = ops::reshape(&x.t().unwrap(), &[6]).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [1., 4., 2., 5., 3., 6.]);
    let sm = ops::softmax(&x, 1)
        .unwrap()
        .sum_dim_int_list(Some(&[1]))
        .unwrap();
    for v in sm.to_vec::<f32>().unwrap() {
        assert!((v - 1.0).abs() < 1e-6);
    }
}

#[test]
fn errors_name_the_problem() {
    let a = t(&[1., 2., 3.], &[3]);
    let b = t(&[1., 2.], &[2]);
    let e = ops::add(&a, &b).unwrap_err().to_string();
    assert!(e.contains("must match the size"), "{e}");
}

use switchboard_lazy as lazy;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

#[test]
fn smoke() {
    let x = ops::ones(&[2, 3], None, None, Some(lazy::DEVICE), None).unwrap();
    let y = ops::mul_scalar(&ops::relu(&x).unwrap(), 2).unwrap();
    println!("{}", lazy::pending_graph());
    assert_eq!(y.device().to_string(), "lazy:0");
    assert_eq!(y.to_vec::<f32>().unwrap(), [2.0; 6]);
    let a = Tensor::from_vec(vec![1.0f32, 2., 3., 4.], &[2, 2]).unwrap();
    let la = ops::to_device(
        &a,
        lazy::DEVICE,
        switchboard_tensor::ScalarType::Float,
        false,
        false,
        None,
    )
    .unwrap();
    let v = ops::t(&la).unwrap();
    let m = ops::mm(&la, &v).unwrap();
    println!("{}", lazy::pending_graph());
    println!("{m}");
    println!("{}", lazy::metrics_report());
}

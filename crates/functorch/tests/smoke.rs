use switchboard_autograd as _;
use switchboard_cpu as _;
use switchboard_functorch::*;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

#[test]
fn smoke() {
    let x = Tensor::from_vec(vec![1.0f32, 2., 3., 4., 5., 6.], &[3, 2]).unwrap();
    let sums = vmap(
        |xs| ops::sum(&ops::mul(&xs[0], &xs[0])?),
        &[Some(0)],
        &[x.clone()],
    )
    .unwrap();
    assert_eq!(sums.to_vec::<f32>().unwrap(), [5., 25., 61.]);
    let grads = vmap(
        |xs| Ok(grad(|ys| ops::sum(&ops::mul(&ys[0], &ys[0])?), xs, &[0])?.remove(0)),
        &[Some(0)],
        &[x.clone()],
    )
    .unwrap();
    assert_eq!(grads.to_vec::<f32>().unwrap(), [2., 4., 6., 8., 10., 12.]);
    let w = Tensor::from_vec(vec![1.0f32, 2., 3., 4.], &[2, 2]).unwrap();
    let y = vmap(
        |xs| ops::matmul(&xs[1], &xs[0]),
        &[Some(0), None],
        &[x.clone(), w.clone()],
    )
    .unwrap();
    println!("{y}");
    let h = hessian(
        |a| ops::sum(&ops::mul(&ops::mul(&a[0], &a[0])?, &a[0])?),
        &[Tensor::from_vec(vec![1.0f32, 2.], &[2]).unwrap()],
        0,
    )
    .unwrap();
    println!("{h}");
}

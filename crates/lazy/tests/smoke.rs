use switchboard_autograd::AutogradTensor;
use switchboard_lazy as lazy;
use switchboard_nn::{mlp, Module, Optimizer, Sgd};
use switchboard_ops as ops;
use switchboard_tensor::{Generator, ScalarType, Tensor};

fn run(device: Option<switchboard_tensor::Device>) -> Vec<f64> {
    let mut model = mlp(&[8, 16, 4], 0).unwrap();
    let gen = Generator::new(3);
    let x = ops::empty(&[6, 8], Some(ScalarType::Float), None, None, None, None).unwrap();
    ops::uniform_(&x, 0.0, 1.0, Some(&gen)).unwrap();
    let y = ops::empty(&[6], Some(ScalarType::Long), None, None, None, None).unwrap();
    ops::random_(&y, 0, Some(4), Some(&gen)).unwrap();
    let (x, y) = match device {
        Some(d) => {
            model.to_device(d).unwrap();
            (
                ops::_to_copy(&x, None, None, Some(d), None, false, None).unwrap(),
                ops::_to_copy(&y, None, None, Some(d), None, false, None).unwrap(),
            )
        }
        None => (x, y),
    };
    let mut opt = Sgd::new(model.parameters(), 0.1)
        .momentum(0.9)
        .weight_decay(1e-3);
    let mut losses = vec![];
    for _ in 0..4 {
        let loss =
            ops::cross_entropy_loss(&model.forward(&x).unwrap(), &y, None, 1, -100, 0.0).unwrap();
        opt.zero_grad();
        loss.backward(None, false, false).unwrap();
        opt.step().unwrap();
        if device.is_some() {
            println!("{}", lazy::pending_graph());
        }
        losses.push(loss.item().unwrap().to_f64());
    }
    losses
}

#[test]
fn smoke() {
    let cpu = run(None);
    let lz = run(Some(lazy::DEVICE));
    println!("{cpu:?}\n{lz:?}");
    println!("{}", lazy::metrics_report());
    assert_eq!(cpu, lz);
    let a = Tensor::from_vec(vec![1.0f32, 2., 3., 4.], &[2, 2]).unwrap();
    drop(a);
}

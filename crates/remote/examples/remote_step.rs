//! Times one MLP training step (batch 64, 784-256-10, SGD with momentum) eagerly on CPU, on a
//! lazy device with the in-process CPU executor, and on a lazy device whose graphs run on an
//! in-process worker over loopback; prints the median step time of each, the ratio to eager,
//! and the remote step's round trips and bytes.
//!
//! `cargo run --release -p switchboard-remote --example remote_step`

use std::sync::atomic::Ordering;
use std::time::Instant;

use switchboard_autograd::AutogradTensor;
use switchboard_keys::DeviceType;
use switchboard_lazy as lazy;
use switchboard_nn::{mlp, Module, Optimizer, Sgd};
use switchboard_ops as ops;
use switchboard_remote::{ClientConfig, RemoteExecutor, Worker, WorkerConfig};
use switchboard_tensor::{Device, Generator, ScalarType, Tensor};

const STEPS: usize = 60;

fn to(t: &Tensor, d: Device) -> Tensor {
    ops::_to_copy_with(t, ops::ToCopyOptions::default().device(d)).unwrap()
}

fn batch(gen: &Generator) -> (Tensor, Tensor) {
    let x = ops::empty_with(
        &[64, 784],
        ops::EmptyOptions::default().dtype(ScalarType::Float),
    )
    .unwrap();
    ops::uniform_with_(&x, ops::UniformInplaceOptions::default().generator(gen)).unwrap();
    let y = ops::empty_with(&[64], ops::EmptyOptions::default().dtype(ScalarType::Long)).unwrap();
    ops::random_with_(
        &y,
        0,
        Some(10),
        ops::RandomInplaceOptions::default().generator(gen),
    )
    .unwrap();
    (x, y)
}

/// The median step time in microseconds on `device`, after warm-up steps.
fn median_step_us(device: Device) -> f64 {
    let gen = Generator::new(1);
    let mut model = mlp(&[784, 256, 10], 0).unwrap();
    model.to_device(device).unwrap();
    let mut opt = Sgd::new(model.parameters(), 0.05).momentum(0.9);
    let data: Vec<_> = (0..8).map(|_| batch(&gen)).collect();
    let mut times = Vec::new();
    for i in 0..STEPS {
        let (x, y) = &data[i % data.len()];
        let start = Instant::now();
        let (x, y) = (to(x, device), to(y, device));
        let loss = ops::cross_entropy_loss(&model.forward(&x).unwrap(), &y).unwrap();
        opt.zero_grad();
        loss.backward().unwrap();
        opt.step().unwrap();
        let _ = loss.item().unwrap();
        if i >= 5 {
            times.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    times[times.len() / 2]
}

fn main() {
    let eager = median_step_us(Device::CPU);
    let lazy_cpu = median_step_us(Device::with_index(DeviceType::Lazy, 1));
    let worker = Worker::bind(WorkerConfig::default()).unwrap();
    let exe =
        RemoteExecutor::connect(&worker.local_addr().to_string(), ClientConfig::default()).unwrap();
    let remote_device = Device::with_index(DeviceType::Lazy, 2);
    lazy::backend(remote_device)
        .unwrap()
        .set_executor(exe.clone());
    let c = exe.client().counters();
    let remote = median_step_us(remote_device);
    let (trips, sent, received) = (
        c.round_trips.load(Ordering::Relaxed),
        c.bytes.sent.load(Ordering::Relaxed),
        c.bytes.received.load(Ordering::Relaxed),
    );
    println!("eager_mlp_train_step        {eager:>9.1} us");
    println!(
        "lazy_cpu_mlp_train_step     {lazy_cpu:>9.1} us  ({:.2}x eager)",
        lazy_cpu / eager
    );
    println!(
        "remote_mlp_train_step       {remote:>9.1} us  ({:.2}x eager)",
        remote / eager
    );
    println!(
        "remote: {trips} round trips, {sent} bytes sent, {received} bytes received over {STEPS} steps \
         (parameters {} bytes)",
        (784 * 256 + 256 + 256 * 10 + 10) * 4
    );
}

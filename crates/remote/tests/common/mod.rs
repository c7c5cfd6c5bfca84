//! Helpers of the remote worker's tests: lazy devices of one test's own, workers on
//! 127.0.0.1 with ephemeral ports, an MLP training step.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use switchboard_autograd::AutogradTensor;
use switchboard_keys::DeviceType;
use switchboard_lazy::{self as lazy, LazyBackend};
use switchboard_nn::{mlp, Module, Optimizer, Sequential, Sgd};
use switchboard_ops as ops;
use switchboard_remote::{ClientConfig, RemoteExecutor, Worker, WorkerConfig};
use switchboard_tensor::{Device, Generator, ScalarType, Tensor};

/// A lazy device no other test of this binary uses.
pub fn own_device() -> &'static LazyBackend {
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    let index = NEXT.fetch_add(1, Ordering::Relaxed);
    lazy::backend(Device::with_index(DeviceType::Lazy, index as i16)).unwrap()
}

/// An in-process worker with default settings (loopback, ephemeral port, no token).
pub fn worker() -> Worker {
    Worker::bind(WorkerConfig::default()).unwrap()
}

/// A lazy device whose graphs run on `worker`, and the executor.
pub fn remote_device(worker: &Worker) -> (&'static LazyBackend, Arc<RemoteExecutor>) {
    let d = own_device();
    let exe =
        RemoteExecutor::connect(&worker.local_addr().to_string(), ClientConfig::default()).unwrap();
    d.set_executor(exe.clone());
    (d, exe)
}

/// `t` moved to `device`.
pub fn to(t: &Tensor, device: Device) -> Tensor {
    ops::_to_copy_with(t, ops::ToCopyOptions::default().device(device)).unwrap()
}

pub fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec_as::<f32>().unwrap()
}

/// A classification problem: `n` batches of 16 samples of `features` features, 10 classes.
pub fn batches(n: usize, features: i64) -> Vec<(Tensor, Tensor)> {
    let gen = Generator::new(7);
    (0..n)
        .map(|_| {
            let x = ops::empty_with(
                &[16, features],
                ops::EmptyOptions::default().dtype(ScalarType::Float),
            )
            .unwrap();
            ops::uniform_with_(&x, ops::UniformInplaceOptions::default().generator(&gen)).unwrap();
            let y = ops::empty_with(&[16], ops::EmptyOptions::default().dtype(ScalarType::Long))
                .unwrap();
            ops::random_with_(
                &y,
                0,
                Some(10),
                ops::RandomInplaceOptions::default().generator(&gen),
            )
            .unwrap();
            (x, y)
        })
        .collect()
}

/// An MLP and its SGD optimizer (momentum, weight decay) on `device`.
pub struct Trainer {
    pub device: Device,
    pub model: Sequential,
    pub opt: Sgd,
}

impl Trainer {
    pub fn new(device: Device, sizes: &[usize]) -> Trainer {
        let mut model = mlp(sizes, 0).unwrap();
        model.to_device(device).unwrap();
        let opt = Sgd::new(model.parameters(), 0.1)
            .momentum(0.9)
            .weight_decay(1e-3);
        Trainer { device, model, opt }
    }

    /// One step on a CPU batch; returns the loss (read on the host).
    pub fn step(&mut self, x: &Tensor, y: &Tensor) -> f64 {
        let (x, y) = (to(x, self.device), to(y, self.device));
        let loss = ops::cross_entropy_loss(&self.model.forward(&x).unwrap(), &y).unwrap();
        self.opt.zero_grad();
        loss.backward().unwrap();
        self.opt.step().unwrap();
        loss.item().unwrap().to_f64()
    }

    /// The first layer's weight, on the host.
    pub fn first_weight(&self) -> Vec<f32> {
        values(&self.model.parameters()[0])
    }

    /// The bytes of every parameter.
    pub fn parameter_bytes(&self) -> usize {
        self.model.parameters().iter().map(|p| p.nbytes()).sum()
    }
}

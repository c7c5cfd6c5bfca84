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

/// A worker client that skips `RemoteClient`'s own checks (to see what the worker does with
/// requests a well-behaved client would not send), on `rt`.
pub fn raw_client(
    rt: &tokio::runtime::Runtime,
    addr: std::net::SocketAddr,
) -> switchboard_remote::WorkerServiceClient {
    use tarpc::tokio_serde::formats::Bincode;
    use tarpc::tokio_util::codec::LengthDelimitedCodec;
    rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let framed = LengthDelimitedCodec::builder().new_framed(tcp);
        let t = tarpc::serde_transport::new(framed, Bincode::default());
        switchboard_remote::WorkerServiceClient::new(Default::default(), t).spawn()
    })
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

pub fn ctx() -> tarpc::context::Context {
    let mut c = tarpc::context::current();
    c.deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    c
}

/// `x * 2` for a float tensor of `sizes`, in the wire format.
pub fn double_graph(sizes: &[i64]) -> Vec<u8> {
    use switchboard_dispatcher::{Dispatcher, IValue};
    use switchboard_graph::{Arg, Graph, Output, TensorMeta};
    let x = Tensor::zeros(sizes, ScalarType::Float).unwrap();
    let mut g = Graph::new();
    let a = g.add_input(TensorMeta::of(&x));
    let mul = Dispatcher::global()
        .find_schema_or_throw("aten::mul.Scalar")
        .unwrap();
    let n = g
        .add_call(
            mul,
            vec![Arg::Value(a), Arg::Const(IValue::Int(2))],
            vec![Output::ret(0, TensorMeta::of(&x))],
        )
        .unwrap();
    g.set_outputs(vec![g.value(n, 0)]).unwrap();
    g.to_bytes().unwrap()
}

pub fn host_f32(v: &[f32], sizes: &[i64]) -> switchboard_remote::HostTensor {
    switchboard_remote::to_host_tensor(&Tensor::from_slice(v, sizes).unwrap()).unwrap()
}

pub fn run_request(
    plan: u64,
    graph: Option<Vec<u8>>,
    inputs: Vec<switchboard_remote::RunInput>,
) -> switchboard_remote::RunRequest {
    switchboard_remote::RunRequest {
        plan,
        graph,
        inputs,
        outputs: vec![],
        profile: false,
        release: vec![],
    }
}

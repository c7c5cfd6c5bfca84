//! The capture on a private-use backend (Note [Lazy device types]) and executors that keep
//! their results (Note [Data an executor keeps]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use switchboard_autograd::AutogradTensor;
use switchboard_dispatcher::Result;
use switchboard_graph::Graph;
use switchboard_keys::{BackendComponent, DeviceType};
use switchboard_lazy::{self as lazy, CpuExecutor, Executable, Executor};
use switchboard_ops as ops;
use switchboard_tensor::{DatalessTensor, Device, ScalarType, Tensor};

const NAME: &str = "graph_accel";

fn accel(index: i16) -> Device {
    let ty = lazy::install(BackendComponent::PrivateUse1Bit, NAME).unwrap();
    Device::with_index(ty, index)
}

fn cpu(values: &[f32], sizes: &[i64]) -> Tensor {
    Tensor::from_vec(values.to_vec(), sizes).unwrap()
}

fn to(t: &Tensor, d: Device) -> Tensor {
    ops::to_device(t, d, t.dtype()).unwrap()
}

#[test]
fn an_installed_device_type_captures_as_lazy_does() {
    let d = accel(0);
    assert_eq!(d.ty, DeviceType::PrivateUse1);
    assert!(lazy::is_lazy_device_type(DeviceType::PrivateUse1));
    assert_eq!("graph_accel:0".parse::<Device>().unwrap(), d);
    let b = lazy::backend(d).unwrap();
    b.sync().unwrap();
    let x = to(&cpu(&[1., -2., 3., -4.], &[2, 2]), d);
    let y = ops::relu(&ops::mm(&x, &x).unwrap()).unwrap();
    assert_eq!(y.device(), d);
    assert!(b.pending_calls() >= 2, "captured on graph_accel:0");
    assert!(b.pending_graph().to_string().contains("aten.mm.default"));
    let want = ops::relu(&ops::mm(&to(&x, Device::CPU), &to(&x, Device::CPU)).unwrap()).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
    assert_eq!(b.pending_calls(), 0);
    assert!(y.to_string().contains("device='graph_accel:0'"), "{y}");
    // Its devices are not the `lazy` devices: they do not mix.
    let l = to(&cpu(&[1., 2., 3., 4.], &[2, 2]), lazy::DEVICE);
    let err = ops::add(&x, &l).unwrap_err().to_string();
    assert!(
        err.contains("found at least two devices, graph_accel:0 and lazy:0"),
        "{err}"
    );
    // Another index is another device, with its own graph.
    let d1 = accel(1);
    let z = ops::exp(&to(&x, d1)).unwrap();
    assert!(lazy::backend(d1).unwrap().pending_calls() > 0);
    assert_eq!(b.pending_calls(), 0);
    assert_eq!(z.device(), d1);
}

/// Note [Functional kernels on a private-use device]: a view of a functional tensor reaches
/// the installed device as its `*_copy` operator, captured whole as on `lazy`, not as the
/// `CompositeExplicitAutogradNonFunctional` decomposition's view read and `clone`.
#[test]
fn an_installed_device_captures_view_copies_whole() {
    let d = accel(7);
    let b = lazy::backend(d).unwrap();
    let x = to(&cpu(&[1., 2., 3., 4., 5., 6.], &[2, 3]), d);
    b.sync().unwrap();
    let y = ops::mm(&ops::t(&x).unwrap(), &x).unwrap();
    let graph = b.pending_graph().to_string();
    assert!(graph.contains("aten.t_copy.default"), "{graph}");
    assert!(
        !graph.contains("as_strided") && !graph.contains("clone"),
        "{graph}"
    );
    let xc = to(&x, Device::CPU);
    let want = ops::mm(&ops::t(&xc).unwrap(), &xc).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
}

#[test]
fn gradients_flow_through_an_installed_device() {
    let d = accel(2);
    let w = to(&cpu(&[0.5, -1., 2., 1.5], &[2, 2]), d)
        .requires_grad_(true)
        .unwrap();
    let x = to(&cpu(&[1., 2., 3., 4.], &[2, 2]), d);
    let loss = ops::sum(&ops::tanh(&ops::mm(&x, &w).unwrap()).unwrap()).unwrap();
    loss.backward().unwrap();
    let g = w.grad().unwrap();
    assert_eq!(g.device(), d);
    let wc = to(&w.detach(), Device::CPU).requires_grad_(true).unwrap();
    let lc = ops::sum(&ops::tanh(&ops::mm(&to(&x, Device::CPU), &wc).unwrap()).unwrap()).unwrap();
    lc.backward().unwrap();
    assert_eq!(
        g.to_vec::<f32>().unwrap(),
        wc.grad().unwrap().to_vec::<f32>().unwrap()
    );
}

#[test]
fn installing_checks_the_backend_and_the_name() {
    accel(0);
    // Again under the same name: nothing happens.
    assert_eq!(
        lazy::install(BackendComponent::PrivateUse1Bit, NAME).unwrap(),
        DeviceType::PrivateUse1
    );
    let other = lazy::install(BackendComponent::PrivateUse1Bit, "other_name").unwrap_err();
    assert!(
        other
            .to_string()
            .contains("already been set! Current backend: graph_accel"),
        "{other}"
    );
    let not_private = lazy::install(BackendComponent::CPUBit, "x").unwrap_err();
    assert!(
        not_private
            .to_string()
            .contains("installs on PrivateUse1, PrivateUse2 or PrivateUse3"),
        "{not_private}"
    );
    assert!(!lazy::is_lazy_device_type(DeviceType::PrivateUse3));
    let err = lazy::backend(Device::with_index(DeviceType::CPU, 0))
        .err()
        .unwrap();
    assert!(err.to_string().contains("is not a lazy device"), "{err}");
    let err = lazy::backend(Device::with_index(DeviceType::PrivateUse1, 64))
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains("graph_accel device index 64 is out of range"),
        "{err}"
    );
}

/// An executor that keeps its results "away": each result is a meta tensor carrying the CPU
/// tensor as its payload, as a remote executor's handle would, and the host sees values only
/// through `to_host`.
#[derive(Default)]
struct KeepingExecutor {
    fetched: AtomicUsize,
    /// Per run: how many inputs were the executor's own tensors, and how many host tensors.
    inputs: Mutex<Vec<(usize, usize)>>,
}

struct Kept(Tensor);

struct KeepingPlan {
    inner: Arc<dyn Executable>,
    owner: Arc<KeepingExecutor>,
}

fn keep(t: Tensor) -> Tensor {
    let spec = DatalessTensor {
        sizes: t.sizes(),
        strides: t.strides(),
        storage_offset: t.storage_offset(),
        dtype: t.dtype(),
        device: Device::META,
        key_set: Device::META.dense_key_set().unwrap(),
        storage_nbytes: t.storage().nbytes(),
        payload_tag: 0,
    };
    let payload: Arc<Kept> = Arc::new(Kept(t.clone()));
    Tensor::without_data(&spec, Some(payload), None).unwrap()
}

fn unkeep(t: &Tensor) -> Option<Tensor> {
    t.payload_as::<Kept>().map(|k| k.0.clone())
}

struct Shared(Arc<KeepingExecutor>);

impl Executor for Shared {
    fn name(&self) -> &str {
        "keeping"
    }

    fn compile(&self, graph: Graph) -> Result<Arc<dyn Executable>> {
        Ok(Arc::new(KeepingPlan {
            inner: CpuExecutor.compile(graph)?,
            owner: self.0.clone(),
        }))
    }

    fn to_host(&self, data: &Tensor) -> Result<Tensor> {
        self.0.fetched.fetch_add(1, Ordering::Relaxed);
        // A copy, as a fetch from elsewhere is: writing it does not write the kept tensor.
        ops::clone(&unkeep(data).expect("a kept tensor"))
    }

    fn report(&self) -> String {
        "Counter: Fetches\n  Value: n\n".into()
    }
}

impl Executable for KeepingPlan {
    fn run(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let kept = inputs.iter().filter(|t| unkeep(t).is_some()).count();
        self.owner
            .inputs
            .lock()
            .unwrap()
            .push((kept, inputs.len() - kept));
        let inputs = inputs
            .into_iter()
            .map(|t| unkeep(&t).unwrap_or(t))
            .collect();
        Ok(self.inner.run(inputs)?.into_iter().map(keep).collect())
    }

    fn calls(&self) -> usize {
        self.inner.calls()
    }
}

#[test]
fn data_an_executor_keeps_stays_with_it_across_graphs() {
    let d = accel(3);
    let b = lazy::backend(d).unwrap();
    let ex = Arc::new(KeepingExecutor::default());
    b.set_executor(Arc::new(Shared(ex.clone())));
    let w = to(&cpu(&[1., 2., 3., 4.], &[4]), d);
    let mut want = vec![1f32, 2., 3., 4.];
    for step in 0..3 {
        let x = to(&cpu(&[1., 1., 1., 1.], &[4]), d);
        ops::add_(&w, &ops::mul_scalar(&x, 0.5).unwrap()).unwrap(); // in place, as an optimizer
        let loss = ops::sum(&w).unwrap();
        b.sync().unwrap();
        want.iter_mut().for_each(|v| *v += 0.5);
        assert_eq!(
            loss.to_vec::<f32>().unwrap()[0],
            want.iter().sum::<f32>(),
            "step {step}"
        );
    }
    let runs = ex.inputs.lock().unwrap().clone();
    assert_eq!(runs.len(), 3);
    // The first step uploads w and the batch; later steps pass w as the executor's own tensor.
    assert_eq!(runs[0], (0, 2));
    assert_eq!(&runs[1..], [(1, 1), (1, 1)]);
    assert!(b.metrics_report().contains("Counter: Fetches"));
    // Reading w fetches it, and the next graph still gets the kept tensor.
    let fetched = ex.fetched.load(Ordering::Relaxed);
    assert_eq!(w.to_vec::<f32>().unwrap(), want);
    assert!(ex.fetched.load(Ordering::Relaxed) > fetched);
    let _ = ops::sum(&w).unwrap().to_vec::<f32>().unwrap()[0];
    assert_eq!(ex.inputs.lock().unwrap().last(), Some(&(1, 0)));
    // An eager call that writes w (lazy mode off) writes the host copy, which becomes w's data.
    {
        let _eager = lazy::LazyModeGuard::new(false);
        ops::mul_scalar_(&w, 2.0).unwrap();
    }
    want.iter_mut().for_each(|v| *v *= 2.0);
    assert_eq!(w.to_vec::<f32>().unwrap(), want);
    let s = ops::sum(&w).unwrap().to_vec::<f32>().unwrap()[0];
    assert_eq!(s, want.iter().sum::<f32>());
    assert_eq!(
        ex.inputs.lock().unwrap().last(),
        Some(&(0, 1)),
        "uploaded again"
    );
    b.set_executor(Arc::new(CpuExecutor));
}

#[test]
fn kept_data_is_never_read_as_host_data() {
    // Without `to_host` the executor's tensors have no elements: reading them must go through it.
    let t = keep(cpu(&[1., 2.], &[2]));
    assert!(!t.has_data());
    assert_eq!(t.dtype(), ScalarType::Float);
}

#[test]
fn eager_calls_can_run_on_the_executor() {
    let d = accel(4);
    let b = lazy::backend(d).unwrap();
    let ex = Arc::new(KeepingExecutor::default());
    b.set_executor(Arc::new(Shared(ex.clone())));
    assert!(!b.set_eager_on_executor(true));
    let x = to(&cpu(&[1., -2., 3.], &[3]), d);
    b.sync().unwrap();
    let runs = ex.inputs.lock().unwrap().len();
    let y = {
        let _eager = lazy::LazyModeGuard::new(false);
        let y = ops::relu(&x).unwrap();
        // Ran at once, on the executor: nothing pending, one more graph, a kept result.
        assert_eq!(b.pending_calls(), 0);
        assert_eq!(ex.inputs.lock().unwrap().len(), runs + 1);
        ops::mul_scalar_(&y, 2.0).unwrap();
        assert_eq!(ex.inputs.lock().unwrap().len(), runs + 2);
        y
    };
    assert_eq!(y.device(), d);
    assert_eq!(y.to_vec::<f32>().unwrap(), [2., 0., 6.]);
    // Off again: eager calls run on the host's CPU, no graph.
    assert!(b.set_eager_on_executor(false));
    {
        let _eager = lazy::LazyModeGuard::new(false);
        let z = ops::neg(&y).unwrap();
        assert_eq!(z.to_vec::<f32>().unwrap(), [-2., 0., -6.]);
    }
    assert_eq!(ex.inputs.lock().unwrap().len(), runs + 2);
    b.set_executor(Arc::new(CpuExecutor));
}

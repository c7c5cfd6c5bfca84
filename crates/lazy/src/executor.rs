//! The [`Executor`] trait (how a pending graph runs) and the CPU executor.

use std::sync::Arc;

use switchboard_dispatcher::{
    AutoDispatchBelowADInplaceOrView, DispatchKey, DispatchKeySet, Result,
};
use switchboard_graph::{Graph, Plan, RunOptions};
use switchboard_keys::DeviceType;
use switchboard_tensor::{Device, Tensor};

use crate::backend::default_backend;

/// Runs the graphs the lazy backend captures. [`compile`](Executor::compile) prepares a graph
/// once (on a miss of the graph cache); the [`Executable`] it returns runs every graph with
/// the same structure (Note [Structural keys] in switchboard-graph): its inputs change, its
/// calls and constants do not.
///
/// A graph's device constants name its lazy device; its inputs are CPU tensors (materialised data
/// and host tensors copied in), in the order of the graph's inputs. An executable returns one
/// CPU tensor per graph output, laid out as the output's recorded metadata says (the lazy
/// storages keep them as their data, and views of them address the same elements).
pub trait Executor: Send + Sync {
    /// A short name for reports (`cpu`).
    fn name(&self) -> &str;

    /// Prepares `graph` (dead nodes already removed) to run.
    fn compile(&self, graph: Graph) -> Result<Arc<dyn Executable>>;

    /// The CPU tensor holding the elements of `data`, a tensor this executor's executables
    /// returned (Note [Data an executor keeps]). The default: `data` is a CPU tensor already.
    fn to_host(&self, data: &Tensor) -> Result<Tensor> {
        Ok(data.clone())
    }

    /// Lines the executor adds to the metrics report (its own counters), each ending with a
    /// newline; none by default.
    fn report(&self) -> String {
        String::new()
    }
}

// Note [Data an executor keeps]
// An executor may keep the results of its graphs where it ran them (a remote worker's memory)
// instead of copying them to the host: it returns tensors that stand for them (no data on the
// host, only a handle), and the lazy storages keep those as their materialised data. Such a
// tensor comes back to the executor as a graph input when a later graph reads the storage, so
// what lives on the executor's side stays there across graphs (parameters updated in place
// every step are never copied). The host sees the elements only when it asks: reading values,
// an eager fallback, a copy to the CPU call `to_host`, which knows how to fetch them. A tensor
// the host reads is not given back as data: the storage keeps the executor's tensor, so the
// next graph does not upload what already lives on the executor's side.

/// A prepared graph (see [`Executor`]).
pub trait Executable: Send + Sync {
    /// Runs the graph on `inputs` and returns its outputs.
    fn run(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>>;

    /// Runs the graph on `inputs` and returns each output or the error that left it without
    /// a value: an executor that can tell which outputs a failing call reaches fails only
    /// those (as eager code would). The default fails every output with [`run`](Self::run)'s
    /// error.
    fn run_each(&self, inputs: Vec<Tensor>) -> Result<Vec<Result<Tensor>>> {
        Ok(self.run(inputs)?.into_iter().map(Ok).collect())
    }

    /// The calls one run makes (for the statistics).
    fn calls(&self) -> usize;

    /// The calls not made because an identical call was (for the statistics).
    fn merged(&self) -> usize {
        0
    }
}

/// Runs graphs on CPU: each call through the dispatcher to its CPU kernel (so any operator
/// with a CPU kernel works without more code), below the autograd and ADInplaceOrView
/// layers, in capture order, identical pure calls once, each intermediate freed after its last
/// use (a [`Plan`]), and every result checked against the metadata the capture recorded.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuExecutor;

struct CpuPlan(Plan, RunOptions);

/// How a graph recorded on lazy device type `ty` runs on the CPU: its device constants name the
/// CPU.
fn run_on_cpu(ty: DeviceType) -> RunOptions {
    RunOptions {
        keys: Some(DispatchKeySet::from_key(DispatchKey::CPU)),
        device_map: Some((ty, Device::CPU)),
        check_metadata: true,
    }
}

/// The lazy device type `graph` was captured on (Note [Lazy device types]): the device its calls'
/// results are recorded on (`lazy` for a graph without calls).
pub fn captured_device_type(graph: &Graph) -> DeviceType {
    graph
        .nodes()
        .flat_map(|n| n.outputs().iter())
        .map(|o| o.meta.device.ty)
        .find(|ty| crate::backend::is_lazy_device_type(*ty))
        .unwrap_or(DeviceType::Lazy)
}

impl Executor for CpuExecutor {
    fn name(&self) -> &str {
        "cpu"
    }

    fn compile(&self, graph: Graph) -> Result<Arc<dyn Executable>> {
        let opts = run_on_cpu(captured_device_type(&graph));
        Ok(Arc::new(CpuPlan(Plan::new(graph), opts)))
    }
}

impl Executable for CpuPlan {
    fn run(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let _below = AutoDispatchBelowADInplaceOrView::new();
        self.0.run(inputs, &self.1)
    }

    fn run_each(&self, inputs: Vec<Tensor>) -> Result<Vec<Result<Tensor>>> {
        let _below = AutoDispatchBelowADInplaceOrView::new();
        self.0.run_each(inputs, &self.1)
    }

    fn calls(&self) -> usize {
        self.0.calls()
    }

    fn merged(&self) -> usize {
        self.0.merged()
    }
}

/// The executor of the default lazy device.
pub fn current() -> Arc<dyn Executor> {
    default_backend().executor()
}

/// Replaces the default lazy device's executor (see [`LazyBackend::set_executor`](crate::LazyBackend::set_executor)) and returns
/// the previous one.
pub fn set_executor(executor: Arc<dyn Executor>) -> Arc<dyn Executor> {
    default_backend().set_executor(executor)
}

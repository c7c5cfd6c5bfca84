//! [`RemoteExecutor`]: the lazy backend's graphs run by a worker, their results kept there
//! (Note [Data an executor keeps] in switchboard-lazy).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use switchboard_dispatcher::Result;
use switchboard_graph::{Graph, TensorMeta};
use switchboard_lazy::{Executable, Executor, LazyBackend};
use switchboard_tensor::{DatalessTensor, Device, Tensor, TensorError};

use crate::client::{ClientConfig, RemoteClient};
use crate::error::RemoteError;
use crate::protocol::{Handle, RunInput};
use crate::tensor_bytes::{from_host_tensor, to_host_tensor, with_layout};

// Note [Remote tensors]
// A result the worker keeps comes back as a tensor without data on the meta device (its
// sizes, strides, offset and dtype are the graph output's) whose payload is a `RemoteBuffer`:
// the client, the handle, and the elements when the worker sent them inline (small outputs: a
// loss). The lazy storage keeps it as its data; when a later graph reads the storage it comes
// back here as an input and travels as its handle, and when the host reads it `to_host`
// returns the inline elements or fetches them. A graph may write its inputs in place
// (`add_` on a parameter), so a buffer passed as an input forgets its inline elements: the
// host never reads a stale copy. Dropping the last tensor of a buffer queues its handle's
// release, which rides on the next request.

/// A tensor the worker keeps (Note [Remote tensors]).
pub struct RemoteBuffer {
    client: Arc<RemoteClient>,
    handle: Handle,
    meta: TensorMeta,
    host: Mutex<Option<Tensor>>,
}

impl RemoteBuffer {
    /// Its handle on the worker.
    pub fn handle(&self) -> Handle {
        self.handle
    }

    /// Whether the host holds its elements (sent inline, not since given to a graph).
    pub fn has_host_copy(&self) -> bool {
        self.host
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }
}

impl Drop for RemoteBuffer {
    fn drop(&mut self) {
        self.client.release_later(self.handle);
    }
}

#[derive(Default)]
struct OperatorTimes {
    by_op: BTreeMap<String, (u64, u64)>,
}

/// What an executor and its plans share.
struct Shared {
    client: Arc<RemoteClient>,
    profiling: AtomicBool,
    times: Mutex<OperatorTimes>,
    /// The lazy device whose per-operator profile gets the worker's times.
    device: OnceLock<&'static LazyBackend>,
}

/// Runs the lazy backend's graphs on a worker (see the crate documentation).
pub struct RemoteExecutor {
    shared: Arc<Shared>,
    next_plan: AtomicU64,
}

impl RemoteExecutor {
    /// An executor over `client`.
    pub fn new(client: Arc<RemoteClient>) -> Arc<RemoteExecutor> {
        Arc::new(RemoteExecutor {
            shared: Arc::new(Shared {
                client,
                profiling: AtomicBool::new(false),
                times: Mutex::default(),
                device: OnceLock::new(),
            }),
            next_plan: AtomicU64::new(1),
        })
    }

    /// Connects to the worker at `addr` ([`RemoteClient::connect`]).
    pub fn connect(
        addr: &str,
        config: ClientConfig,
    ) -> std::result::Result<Arc<RemoteExecutor>, RemoteError> {
        Ok(RemoteExecutor::new(RemoteClient::connect(addr, config)?))
    }

    /// Its client.
    pub fn client(&self) -> &Arc<RemoteClient> {
        &self.shared.client
    }

    /// Asks the worker to time each call of the following runs.
    pub fn set_profiling(&self, on: bool) {
        self.shared.profiling.store(on, Ordering::Relaxed);
    }

    /// Adds the worker's time of each operator to `device`'s per-operator profile
    /// (`get_performance_stats`) whenever that profile is on (the worker then times its
    /// calls). An executor reports to one device, the first it is given.
    pub fn report_to(&self, device: &'static LazyBackend) {
        let _ = self.shared.device.set(device);
    }

    /// Per operator (`aten::mm`): the calls the worker timed and their total time in
    /// nanoseconds, since the executor was made.
    pub fn operator_times(&self) -> BTreeMap<String, (u64, u64)> {
        self.shared
            .times
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_op
            .clone()
    }
}

fn buffer_of(t: &Tensor) -> Option<&RemoteBuffer> {
    t.payload_as::<RemoteBuffer>()
}

struct RemotePlan {
    shared: Arc<Shared>,
    id: u64,
    graph: Vec<u8>,
    outputs: Vec<TensorMeta>,
    calls: usize,
}

/// The bytes a tensor of `meta` addresses (checked when the graph was encoded and decoded).
fn storage_nbytes(meta: &TensorMeta) -> usize {
    if meta.sizes.contains(&0) {
        return 0;
    }
    let last: i64 = meta.storage_offset
        + meta
            .sizes
            .iter()
            .zip(&meta.strides)
            .map(|(s, st)| (s - 1) * st)
            .sum::<i64>();
    (last as usize + 1) * meta.dtype.element_size()
}

impl Executor for RemoteExecutor {
    fn name(&self) -> &str {
        "remote"
    }

    fn compile(&self, graph: Graph) -> Result<Arc<dyn Executable>> {
        let bytes = graph.to_bytes()?;
        let outputs = graph
            .outputs()
            .iter()
            .map(|v| graph.meta(*v).clone())
            .collect();
        Ok(Arc::new(RemotePlan {
            shared: self.shared.clone(),
            id: self.next_plan.fetch_add(1, Ordering::Relaxed),
            graph: bytes,
            outputs,
            calls: graph.num_calls(),
        }))
    }

    fn to_host(&self, data: &Tensor) -> Result<Tensor> {
        let Some(buffer) = buffer_of(data) else {
            if data.is_cpu() {
                return Ok(data.clone());
            }
            return Err(TensorError::invalid(format!(
                "the remote executor cannot read a tensor on {} that it did not return",
                data.device()
            ))
            .into());
        };
        let mut host = buffer.host.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = &*host {
            return Ok(h.clone());
        }
        let fetched = buffer.client.fetch(buffer.handle)?;
        let t = from_host_tensor(&fetched)
            .and_then(|t| with_layout(t, &buffer.meta))
            .map_err(TensorError::invalid)?;
        *host = Some(t.clone());
        Ok(t)
    }

    fn report(&self) -> String {
        let c = self.shared.client.counters();
        let mut out = String::new();
        let mut counter = |name: &str, v: u64| {
            let _ = writeln!(out, "Counter: {name}\n  Value: {v}");
        };
        counter("RemoteRoundTrips", c.round_trips.load(Ordering::Relaxed));
        counter("RemoteBytesSent", c.bytes.sent.load(Ordering::Relaxed));
        counter(
            "RemoteBytesReceived",
            c.bytes.received.load(Ordering::Relaxed),
        );
        let _ = writeln!(
            out,
            "Metric: RemoteExecutionTime\n  TotalSamples: {}\n  Accumulator: {:.3} ms",
            c.runs.load(Ordering::Relaxed),
            c.execution_ns.load(Ordering::Relaxed) as f64 / 1e6
        );
        out
    }
}

impl Executable for RemotePlan {
    fn run(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let exe = &self.shared;
        let mut wire = Vec::with_capacity(inputs.len());
        for (k, t) in inputs.iter().enumerate() {
            if let Some(b) = buffer_of(t) {
                if !Arc::ptr_eq(&b.client, &exe.client) {
                    return Err(TensorError::invalid(format!(
                        "input {k} is kept by another remote worker client ({}): tensors do \
                         not move between workers",
                        b.client.addr()
                    ))
                    .into());
                }
                // The graph may write it in place (Note [Remote tensors]).
                *b.host.lock().unwrap_or_else(|e| e.into_inner()) = None;
                wire.push(RunInput::Resident(b.handle));
            } else {
                let h = to_host_tensor(t).map_err(|e| {
                    TensorError::invalid(format!("input {k} cannot be sent to the worker: {e}"))
                })?;
                wire.push(RunInput::inline(h));
            }
        }
        let device = exe.device.get().copied();
        let profile =
            exe.profiling.load(Ordering::Relaxed) || device.is_some_and(LazyBackend::profiling);
        let reply = exe.client.run(self.id, &self.graph, wire, profile)?;
        if reply.outputs.len() != self.outputs.len() {
            return Err(TensorError::invalid(format!(
                "the worker returned {} outputs for a graph with {}",
                reply.outputs.len(),
                self.outputs.len()
            ))
            .into());
        }
        if !reply.operator_times.is_empty() {
            let mut times = exe.times.lock().unwrap_or_else(|e| e.into_inner());
            for t in &reply.operator_times {
                let e = times.by_op.entry(t.op.clone()).or_default();
                e.0 += t.count;
                e.1 += t.total_ns;
                if let Some(d) = device.filter(|d| d.profiling()) {
                    // The worker names operators as the graph does: always one known operator.
                    d.record_execution_time(&t.op, t.count, t.total_ns)?;
                }
            }
        }
        let key_set = Device::META
            .dense_key_set()
            .map_err(|e| TensorError::invalid(e.to_string()))?;
        let mut out = Vec::with_capacity(self.outputs.len());
        for (o, meta) in reply.outputs.into_iter().zip(&self.outputs) {
            let host = match &o.inline {
                Some(h) => Some(
                    from_host_tensor(h)
                        .and_then(|t| with_layout(t, meta))
                        .map_err(TensorError::invalid)?,
                ),
                None => None,
            };
            let buffer = Arc::new(RemoteBuffer {
                client: exe.client.clone(),
                handle: o.handle,
                meta: meta.clone(),
                host: Mutex::new(host),
            });
            let spec = DatalessTensor {
                sizes: &meta.sizes,
                strides: &meta.strides,
                storage_offset: meta.storage_offset,
                dtype: meta.dtype,
                device: Device::META,
                key_set,
                storage_nbytes: storage_nbytes(meta),
                payload_tag: 0,
            };
            out.push(Tensor::without_data(&spec, Some(buffer), None)?);
        }
        Ok(out)
    }

    fn calls(&self) -> usize {
        self.calls
    }
}

//! A worker session: the tensors and plans of one connection, and running a request on them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use switchboard_dispatcher::{
    AutoDispatchBelowADInplaceOrView, DispatchKey, DispatchKeySet, IValue,
};
use switchboard_graph::{Graph, NodeKind, Plan, RunOptions, TensorMeta};
use switchboard_keys::DeviceType;
use switchboard_tensor::{Device, Tensor};

use crate::protocol::{
    ErrorKind, Handle, HostTensor, OperatorTime, OutputPolicy, RunInput, RunOutput, RunReply,
    RunRequest, WorkerError,
};
use crate::tensor_bytes::{from_host_tensor, to_host_tensor, with_layout};

/// The limits a session enforces (from the worker's configuration).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SessionLimits {
    pub max_message_bytes: usize,
    pub inline_elements: usize,
    pub max_plans: usize,
    pub max_session_bytes: u64,
}

/// A plan a session keeps: the graph prepared to run, and how it runs on the CPU.
struct WorkerPlan {
    plan: Plan,
    inputs: Vec<TensorMeta>,
    options: RunOptions,
    /// The bytes of every call's results, as recorded (each checked when decoded).
    result_bytes: u64,
    /// The size of its graph on the wire.
    graph_bytes: u64,
}

#[derive(Default)]
struct SessionState {
    tensors: HashMap<u64, Tensor>,
    /// The bytes of the storages of `tensors` (a storage kept twice counts twice).
    bytes: u64,
    plans: HashMap<u64, Arc<WorkerPlan>>,
    /// The wire bytes of the graphs of `plans`.
    plan_bytes: u64,
    next_id: u64,
    closed: bool,
}

/// One connection's session (Note [Remote protocol]).
pub(crate) struct Session {
    pub instance: u64,
    pub id: u64,
    state: Mutex<SessionState>,
}

fn invalid(msg: impl Into<String>) -> WorkerError {
    WorkerError::new(ErrorKind::InvalidRequest, msg)
}

impl Session {
    pub fn new(instance: u64, id: u64) -> Session {
        Session {
            instance,
            id,
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SessionState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The number of tensors the session keeps.
    pub fn resident(&self) -> usize {
        self.lock().tensors.len()
    }

    /// Frees everything (the connection closed).
    pub fn close(&self) {
        let mut s = self.lock();
        s.closed = true;
        s.tensors.clear();
        s.bytes = 0;
        s.plans.clear();
        s.plan_bytes = 0;
    }

    /// Refuses a handle this session did not make.
    fn check(&self, h: &Handle) -> Result<(), WorkerError> {
        if h.instance != self.instance {
            return Err(WorkerError::new(
                ErrorKind::StateLost,
                format!(
                    "remote worker state lost (the worker restarted: handle {} was made by \
                     worker instance {:016x}, this is instance {:016x})",
                    h.id, h.instance, self.instance
                ),
            ));
        }
        if h.session != self.id {
            return Err(invalid(format!(
                "handle {} belongs to session {}, not to this connection's session {}: a \
                 session can only use its own tensors",
                h.id, h.session, self.id
            )));
        }
        Ok(())
    }

    fn release_locked(&self, s: &mut SessionState, handles: &[Handle]) -> Result<(), WorkerError> {
        for h in handles {
            self.check(h)?;
        }
        for h in handles {
            // Releasing twice is harmless: releases are queued and may be resent.
            if let Some(t) = s.tensors.remove(&h.id) {
                s.bytes = s.bytes.saturating_sub(t.storage().nbytes() as u64);
            }
        }
        Ok(())
    }

    /// Frees `handles`.
    pub fn release(&self, handles: &[Handle]) -> Result<(), WorkerError> {
        let mut s = self.lock();
        self.release_locked(&mut s, handles)
    }

    fn tensor(&self, s: &SessionState, h: &Handle) -> Result<Tensor, WorkerError> {
        self.check(h)?;
        s.tensors.get(&h.id).cloned().ok_or_else(|| {
            invalid(format!(
                "unknown handle {} of session {}: it was released, or never returned by this \
                 worker",
                h.id, h.session
            ))
        })
    }

    /// The elements of `handle`, after freeing `release`.
    pub fn fetch(
        &self,
        handle: &Handle,
        release: &[Handle],
        limits: &SessionLimits,
    ) -> Result<HostTensor, WorkerError> {
        let t = {
            let mut s = self.lock();
            self.release_locked(&mut s, release)?;
            self.tensor(&s, handle)?
        };
        host_tensor_within(&t, limits, &format!("handle {}", handle.id))
    }

    /// Runs a request (on the calling thread: the worker calls it off its I/O threads).
    pub fn run(&self, req: RunRequest, limits: &SessionLimits) -> Result<RunReply, WorkerError> {
        let (plan, inputs) = {
            let mut s = self.lock();
            if s.closed {
                return Err(invalid("the session is closed"));
            }
            self.release_locked(&mut s, &req.release)?;
            let plan = match (&req.graph, s.plans.get(&req.plan)) {
                (Some(bytes), _) => {
                    let plan = Arc::new(prepare(bytes)?);
                    if plan.result_bytes > limits.max_session_bytes {
                        return Err(WorkerError::new(
                            ErrorKind::TooLarge,
                            format!(
                                "the graph's results take {} bytes, over the worker's limit of \
                                 {} bytes per session (--max-session-bytes)",
                                plan.result_bytes, limits.max_session_bytes
                            ),
                        ));
                    }
                    // Plans are bounded in number and in graph bytes; any plan may go (the
                    // client resends the graph of an evicted one).
                    if let Some(old) = s.plans.remove(&req.plan) {
                        s.plan_bytes -= old.graph_bytes;
                    }
                    while !s.plans.is_empty()
                        && (s.plans.len() >= limits.max_plans
                            || s.plan_bytes + plan.graph_bytes > limits.max_message_bytes as u64)
                    {
                        if let Some(k) = s.plans.keys().next().copied() {
                            if let Some(old) = s.plans.remove(&k) {
                                s.plan_bytes -= old.graph_bytes;
                            }
                        }
                    }
                    s.plan_bytes += plan.graph_bytes;
                    s.plans.insert(req.plan, plan.clone());
                    plan
                }
                (None, Some(p)) => p.clone(),
                (None, None) => {
                    return Err(WorkerError::new(
                        ErrorKind::UnknownPlan,
                        format!("unknown plan {}: send its graph", req.plan),
                    ))
                }
            };
            if req.inputs.len() != plan.inputs.len() {
                return Err(invalid(format!(
                    "the graph has {} inputs but {} were sent",
                    plan.inputs.len(),
                    req.inputs.len()
                )));
            }
            let mut inputs = Vec::with_capacity(req.inputs.len());
            for (k, (input, meta)) in req.inputs.iter().zip(&plan.inputs).enumerate() {
                let t = match input {
                    RunInput::Resident(h) => {
                        let t = self.tensor(&s, h)?;
                        if !meta.matches_layout(&t) {
                            return Err(invalid(format!(
                                "input {k} (handle {}): a {} tensor of sizes {:?}, strides {:?}, \
                                 offset {} where the graph expects {} of sizes {:?}, strides \
                                 {:?}, offset {}",
                                h.id,
                                t.dtype().name(),
                                t.sizes(),
                                t.strides(),
                                t.storage_offset(),
                                meta.dtype.name(),
                                meta.sizes.as_slice(),
                                meta.strides.as_slice(),
                                meta.storage_offset
                            )));
                        }
                        t
                    }
                    RunInput::Inline(h) => from_host_tensor(h)
                        .and_then(|t| with_layout(t, meta))
                        .map_err(|e| invalid(format!("input {k}: {e}")))?,
                };
                inputs.push(t);
            }
            (plan, inputs)
        };
        let start = Instant::now();
        let mut times: Vec<OperatorTime> = Vec::new();
        let outputs = {
            let _below = AutoDispatchBelowADInplaceOrView::new();
            if req.profile {
                let mut by_op: HashMap<String, (u64, u64)> = HashMap::new();
                let r = plan.plan.run_timed(inputs, &plan.options, &mut |op, d| {
                    let e = by_op.entry(op.name().to_string()).or_default();
                    e.0 += 1;
                    e.1 += d.as_nanos() as u64;
                });
                times = by_op
                    .into_iter()
                    .map(|(op, (count, total_ns))| OperatorTime {
                        op,
                        count,
                        total_ns,
                    })
                    .collect();
                r
            } else {
                plan.plan.run(inputs, &plan.options)
            }
        }
        .map_err(|e| WorkerError::new(ErrorKind::Execution, e.to_string()))?;
        let execution_ns = start.elapsed().as_nanos() as u64;
        let mut inlines = Vec::with_capacity(outputs.len());
        let mut inline_bytes = 0usize;
        for (j, t) in outputs.iter().enumerate() {
            let policy = req.outputs.get(j).copied().unwrap_or(OutputPolicy::Auto);
            let inline = match policy {
                OutputPolicy::Inline => true,
                OutputPolicy::Auto => (t.numel() as usize) <= limits.inline_elements,
                OutputPolicy::Resident => false,
            };
            inlines.push(if inline {
                let h = host_tensor_within(t, limits, &format!("output {j}"))?;
                inline_bytes += h.bytes.len();
                if inline_bytes > limits.max_message_bytes / 2 {
                    return Err(too_large(inline_bytes, limits, "the inline outputs"));
                }
                Some(h)
            } else {
                None
            });
        }
        // Kept all together or not at all: a failed run leaves nothing the client has no
        // handle for.
        let bytes: u64 = outputs.iter().map(|t| t.storage().nbytes() as u64).sum();
        let mut s = self.lock();
        if s.closed {
            return Err(invalid("the session is closed"));
        }
        if s.bytes.saturating_add(bytes) > limits.max_session_bytes {
            return Err(WorkerError::new(
                ErrorKind::TooLarge,
                format!(
                    "the session would keep {} bytes, over the worker's limit of {} bytes per \
                     session (--max-session-bytes): release tensors",
                    s.bytes.saturating_add(bytes),
                    limits.max_session_bytes
                ),
            ));
        }
        s.bytes += bytes;
        let mut reply = Vec::with_capacity(outputs.len());
        for (t, inline) in outputs.into_iter().zip(inlines) {
            let id = s.next_id;
            s.next_id += 1;
            s.tensors.insert(id, t);
            reply.push(RunOutput {
                handle: Handle {
                    instance: self.instance,
                    session: self.id,
                    id,
                },
                inline,
            });
        }
        drop(s);
        Ok(RunReply {
            outputs: reply,
            execution_ns,
            operator_times: times,
        })
    }
}

fn too_large(bytes: usize, limits: &SessionLimits, what: &str) -> WorkerError {
    WorkerError::new(
        ErrorKind::TooLarge,
        format!(
            "{what} would be a message of {bytes} bytes, over the limit of {} bytes \
             (--max-message-bytes)",
            limits.max_message_bytes
        ),
    )
}

fn host_tensor_within(
    t: &Tensor,
    limits: &SessionLimits,
    what: &str,
) -> Result<HostTensor, WorkerError> {
    let bytes = (t.numel() as usize).saturating_mul(t.element_size());
    // Room for the reply's own fields.
    if bytes > limits.max_message_bytes.saturating_sub(4096) {
        return Err(too_large(bytes, limits, what));
    }
    to_host_tensor(t).map_err(|e| WorkerError::new(ErrorKind::Execution, format!("{what}: {e}")))
}

/// Decodes a graph and prepares it to run on the CPU: its device constants (the device it was
/// captured for: `lazy`, a renamed PrivateUse1 device) become `cpu`.
fn prepare(bytes: &[u8]) -> Result<WorkerPlan, WorkerError> {
    let graph = Graph::from_bytes(bytes).map_err(|e| invalid(format!("bad graph: {e}")))?;
    let inputs: Vec<TensorMeta> = graph
        .inputs()
        .iter()
        .map(|id| (*graph.node(*id).outputs()[0].meta).clone())
        .collect();
    let device =
        captured_device(&graph).map_err(|e| invalid(format!("bad graph: {}", e.message)))?;
    let options = RunOptions {
        keys: Some(DispatchKeySet::from_key(DispatchKey::CPU)),
        device_map: device.map(|ty| (ty, Device::CPU)),
        check_metadata: true,
    };
    let mut result_bytes: u64 = 0;
    for n in graph.nodes().filter(|n| !n.is_input()) {
        for o in n.outputs() {
            let m = &o.meta;
            let numel = switchboard_graph::check_geometry(&m.sizes, &m.strides, 0, m.dtype)
                .map_err(|e| invalid(format!("bad graph: {e}")))?;
            result_bytes = result_bytes.saturating_add(numel * m.dtype.element_size() as u64);
        }
    }
    let plan = Plan::new(graph);
    check_shapes(&plan, &inputs, device)?;
    Ok(WorkerPlan {
        plan,
        inputs,
        options,
        result_bytes,
        graph_bytes: bytes.len() as u64,
    })
}

// Note [Checking a graph's shapes before it runs]
// A graph from the network records the metadata of every result, and the byte limits are
// checked against it; but a call's arguments decide what its kernel allocates (`zeros(size)`,
// `expand`), so a graph whose records understate them could make the worker allocate far more
// than it declared before the result is compared with its record. Before a plan is kept it
// runs once on meta tensors, through the Meta kernels (the lazy backend's shape functions),
// with every result compared with its record: a graph that lies about a size is refused
// before any memory is allocated for it.

/// Runs `plan` on meta tensors of the input metadata (Note [Checking a graph's shapes before
/// it runs]).
fn check_shapes(
    plan: &Plan,
    inputs: &[TensorMeta],
    device: Option<DeviceType>,
) -> Result<(), WorkerError> {
    let key_set = Device::META
        .dense_key_set()
        .map_err(|e| invalid(e.to_string()))?;
    let tensors = inputs
        .iter()
        .map(|m| {
            let nbytes =
                switchboard_graph::check_geometry(&m.sizes, &m.strides, m.storage_offset, m.dtype)
                    .map(|numel| if numel == 0 { 0 } else { extent_bytes(m) })
                    .map_err(|e| invalid(format!("bad graph: {e}")))?;
            Tensor::without_data(
                &switchboard_tensor::DatalessTensor {
                    sizes: &m.sizes,
                    strides: &m.strides,
                    storage_offset: m.storage_offset,
                    dtype: m.dtype,
                    device: Device::META,
                    key_set,
                    storage_nbytes: nbytes,
                    payload_tag: 0,
                },
                None,
                None,
            )
            .map_err(|e| invalid(format!("bad graph input: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let options = RunOptions {
        keys: Some(DispatchKeySet::from_key(DispatchKey::Meta)),
        device_map: device.map(|ty| (ty, Device::META)),
        check_metadata: true,
    };
    let _below = AutoDispatchBelowADInplaceOrView::new();
    plan.run(tensors, &options)
        .map(|_| ())
        .map_err(|e| invalid(format!("the graph's recorded shapes do not hold: {e}")))
}

/// The bytes from the start of the storage to the last element of `m` (a checked geometry
/// with at least one element).
fn extent_bytes(m: &TensorMeta) -> usize {
    let last: i64 = m.storage_offset
        + m.sizes
            .iter()
            .zip(&m.strides)
            .map(|(s, st)| (s - 1) * st)
            .sum::<i64>();
    (last as usize + 1) * m.dtype.element_size()
}

/// The one device type other than the CPU and meta that the graph's device constants name
/// (the device it was captured for). A call that makes a tensor from no tensor (a factory)
/// must name that device: on the CPU, or without a device, it would allocate on the worker's
/// CPU even in the shape check (Note [Checking a graph's shapes before it runs]), and a lazy
/// capture never records one.
fn captured_device(graph: &Graph) -> Result<Option<DeviceType>, WorkerError> {
    let mut found: Option<DeviceType> = None;
    let mut factories = Vec::new();
    for (i, n) in graph.nodes().enumerate() {
        let NodeKind::Call { op } = n.kind() else {
            continue;
        };
        let mut named = Vec::new();
        for a in n.args() {
            let switchboard_graph::Arg::Const(c) = a else {
                continue;
            };
            match c {
                IValue::Device(d) => named.push(*d),
                IValue::Tuple(vs) | IValue::GenericList(vs) => {
                    named.extend(vs.iter().filter_map(|v| match v {
                        IValue::Device(d) => Some(*d),
                        _ => None,
                    }))
                }
                _ => {}
            }
        }
        for d in &named {
            if matches!(d.ty, DeviceType::CPU | DeviceType::Meta) {
                continue;
            }
            match found {
                Some(ty) if ty != d.ty => {
                    return Err(invalid(format!(
                        "the graph names devices of two types, {ty} and {}: a worker runs \
                         graphs captured for one device",
                        d.ty
                    )))
                }
                _ => found = Some(d.ty),
            }
        }
        if n.inputs().next().is_none() {
            factories.push((i, op.name().to_string(), named));
        }
    }
    for (i, op, named) in factories {
        let on_captured = named
            .iter()
            .any(|d| Some(d.ty) == found && !matches!(d.ty, DeviceType::CPU | DeviceType::Meta));
        if !on_captured {
            return Err(invalid(format!(
                "node {i} ({op}) makes a tensor on {}: a worker runs only calls on the device the \
                 graph was captured for",
                match named.first() {
                    Some(d) => d.to_string(),
                    None => "the default device (no device given)".to_string(),
                }
            )));
        }
    }
    Ok(found)
}

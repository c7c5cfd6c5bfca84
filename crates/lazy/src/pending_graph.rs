//! The pending graph: every captured call of the current epoch, the tensors its inputs stand
//! for, the storages waiting for its results; and running it (`sync`).

use std::sync::{Arc, MutexGuard};
use std::thread::ThreadId;
use std::time::Instant;

use switchboard_dispatcher::Result;
use switchboard_graph::{Graph, NodeKind, StructuralKey, TensorMeta, Value};
use switchboard_tensor::{Tensor, TensorError, TensorImpl, VersionCounter};

use crate::backend::LazyBackend;
use crate::pending::PendingStorages;
use crate::storage::{at_base, failed, tensor_of, whole, Contents, LazyStorage};

/// The pending graph and what goes with it (one per lazy device, behind
/// [`LazyBackend::lock_pending_graph`]).
pub(crate) struct PendingGraph {
    /// The calls captured since the last sync, in program order.
    pub graph: Graph,
    /// The tensor each input of `graph` stands for (materialised data, host tensors).
    pub inputs: Vec<Tensor>,
    /// The storages given a pending value in this epoch (a storage nobody else holds any
    /// more needs no result, and the calls only it needed are dead: Note [Pending storages]).
    pub pending: PendingStorages,
    /// Counts syncs; a pending value is only valid in its epoch.
    pub epoch: u64,
    /// The thread running a sync, and how many syncs it is running (nested ones: a kernel
    /// called `sync`). See Note [Running without the lock].
    running: Option<(ThreadId, u32)>,
    /// The graph and input list of the last sync, emptied, for a later epoch to reuse.
    spare: Option<(Graph, Vec<Tensor>)>,
}

impl PendingGraph {
    /// An empty pending graph.
    pub fn new() -> PendingGraph {
        PendingGraph {
            graph: Graph::new(),
            inputs: Vec::new(),
            pending: PendingStorages::new(),
            epoch: 0,
            running: None,
            spare: None,
        }
    }
}

impl LazyBackend {
    /// The pending graph, locked. Lock order: this lock, then storage locks. While another
    /// thread runs a sync, waits until it is done (Note [Running without the lock]).
    pub(crate) fn lock_pending_graph(&'static self) -> MutexGuard<'static, PendingGraph> {
        let ctx = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if ctx.running.is_none() {
            return ctx;
        }
        self.wait_for_sync(ctx)
    }

    #[cold]
    #[inline(never)]
    fn wait_for_sync(
        &'static self,
        mut ctx: MutexGuard<'static, PendingGraph>,
    ) -> MutexGuard<'static, PendingGraph> {
        let me = std::thread::current().id();
        while ctx.running.is_some_and(|(owner, _)| owner != me) {
            ctx = self.sync_done.wait(ctx).unwrap_or_else(|e| e.into_inner());
        }
        ctx
    }

    /// Runs the pending graph for every live storage waiting for a value, and starts a new
    /// epoch (Note [Running without the lock]). A call that fails fails the storages that
    /// depend on it (with its error, which is returned); the others get their values.
    pub(crate) fn run_pending(&'static self) -> Result<()> {
        let running = self.lock_pending_graph().start_sync(self);
        match running {
            Some(r) => r.finish(),
            None => Ok(()),
        }
    }
}

impl PendingGraph {
    /// The graph value of lazy tensor `t`, whose storage is `ls`: the storage's value (Note
    /// [Lazy values]).
    #[inline]
    pub fn read(&mut self, t: &TensorImpl, ls: &LazyStorage) -> Result<Value> {
        // The usual case, inline: a value (a pending one, or the input standing for its data)
        // already in this epoch's graph (Note [Cached storage values]: no storage lock).
        if at_base(ls, t) {
            if let Some(v) = ls.cached_value(self.epoch) {
                return Ok(v);
            }
        }
        whole(ls, t)?;
        self.read_storage(ls)
    }

    /// [`read`](Self::read), every case.
    fn read_storage(&mut self, ls: &LazyStorage) -> Result<Value> {
        let mut st = ls.lock();
        Ok(match &st.contents {
            Contents::Pending { value, epoch } if *epoch == self.epoch => *value,
            // Its graph is running: only a kernel of it (on the running thread) gets here.
            Contents::Pending { .. } => return Err(in_flight()),
            Contents::Failed(e) => return Err(failed(e)),
            Contents::Data(d) => match st.input {
                Some((epoch, v)) if epoch == self.epoch => v,
                _ => {
                    let v = self.graph.add_input(TensorMeta::of(d));
                    self.inputs.push(d.clone());
                    st.input = Some((self.epoch, v));
                    ls.cache_value(self.epoch, v);
                    v
                }
            },
        })
    }

    /// A graph input holding the host tensor `t` (a snapshot the caller made).
    pub fn host_input(&mut self, t: Tensor) -> Value {
        let v = self.graph.add_input(TensorMeta::of(&t));
        self.inputs.push(t);
        v
    }

    /// Makes `v` the new value of storage `ls`, which a call wrote whole (Note [Lazy values]).
    pub fn write(&mut self, ls: &Arc<LazyStorage>, v: Value) {
        let mut st = ls.lock();
        st.contents = Contents::Pending {
            value: v,
            epoch: self.epoch,
        };
        st.input = None;
        ls.cache_value(self.epoch, v);
        if st.registered_epoch != self.epoch {
            st.registered_epoch = self.epoch;
            self.pending.register(ls.clone());
        }
    }

    /// A new lazy tensor of `backend`'s device (whose pending graph this is) with metadata
    /// `meta` over `nbytes`, holding `v`, with a version counter of its own or `version`.
    #[inline]
    pub fn fresh(
        &mut self,
        backend: &'static LazyBackend,
        meta: Arc<TensorMeta>,
        nbytes: usize,
        v: Value,
        version: Option<VersionCounter>,
    ) -> Result<Tensor> {
        let contents = Contents::Pending {
            value: v,
            epoch: self.epoch,
        };
        let ls = self
            .pending
            .fresh(backend, meta, nbytes, contents, self.epoch);
        tensor_of(ls, version)
    }

    /// Ends the epoch: takes the calls and the live storages waiting for them out of the
    /// pending graph, for [`sync`] to run without the lock (Note [Running without the lock]).
    /// `None` when no live storage waits for a value.
    fn start_sync(&mut self, backend: &'static LazyBackend) -> Option<RunningSync> {
        let mut live = Vec::new();
        let mut outputs = Vec::new();
        for ls in self.pending.take_live() {
            let value = match ls.lock().contents {
                Contents::Pending { value, epoch } if epoch == self.epoch => value,
                _ => continue,
            };
            outputs.push(value);
            live.push(ls);
        }
        let epoch = self.epoch;
        self.epoch += 1;
        if outputs.is_empty() {
            self.graph.clear();
            self.inputs.clear();
            return None;
        }
        let (spare_graph, spare_inputs) = self.spare.take().unwrap_or_default();
        let graph = std::mem::replace(&mut self.graph, spare_graph);
        let inputs = std::mem::replace(&mut self.inputs, spare_inputs);
        let me = std::thread::current().id();
        self.running = Some(match self.running {
            Some((_, depth)) => (me, depth + 1),
            None => (me, 1),
        });
        Some(RunningSync {
            backend,
            graph,
            inputs,
            outputs,
            live,
            epoch,
            ended: false,
        })
    }
}

// Note [Running without the lock]
// The calls of a graph are kernels, and a kernel is user code: a custom operator's kernel may
// call the lazy API (`pending_calls`, capture more lazy calls, even `sync`). So a sync holds
// the pending-graph lock only to take the graph out (ending the epoch) and to store the results:
// the executor compiles and runs the graph without it, and the graph cache is not locked
// while the executor compiles. While it runs, the pending graph records which thread runs it, and
// other threads wait in `lock_pending_graph` until it is done (as they waited for the lock before), so
// they never see the storages it is computing. The running thread itself goes on: what its
// kernels capture belongs to the new epoch, and reading a storage being computed is an error
// (its value does not exist yet) instead of a deadlock. The kernels must call the lazy API on
// the thread that runs them (the executor's thread).

/// A graph taken out of the pending graph by [`PendingGraph::start_sync`], running.
struct RunningSync {
    backend: &'static LazyBackend,
    graph: Graph,
    inputs: Vec<Tensor>,
    outputs: Vec<Value>,
    /// The storages waiting for `outputs`, in order.
    live: Vec<Arc<LazyStorage>>,
    /// The epoch whose graph it is.
    epoch: u64,
    /// Whether the results are stored and the pending graph released.
    ended: bool,
}

impl RunningSync {
    /// Runs the graph (without the pending-graph lock) and stores each result in its storage.
    fn finish(mut self) -> Result<()> {
        let results = self.run().and_then(|results| {
            if results.len() == self.live.len() {
                return Ok(results);
            }
            Err(TensorError::invalid(format!(
                "the executor returned {} tensors for {} outputs",
                results.len(),
                self.live.len()
            ))
            .into())
        });
        let mut ctx = self
            .backend
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let live = std::mem::take(&mut self.live);
        let outcome = match results {
            Ok(results) => {
                let mut first_error = Ok(());
                for (ls, r) in live.iter().zip(results) {
                    match r {
                        Ok(t) => self.store(ls, Contents::Data(t)),
                        Err(e) => {
                            self.store(ls, Contents::Failed(e.to_string().into()));
                            if first_error.is_ok() {
                                first_error = Err(e);
                            }
                        }
                    }
                }
                first_error
            }
            // Nothing ran (the executor failed to compile the graph, or broke its contract).
            Err(e) => {
                let msg: Arc<str> = e.to_string().into();
                for ls in &live {
                    self.store(ls, Contents::Failed(msg.clone()));
                }
                Err(e)
            }
        };
        self.end(&mut ctx);
        outcome
    }

    /// Gives `ls` its contents after the run, unless it was given a new value meanwhile (or
    /// already got its result). Called with the pending-graph lock held (Note [Cached storage values]).
    fn store(&self, ls: &LazyStorage, contents: Contents) {
        let mut st = ls.lock();
        if matches!(st.contents, Contents::Pending { epoch, .. } if epoch == self.epoch) {
            st.contents = contents;
            st.input = None;
            ls.forget_cached_value();
        }
    }

    /// The sync is over: other threads may use the pending graph again; the graph's memory is kept
    /// for a later epoch.
    fn end(&mut self, ctx: &mut PendingGraph) {
        self.ended = true;
        ctx.running = match ctx.running {
            Some((owner, depth)) if depth > 1 => Some((owner, depth - 1)),
            _ => None,
        };
        let mut graph = std::mem::take(&mut self.graph);
        let mut inputs = std::mem::take(&mut self.inputs);
        graph.clear();
        inputs.clear();
        ctx.spare = Some((graph, inputs));
        self.backend.sync_done.notify_all();
    }

    /// Compiles (or finds in the cache) and runs the graph: each output's tensor or error.
    fn run(&mut self) -> Result<Vec<Result<Tensor>>> {
        let start = Instant::now();
        self.graph.set_outputs(std::mem::take(&mut self.outputs))?;
        let keep = self.graph.live_nodes();
        let key = StructuralKey::of(&self.graph, Some(&keep));
        // The inputs are handed over, not cloned: the data of a value that died before the
        // sync is then held by the plan alone, which may write a result into it (Note [Writing
        // into a dying argument] in switchboard-graph).
        let mut given: Vec<Option<Tensor>> = self.inputs.drain(..).map(Some).collect();
        let inputs: Vec<Tensor> = self
            .graph
            .inputs()
            .iter()
            .filter(|id| keep[id.index()])
            .map(|id| match self.graph.node(*id).kind() {
                NodeKind::Input { index } => given[*index as usize].take(),
                NodeKind::Call { .. } => unreachable!("inputs are input nodes"),
            })
            .collect::<Option<_>>()
            .ok_or_else(|| TensorError::invalid("lazy: a graph input is read twice"))?;
        drop(given);
        let dead = keep.iter().filter(|k| !**k).count();
        let stats = &self.backend.stats;
        let exe = self
            .backend
            .get_or_compile(key, || self.graph.compact(&keep).0);
        let result = exe.and_then(|exe| {
            let r = exe.run_each(inputs)?;
            stats.nodes_executed.add(exe.calls() as u64);
            stats.nodes_merged.add(exe.merged() as u64);
            Ok(r)
        });
        stats.syncs.inc();
        stats.nodes_dead.add(dead as u64);
        stats.sync_ns.add(start.elapsed().as_nanos() as u64);
        result
    }
}

impl Drop for RunningSync {
    /// A kernel panicked during the run: the storages it was computing fail, and the pending graph
    /// is released for the other threads.
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let mut ctx = self
            .backend
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let msg: Arc<str> = "a kernel of the graph panicked".into();
        for ls in std::mem::take(&mut self.live) {
            self.store(&ls, Contents::Failed(msg.clone()));
        }
        self.end(&mut ctx);
    }
}

/// The error of reading a lazy storage whose value the running sync is computing (a kernel
/// of the graph read it; Note [Running without the lock]).
pub(crate) fn in_flight() -> switchboard_dispatcher::DispatchError {
    TensorError::invalid(
        "this lazy tensor has no value yet: the graph computing it is running (a kernel of \
         that graph read it)",
    )
    .into()
}

//! The pending graph: every captured call of the current epoch, the tensors its inputs stand
//! for, the storages waiting for its results; and running it (`sync`).

use std::sync::{Arc, LazyLock, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use switchboard_dispatcher::{Dispatcher, IValue, OperatorHandle, Result};
use switchboard_graph::{Arg, Graph, NodeKind, Output, StructuralKey, TensorMeta, Value};
use switchboard_tensor::{DimVec, ScalarType, Tensor, TensorError, TensorImpl, VersionCounter};

use crate::cache;
use crate::pending::PendingStorages;
use crate::rules::plain_geometry;
use crate::stats::STATS;
use crate::storage::{
    at_base, failed, flat_elements, lazy_meta, same_geometry, tensor_of, Contents, LazyStorage,
};

/// The pending graph and what goes with it (one per process, behind [`context`]).
pub(crate) struct Context {
    /// The calls captured since the last sync, in program order.
    pub graph: Graph,
    /// The tensor each input of `graph` stands for (materialised data, host tensors).
    pub inputs: Vec<Tensor>,
    /// The storages given a pending value in this epoch (a storage nobody else holds any
    /// more needs no result, and the calls only it needed are dead: Note [Pending storages]).
    pub pending: PendingStorages,
    /// Counts syncs; a pending value is only valid in its epoch.
    pub epoch: u64,
}

static CONTEXT: LazyLock<Mutex<Context>> = LazyLock::new(|| {
    Mutex::new(Context {
        graph: Graph::new(),
        inputs: Vec::new(),
        pending: PendingStorages::new(),
        epoch: 0,
    })
});

/// The pending graph, locked. Lock order: this lock, then storage locks.
pub(crate) fn context() -> MutexGuard<'static, Context> {
    CONTEXT.lock().unwrap_or_else(|e| e.into_inner())
}

/// The handle of `name`, an operator switchboard-ops defines, looked up once into `cell`.
fn aten_op(cell: &'static OnceLock<OperatorHandle>, name: &str) -> &'static OperatorHandle {
    cell.get_or_init(|| {
        Dispatcher::global()
            .find_schema_or_throw(name)
            .unwrap_or_else(|_| panic!("switchboard-ops defines {name}"))
    })
}

fn as_strided_op() -> &'static OperatorHandle {
    static OP: OnceLock<OperatorHandle> = OnceLock::new();
    aten_op(&OP, "aten::as_strided")
}

fn view_dtype_op() -> &'static OperatorHandle {
    static OP: OnceLock<OperatorHandle> = OnceLock::new();
    aten_op(&OP, "aten::view.dtype")
}

// Note [Lazy views of another dtype]
// `x.view(dtype)` (Note [Views of another dtype] in switchboard-tensor) is metadata only: the
// lazy tensor it makes shares its base's storage and payload, with another dtype. The storage's
// value keeps the dtype of the storage's base geometry, so a tensor of another dtype reads it
// through a reinterpretation, and a write through it is reinterpreted back:
// - read: `as_strided(view.dtype(as_strided(value, [n], [1], 0), dtype), geometry)`, the
//   storage's bytes as one flat row of elements of the base's dtype, viewed as the tensor's
//   dtype, then the tensor's elements;
// - write: `as_strided(view.dtype(as_strided(result, [m], [1], 0), base dtype), base)`.
// The flat row ends at the last whole element of the wider dtype, so both `view.dtype` calls
// are valid; every element a tensor of either dtype can address lies inside it or is reached
// by the outer `as_strided`, which (on the CPU, where the graph runs) addresses the storage,
// not its input's elements. On the CPU these are views of the same memory, so the program the
// executor runs is still the eager one.

impl Context {
    /// The graph value of lazy tensor `t`, whose storage is `ls` (Note [Lazy mutations and
    /// views]): the storage's value when `t` has the storage's base geometry, else a view
    /// (`as_strided`) of it.
    #[inline]
    pub fn read(&mut self, t: &TensorImpl, ls: &LazyStorage) -> Result<Value> {
        self.read_known(t, ls, at_base(ls, t))
    }

    /// [`read`](Self::read) when the caller knows whether `t` has the storage's base geometry
    /// (`at_base`).
    #[inline]
    pub fn read_known(&mut self, t: &TensorImpl, ls: &LazyStorage, at_base: bool) -> Result<Value> {
        debug_assert_eq!(at_base, same_geometry(&ls.base, t));
        // The usual case, inline: a tensor with its storage's base geometry whose value (a
        // pending one, or the input standing for its data) is already in this epoch's graph.
        // (Note [Storage value hints]: no storage lock.)
        if at_base {
            if let Some(v) = ls.hinted_value(self.epoch) {
                return Ok(v);
            }
        }
        self.read_general(t, ls)
    }

    /// [`read`](Self::read), every case.
    fn read_general(&mut self, t: &TensorImpl, ls: &LazyStorage) -> Result<Value> {
        let mut st = ls.lock();
        let base = match &st.contents {
            Contents::Pending { value, epoch } if *epoch == self.epoch => *value,
            Contents::Pending { .. } => {
                return Err(TensorError::invalid(
                    "internal error: a lazy tensor holds a value of a graph that already ran",
                )
                .into())
            }
            Contents::Failed(e) => return Err(failed(e)),
            Contents::Data(d) => match st.input {
                Some((epoch, v)) if epoch == self.epoch => v,
                _ => {
                    let v = self.graph.add_input(TensorMeta::of(d));
                    self.inputs.push(d.clone());
                    st.input = Some((self.epoch, v));
                    ls.set_hint(self.epoch, v);
                    v
                }
            },
        };
        if at_base(ls, t) {
            return Ok(base);
        }
        if st.views_epoch != self.epoch {
            st.views.clear();
            st.views_epoch = self.epoch;
        }
        if let Some((_, v)) = st.views.iter().find(|(m, _)| same_geometry(m, t)) {
            return Ok(*v);
        }
        let m = Arc::new(lazy_meta(t));
        let of = if t.dtype() == ls.base.dtype {
            base
        } else {
            self.reinterpret(base, ls.base.dtype, t.dtype(), ls.nbytes)
        };
        let v = self.as_strided(of, m.clone());
        st.views.push((m, v));
        Ok(v)
    }

    /// A graph input holding the host tensor `t` (a snapshot the caller made).
    pub fn host_input(&mut self, t: Tensor) -> Value {
        let v = self.graph.add_input(TensorMeta::of(&t));
        self.inputs.push(t);
        v
    }

    /// A call of `aten::as_strided` on `of` (a value with a storage's base geometry or a view
    /// of that storage) giving the elements of geometry `m`.
    fn as_strided(&mut self, of: Value, m: Arc<TensorMeta>) -> Value {
        let args = vec![
            Arg::Value(of),
            Arg::Const(IValue::IntList(m.sizes.iter().copied().collect())),
            Arg::Const(IValue::IntList(m.strides.iter().copied().collect())),
            Arg::Const(IValue::Int(m.storage_offset)),
        ];
        let id =
            self.graph
                .add_call_unchecked(as_strided_op().clone(), args, vec![Output::ret(0, m)]);
        STATS.nodes_captured.inc();
        Value::new(id, 0)
    }

    /// `v`, a value of storage bytes `nbytes` with elements of `from`, as one flat row of
    /// elements of `to` (Note [Lazy views of another dtype]).
    fn reinterpret(&mut self, v: Value, from: ScalarType, to: ScalarType, nbytes: usize) -> Value {
        let n = flat_elements(nbytes, from, to);
        let flat = |n: i64, dtype: ScalarType| {
            Arc::new(TensorMeta {
                sizes: DimVec::from_slice(&[n]),
                strides: DimVec::from_slice(&[1]),
                storage_offset: 0,
                dtype,
                device: crate::DEVICE,
            })
        };
        let row = self.as_strided(v, flat(n, from));
        let m = flat(
            n * from.element_size() as i64 / to.element_size() as i64,
            to,
        );
        let args = vec![Arg::Value(row), Arg::Const(IValue::ScalarType(to))];
        let id =
            self.graph
                .add_call_unchecked(view_dtype_op().clone(), args, vec![Output::ret(0, m)]);
        STATS.nodes_captured.inc();
        Value::new(id, 0)
    }

    /// Makes `v`, the new value of the elements of geometry `m` of storage `ls`, part of the
    /// storage's contents (a write through a view updates the whole storage).
    pub fn write(&mut self, ls: &Arc<LazyStorage>, m: &TensorMeta, v: Value) {
        let same = m.storage_offset == ls.base.storage_offset
            && m.sizes == ls.base.sizes
            && m.strides == ls.base.strides
            && m.dtype == ls.base.dtype;
        let new = if same {
            v
        } else if m.dtype != ls.base.dtype {
            // A write through a view of another dtype (Note [Lazy views of another dtype]).
            let row = self.reinterpret(v, m.dtype, ls.base.dtype, ls.nbytes);
            self.as_strided(row, ls.base.clone())
        } else {
            // The result of a write through a view aliases the whole storage: its base is an
            // `as_strided` of it with the base geometry.
            self.as_strided(v, ls.base.clone())
        };
        let mut st = ls.lock();
        st.contents = Contents::Pending {
            value: new,
            epoch: self.epoch,
        };
        st.views.clear();
        st.input = None;
        ls.set_hint(self.epoch, new);
        if st.registered_epoch != self.epoch {
            st.registered_epoch = self.epoch;
            self.pending.register(ls.clone());
        }
    }

    /// A new lazy tensor with metadata `meta` over `nbytes`, holding `v`, with a version
    /// counter of its own or `version`.
    pub fn fresh(
        &mut self,
        meta: Arc<TensorMeta>,
        nbytes: usize,
        v: Value,
        version: Option<VersionCounter>,
    ) -> Result<Tensor> {
        let plain = plain_geometry(&meta);
        self.fresh_known(meta, plain, nbytes, v, version)
    }

    /// [`fresh`](Self::fresh) when the caller knows whether `meta` is plain
    /// (`plain_geometry(&meta)`, Note [Shape rules]).
    // Inlined into the capture's fast path (see `record_ruled`).
    #[inline(always)]
    pub fn fresh_known(
        &mut self,
        meta: Arc<TensorMeta>,
        plain: bool,
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
            .fresh(meta, plain, nbytes, contents, self.epoch);
        tensor_of(ls, version)
    }

    /// Runs the pending graph for every live storage waiting for a value, and starts a new
    /// epoch. On failure the storages that were waiting hold the error.
    pub fn sync(&mut self) -> Result<()> {
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
        let result = if outputs.is_empty() {
            Ok(())
        } else {
            self.run(outputs, &live)
        };
        self.graph.clear();
        self.inputs.clear();
        self.epoch += 1;
        result
    }

    fn run(&mut self, outputs: Vec<Value>, live: &[Arc<LazyStorage>]) -> Result<()> {
        let start = Instant::now();
        self.graph.set_outputs(outputs)?;
        let keep = self.graph.live_nodes();
        let key = StructuralKey::of(&self.graph, Some(&keep));
        let inputs: Vec<Tensor> = self
            .graph
            .inputs()
            .iter()
            .filter(|id| keep[id.index()])
            .map(|id| match self.graph.node(*id).kind() {
                NodeKind::Input { index } => self.inputs[*index as usize].clone(),
                NodeKind::Call { .. } => unreachable!("inputs are input nodes"),
            })
            .collect();
        let dead = keep.iter().filter(|k| !**k).count();
        let exe = cache::get_or_compile(key, || self.graph.compact(&keep).0);
        let result = exe.and_then(|exe| {
            let r = exe.run(inputs)?;
            STATS.nodes_executed.add(exe.calls() as u64);
            STATS.nodes_merged.add(exe.merged() as u64);
            Ok(r)
        });
        STATS.syncs.inc();
        STATS.nodes_dead.add(dead as u64);
        STATS.sync_ns.add(start.elapsed().as_nanos() as u64);
        match result {
            Ok(results) if results.len() == live.len() => {
                for (ls, r) in live.iter().zip(results) {
                    let mut st = ls.lock();
                    st.contents = Contents::Data(r);
                    st.input = None;
                    ls.clear_hint();
                }
                Ok(())
            }
            Ok(results) => {
                let e: switchboard_dispatcher::DispatchError = TensorError::invalid(format!(
                    "the executor returned {} tensors for {} outputs",
                    results.len(),
                    live.len()
                ))
                .into();
                fail(live, &e);
                Err(e)
            }
            Err(e) => {
                fail(live, &e);
                Err(e)
            }
        }
    }
}

fn fail(live: &[Arc<LazyStorage>], e: &switchboard_dispatcher::DispatchError) {
    let msg: Arc<str> = e.to_string().into();
    for ls in live {
        ls.lock().contents = Contents::Failed(msg.clone());
        ls.clear_hint();
    }
}

//! [`Plan`]: a graph prepared to run: dead nodes dropped, identical pure calls merged, copies
//! no one can tell from views run as views, pure calls on dying arguments run in place, and
//! each intermediate freed after its last use.

use std::collections::HashMap;
use std::sync::Arc;

use switchboard_dispatcher::{
    DispatchError, DispatchKeySet, IValue, OperatorHandle, OperatorSemantics, Result, Stack,
};
use switchboard_keys::DeviceType;
use switchboard_tensor::{copy_strided, Device, Tensor, TensorError};

use crate::aliasing::{is_pure, output_root};
use crate::copy_as_view::{copies_as_views, CopyAsView};
use crate::graph::Graph;
use crate::in_place::in_place_forms;
use crate::key::{encode_node, Encoder};
use crate::node::{Arg, NodeId, Source, Value};

// Note [Merging identical nodes]
// Two calls of a pure operator (Aliasing / `is_pure`: no argument written, no randomness) on
// the same values with equal constants compute equal tensors, so the later one can take the
// earlier one's results. With mutation in the graph (Note [Graph IR]) that is only safe when
// no one writes either result afterwards: if `y = x + 1; z = x + 1; y.add_(1)` merged `z`
// into `y`, the in-place add would change `z` too. So a plan first finds, for every value,
// the value whose memory it is ("root": a view's root is its base's root, a written argument's
// new value is the old one's root), marks the roots some node writes, and merges a node only
// when neither node's results are written, and when its results are not outputs of the graph
// (an output is handed to a caller who may write it later). Nodes that read no value
// (factories) are not merged either: each call allocates memory of its own.

// Note [Failing calls]
// Eager code that calls a failing operator loses that call's results and whatever is computed
// from them; the other calls of the program still run. `Plan::run_each` keeps that: a failed
// call leaves its output slots without a value and with its error, a call reading such a slot
// fails with the same error (so the failure follows the data, not the order of calls), and
// every other call runs. A lazy backend running a step's graph can then fail only the tensors
// that depend on the failing call.

/// A call as the plan runs it.
#[derive(Clone, Debug)]
struct Step {
    /// The node.
    node: u32,
    /// The slots freed after it runs (their last reader).
    free: Vec<u32>,
}

/// How [`Plan::run`] calls operators.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Redispatch every call to exactly these keys (e.g. `DispatchKeySet::from(CPU)` to run on
    /// CPU kernels without any layer above them); `None` dispatches each call normally from
    /// its arguments' keys.
    pub keys: Option<DispatchKeySet>,
    /// Device constants of this type are replaced by the given device (a graph captured for a
    /// `lazy` device runs on `cpu`).
    pub device_map: Option<(DeviceType, Device)>,
    /// Checks each result against its recorded metadata: a fresh result laid out differently
    /// is copied into the recorded strides (views of it must address the same elements);
    /// other mismatches are errors.
    pub check_metadata: bool,
}

/// A graph ready to run (see the module documentation and Note [Merging identical nodes]).
///
/// ```
/// use switchboard_dispatcher::{Dispatcher, IValue};
/// use switchboard_graph::{Arg, Graph, Output, Plan, RunOptions, TensorMeta};
/// use switchboard_tensor::Tensor;
/// use switchboard_cpu as _;
/// use switchboard_ops as _;
///
/// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
/// let m = TensorMeta::of(&x);
/// let exp = Dispatcher::global().find_schema_or_throw("aten::exp").unwrap();
/// let add = Dispatcher::global().find_schema_or_throw("aten::add.Tensor").unwrap();
/// let mut g = Graph::new();
/// let a = g.add_input(m.clone());
/// let e1 = g.add_call(exp.clone(), vec![Arg::Value(a)], vec![Output::ret(0, m.clone())]).unwrap();
/// let e2 = g.add_call(exp, vec![Arg::Value(a)], vec![Output::ret(0, m.clone())]).unwrap();
/// let s = g.add_call(add, vec![Arg::Value(g.value(e1, 0)), Arg::Value(g.value(e2, 0)),
///                              Arg::Const(IValue::Int(1))], vec![Output::ret(0, m)]).unwrap();
/// g.set_outputs(vec![g.value(s, 0)]).unwrap();
/// let plan = Plan::new(g);
/// assert_eq!((plan.calls(), plan.merged()), (2, 1)); // exp runs once
/// let y = plan.run(vec![x], &RunOptions::default()).unwrap();
/// assert_eq!(y[0].to_vec::<f32>().unwrap(), [2.0 * 1f32.exp(), 2.0 * 2f32.exp()]);
/// ```
#[derive(Clone, Debug)]
pub struct Plan {
    graph: Graph,
    /// First slot of each node's outputs.
    slot_base: Vec<u32>,
    /// Value slots read by the graph's arguments and outputs, after merging: the slot a value
    /// is read from (a merged node's outputs read the surviving node's slots).
    slot_of: Vec<u32>,
    slots: usize,
    steps: Vec<Step>,
    /// Per node: whether each return aliases an argument (such results are never re-laid out).
    aliasing: Vec<Option<Arc<OperatorSemantics>>>,
    merged: usize,
    /// The slots of the graph's outputs.
    output_slots: Vec<u32>,
    /// The slot of each input.
    input_slots: Vec<u32>,
    /// For each input: whether a call writes its memory (directly or through a view).
    written_inputs: Vec<bool>,
    /// Per node: the view operator its `*_copy` call may run as (Note [Copies that run as
    /// views]).
    as_view: Vec<Option<CopyAsView>>,
    /// Per node: the in-place overload its call may run as (Note [Writing into a dying
    /// argument]).
    in_place: Vec<Option<OperatorHandle>>,
}

impl Plan {
    /// Plans `graph` with [`is_pure`] deciding which calls may be merged.
    pub fn new(graph: Graph) -> Plan {
        Plan::with_purity(graph, &is_pure)
    }

    /// Plans `graph` with `pure` deciding which operators' calls may be merged (return false
    /// for all to run every live call).
    pub fn with_purity(graph: Graph, pure: &dyn Fn(&OperatorHandle) -> bool) -> Plan {
        let live = graph.live_nodes();
        Plan::build(graph, pure, live, false)
    }

    /// Plans `graph` to run every call in order, as the program it was recorded from did:
    /// none dropped (a call whose results nothing reads may still write an input), none
    /// merged, each as recorded (no copy run as a view, no call run in place). A tracer
    /// replays its graphs this way.
    pub fn every_call(graph: Graph) -> Plan {
        let live = vec![true; graph.len()];
        Plan::build(graph, &|_| false, live, true)
    }

    fn build(
        graph: Graph,
        pure: &dyn Fn(&OperatorHandle) -> bool,
        live: Vec<bool>,
        replay_as_recorded: bool,
    ) -> Plan {
        let n = graph.nodes.len();
        let mut slot_base = Vec::with_capacity(n);
        let mut slots = 0u32;
        for node in graph.nodes() {
            slot_base.push(slots);
            slots += node.outputs().len() as u32;
        }
        let slot = |v: Value| slot_base[v.node.index()] + v.output;
        let aliasing: Vec<Option<Arc<OperatorSemantics>>> = graph
            .nodes()
            .map(|node| node.op().map(|op| op.semantics().unwrap_or_default()))
            .collect();

        // The memory each value is (Note [Merging identical nodes]), and which is written.
        let mut root: Vec<u32> = (0..slots).collect();
        let mut written = vec![false; slots as usize];
        for (i, node) in graph.nodes().enumerate() {
            if node.is_input() {
                continue;
            }
            let args = node.args();
            let al = aliasing[i].as_ref().expect("calls have aliasing");
            let arg_root = |k: usize| match args.get(k) {
                Some(Arg::Value(v)) => Some(root[slot(*v) as usize]),
                _ => None,
            };
            let roots: Vec<Option<u32>> = node
                .outputs()
                .iter()
                .map(|o| output_root(al, o.source, arg_root))
                .collect();
            let written_roots: Vec<u32> = al.written.iter().filter_map(|&k| arg_root(k)).collect();
            for (j, r) in roots.into_iter().enumerate() {
                if let Some(r) = r {
                    root[(slot_base[i] + j as u32) as usize] = r;
                }
            }
            for r in written_roots {
                written[r as usize] = true;
            }
        }
        let is_output: Vec<bool> = {
            let mut o = vec![false; slots as usize];
            for v in &graph.outputs {
                o[slot(*v) as usize] = true;
            }
            o
        };

        // Merge identical pure calls, in order.
        let mut slot_of: Vec<u32> = (0..slots).collect();
        let mut seen: HashMap<Vec<u64>, usize> = HashMap::new();
        let mut merged_into = vec![usize::MAX; n];
        let mut merged = 0;
        for (i, node) in graph.nodes().enumerate() {
            if !live[i] {
                continue;
            }
            let Some(op) = node.op() else {
                continue;
            };
            let n_out = node.outputs().len() as u32;
            let reads_values = node.args().iter().any(|a| a.values().next().is_some());
            let own = slot_base[i]..slot_base[i] + n_out;
            let clean = own
                .clone()
                .all(|s| !written[root[s as usize] as usize] && !is_output[s as usize]);
            if !reads_values || !clean || !pure(op) {
                continue;
            }
            let mut w = Encoder::default();
            encode_node(&mut w, node, |v| u64::from(slot_of[slot(v) as usize]));
            match seen.get(&w.words) {
                Some(&first)
                    if (slot_base[first]..slot_base[first] + n_out)
                        .all(|s| !written[root[s as usize] as usize]) =>
                {
                    for j in 0..n_out {
                        slot_of[(slot_base[i] + j) as usize] =
                            slot_of[(slot_base[first] + j) as usize];
                    }
                    merged_into[i] = first;
                    merged += 1;
                }
                Some(_) => {}
                None => {
                    seen.insert(w.words, i);
                }
            }
        }

        // Steps and last uses.
        let mut order: Vec<usize> = Vec::new();
        for (i, node) in graph.nodes().enumerate() {
            if live[i] && !node.is_input() && merged_into[i] == usize::MAX {
                order.push(i);
            }
        }
        let mut last_use = vec![usize::MAX; slots as usize]; // step index
        for (s, &i) in order.iter().enumerate() {
            for v in graph.node(NodeId(i as u32)).inputs() {
                last_use[slot_of[slot(v) as usize] as usize] = s;
            }
        }
        let output_slots: Vec<u32> = graph
            .outputs
            .iter()
            .map(|v| slot_of[slot(*v) as usize])
            .collect();
        for &s in &output_slots {
            last_use[s as usize] = usize::MAX - 1; // never freed
        }
        let mut steps: Vec<Step> = order
            .iter()
            .map(|&i| Step {
                node: i as u32,
                free: Vec::new(),
            })
            .collect();
        for (s, &lu) in last_use.iter().enumerate() {
            if lu < steps.len() {
                steps[lu].free.push(s as u32);
            }
        }
        // A result nobody reads is dropped right after its node.
        for (step_index, &i) in order.iter().enumerate() {
            let base = slot_base[i];
            for j in 0..graph.num_outputs(i) {
                if last_use[(base + j) as usize] == usize::MAX {
                    steps[step_index].free.push(base + j);
                }
            }
        }
        let input_slots: Vec<u32> = graph
            .inputs
            .iter()
            .map(|id| slot_base[id.index()])
            .collect();
        let written_inputs = input_slots.iter().map(|&s| written[s as usize]).collect();
        let as_view = if replay_as_recorded {
            vec![None; n]
        } else {
            let mut output_slot = vec![false; slots as usize];
            for &s in &output_slots {
                output_slot[s as usize] = true;
            }
            copies_as_views(
                &graph,
                &aliasing,
                &order,
                &|v| slot_of[slot(v) as usize],
                &|s| written[root[s as usize] as usize],
                &|s| output_slot[s as usize],
                slots as usize,
            )
        };
        let in_place = if replay_as_recorded {
            vec![None; n]
        } else {
            let order: Vec<(usize, &[u32])> = steps
                .iter()
                .map(|s| (s.node as usize, &s.free[..]))
                .collect();
            in_place_forms(&graph, &aliasing, &order, &|v| slot_of[slot(v) as usize])
        };
        Plan {
            graph,
            slot_base,
            slot_of,
            slots: slots as usize,
            steps,
            aliasing,
            merged,
            output_slots,
            input_slots,
            written_inputs,
            as_view,
            in_place,
        }
    }

    /// The planned graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Consumes the plan, returning its graph.
    pub fn into_graph(self) -> Graph {
        self.graph
    }

    /// For each input of the graph: whether a planned call writes its memory (directly or
    /// through a view), so that a caller replaying the graph on a tensor it keeps passes a copy.
    pub fn written_inputs(&self) -> &[bool] {
        &self.written_inputs
    }

    /// The calls a run makes (live calls minus merged ones).
    pub fn calls(&self) -> usize {
        self.steps.len()
    }

    /// The calls merged into an identical earlier one.
    pub fn merged(&self) -> usize {
        self.merged
    }

    /// Runs the graph on `inputs` (one tensor per graph input, in order) and returns its
    /// outputs; the first call that fails ends the run with its error, as it ends a program.
    pub fn run(&self, inputs: Vec<Tensor>, opts: &RunOptions) -> Result<Vec<Tensor>> {
        let (slots, errors) = self.run_steps(inputs, opts, true, None)?;
        self.output_slots
            .iter()
            .map(|&s| take_slot(&slots, &errors, s))
            .collect()
    }

    /// Runs the graph on `inputs` as eager code would: a call that fails fails only the values
    /// computed from its results (Note [Failing calls]); returns each output or its error. The
    /// outer error is for inputs that do not fit the graph.
    pub fn run_each(&self, inputs: Vec<Tensor>, opts: &RunOptions) -> Result<Vec<Result<Tensor>>> {
        let (slots, errors) = self.run_steps(inputs, opts, false, None)?;
        Ok(self
            .output_slots
            .iter()
            .map(|&s| take_slot(&slots, &errors, s))
            .collect())
    }

    /// [`run`](Self::run), calling `on_call(op, time)` after each call with the operator and
    /// the time the call took (a remote worker's per-operator profile).
    pub fn run_timed(
        &self,
        inputs: Vec<Tensor>,
        opts: &RunOptions,
        on_call: &mut dyn FnMut(&OperatorHandle, std::time::Duration),
    ) -> Result<Vec<Tensor>> {
        let (slots, errors) = self.run_steps(inputs, opts, true, Some(on_call))?;
        self.output_slots
            .iter()
            .map(|&s| take_slot(&slots, &errors, s))
            .collect()
    }

    /// Runs the steps: the slots and the errors of the slots failed calls left without a
    /// value; with `stop_at_error`, the first failing call's error instead.
    #[allow(clippy::type_complexity)]
    fn run_steps(
        &self,
        inputs: Vec<Tensor>,
        opts: &RunOptions,
        stop_at_error: bool,
        mut on_call: Option<&mut dyn FnMut(&OperatorHandle, std::time::Duration)>,
    ) -> Result<(Vec<Option<Tensor>>, Vec<Option<DispatchError>>)> {
        if inputs.len() != self.input_slots.len() {
            return Err(TensorError::invalid(format!(
                "the graph has {} inputs but {} tensors were given",
                self.input_slots.len(),
                inputs.len()
            ))
            .into());
        }
        let mut slots: Vec<Option<Tensor>> = vec![None; self.slots];
        for (t, &s) in inputs.into_iter().zip(&self.input_slots) {
            slots[s as usize] = Some(t);
        }
        // The error of each slot a failed call left without a value (allocated on the first
        // failure).
        let mut errors: Vec<Option<DispatchError>> = Vec::new();
        let mut stack: Stack = Vec::with_capacity(8);
        for step in &self.steps {
            let start = on_call.is_some().then(std::time::Instant::now);
            let result = self.run_step(step, &mut slots, &errors, &mut stack, opts);
            if let (Some(f), Some(start)) = (on_call.as_mut(), start) {
                if let Some(op) = self.graph.node(NodeId(step.node)).op() {
                    f(op, start.elapsed());
                }
            }
            if let Err(e) = result {
                if stop_at_error {
                    return Err(e);
                }
                if errors.is_empty() {
                    errors = vec![None; self.slots];
                }
                let i = step.node as usize;
                let outputs = self.graph.node(NodeId(step.node)).outputs().len() as u32;
                for j in 0..outputs {
                    let s = (self.slot_base[i] + j) as usize;
                    slots[s] = None;
                    errors[s] = Some(e.clone());
                }
            }
            for &s in &step.free {
                slots[s as usize] = None;
                if let Some(e) = errors.get_mut(s as usize) {
                    *e = None;
                }
            }
        }
        Ok((slots, errors))
    }

    /// The tensor in value `v`'s slot, if it holds one.
    fn slot_tensor<'s>(&self, slots: &'s [Option<Tensor>], v: Value) -> Option<&'s Tensor> {
        let s = self.slot_of[(*self.slot_base.get(v.node.index())? + v.output) as usize];
        slots[s as usize].as_ref()
    }

    fn read(
        &self,
        slots: &[Option<Tensor>],
        errors: &[Option<DispatchError>],
        v: Value,
    ) -> Result<Tensor> {
        let s = self
            .slot_base
            .get(v.node.index())
            .map(|b| self.slot_of[(b + v.output) as usize])
            .ok_or_else(|| missing_value(u32::MAX))?;
        take_slot(slots, errors, s)
    }

    fn run_step(
        &self,
        step: &Step,
        slots: &mut [Option<Tensor>],
        errors: &[Option<DispatchError>],
        stack: &mut Stack,
        opts: &RunOptions,
    ) -> Result<()> {
        let i = step.node as usize;
        let node = self.graph.node(NodeId(step.node));
        let Some(op) = node.op() else {
            return Ok(());
        };
        let args = node.args();
        stack.clear();
        // The in-place form this call may run as, when its first argument is held by its slot
        // alone (Note [Writing into a dying argument]).
        let in_place = self.in_place[i].as_ref().filter(|_| match args.first() {
            Some(Arg::Value(v)) => self.slot_tensor(slots, *v).is_some_and(|t| {
                t.use_count() == 1
                    && t.weak_count() == 0
                    && t.storage().use_count() == 1
                    && self.graph.meta(*v).matches_layout(t)
            }),
            _ => false,
        });
        // A view this copy may run as (Note [Copies that run as views]).
        let candidate = self.as_view[i].as_ref().filter(|_| opts.check_metadata);
        let needs_layout = candidate.is_some_and(|c| c.addresses_storage);
        // Whether every tensor argument has its recorded layout (Note [Copies that run as
        // views]).
        let mut as_recorded = true;
        for a in args {
            let v = match a {
                Arg::Value(v) => {
                    let t = self.read(slots, errors, *v)?;
                    as_recorded &= !needs_layout || self.graph.meta(*v).matches_layout(&t);
                    IValue::Tensor(t)
                }
                Arg::Values(vs) => IValue::TensorList(
                    vs.iter()
                        .map(|v| self.read(slots, errors, *v))
                        .collect::<Result<_>>()?,
                ),
                Arg::OptionalValues(vs) => IValue::OptionalTensorList(
                    vs.iter()
                        .map(|v| v.map(|v| self.read(slots, errors, v)).transpose())
                        .collect::<Result<_>>()?,
                ),
                Arg::Const(IValue::Device(d)) => IValue::Device(map_device(*d, opts)),
                Arg::Const(c) => c.clone(),
                Arg::Number(s) => IValue::Tensor(Tensor::wrapped_scalar(*s)),
            };
            stack.push(v);
        }
        let call = |op: &OperatorHandle, stack: &mut Stack| match opts.keys {
            Some(ks) => op.redispatch_boxed(ks, stack),
            None => op.call_boxed(stack),
        };
        // The view this copy runs as, or the in-place form of this call; the recorded call
        // when it refuses (a layout the view cannot take, a write the in-place form refuses).
        let (other, is_view) = match candidate.filter(|_| as_recorded) {
            Some(c) => (Some(&c.view), true),
            None => (in_place, false),
        };
        let mut ran_other = false;
        if let Some(other) = other {
            let args = stack.clone();
            ran_other = call(other, stack).is_ok();
            if !ran_other {
                *stack = args;
            }
        }
        if !ran_other {
            call(op, stack)?;
        }
        let ran_view = ran_other && is_view;
        let al = self.aliasing[i].as_ref();
        for (j, out) in node.outputs().iter().enumerate() {
            let (t, fresh) = match out.source {
                Source::Return(r) => (
                    stack.get(r as usize).and_then(IValue::as_tensor).cloned(),
                    al.is_none_or(|a| {
                        a.return_aliases
                            .get(r as usize)
                            .copied()
                            .flatten()
                            .is_none()
                    }),
                ),
                Source::ReturnItem(r, k) => (
                    match stack.get(r as usize) {
                        Some(IValue::TensorList(ts)) => ts.get(k as usize).cloned(),
                        _ => None,
                    },
                    true,
                ),
                Source::Argument(k) => (
                    match args.get(k as usize) {
                        Some(Arg::Value(v)) => Some(self.read(slots, errors, *v)?),
                        _ => None,
                    },
                    false,
                ),
            };
            let Some(mut t) = t else {
                return Err(TensorError::invalid(format!(
                    "graph: {} did not produce its output {j} ({:?})",
                    op.name(),
                    out.source
                ))
                .into());
            };
            // A view run for a copy keeps the view's layout.
            if opts.check_metadata && !ran_view && !out.meta.matches_layout(&t) {
                t = relayout(op, &t, &out.meta, fresh)?;
            }
            slots[(self.slot_base[i] + j as u32) as usize] = Some(t);
        }
        stack.clear();
        Ok(())
    }
}

/// The tensor in slot `s`, or the error of the failed call that was to compute it.
fn take_slot(slots: &[Option<Tensor>], errors: &[Option<DispatchError>], s: u32) -> Result<Tensor> {
    if let Some(t) = &slots[s as usize] {
        return Ok(t.clone());
    }
    match errors.get(s as usize) {
        Some(Some(e)) => Err(e.clone()),
        _ => Err(missing_value(s).into()),
    }
}

fn map_device(d: Device, opts: &RunOptions) -> Device {
    match opts.device_map {
        Some((ty, to)) if d.ty == ty => to,
        _ => d,
    }
}

fn missing_value(slot: u32) -> TensorError {
    TensorError::invalid(format!(
        "graph: value slot {slot} is read but holds no tensor (read before it is computed, or \
         after it was freed)"
    ))
}

/// A fresh result whose strides differ from the recorded ones, copied into the recorded
/// layout; any other mismatch is an error (a shape function and a kernel disagree).
fn relayout(
    op: &OperatorHandle,
    t: &Tensor,
    meta: &crate::TensorMeta,
    fresh: bool,
) -> Result<Tensor> {
    let same_shape = t.sizes() == meta.sizes.as_slice() && t.dtype() == meta.dtype;
    if !(fresh && same_shape && t.has_data()) {
        return Err(TensorError::invalid(format!(
            "graph: {} produced a {} tensor of sizes {:?}, strides {:?}, offset {} where its \
             capture recorded {} of sizes {:?}, strides {:?}, offset {}",
            op.name(),
            t.dtype(),
            t.sizes(),
            t.strides(),
            t.storage_offset(),
            meta.dtype,
            meta.sizes.as_slice(),
            meta.strides.as_slice(),
            meta.storage_offset
        ))
        .into());
    }
    let out = Tensor::empty_strided(&meta.sizes, &meta.strides, meta.dtype, t.device())?;
    let out = if meta.storage_offset == 0 {
        out
    } else {
        // Recreate the offset inside a storage large enough for it.
        let n = switchboard_tensor::TensorBuilder::new(
            switchboard_tensor::Storage::zeros_for(
                t.device(),
                out.storage().nbytes() + meta.storage_offset as usize * t.element_size(),
                meta.dtype,
            )?,
            meta.dtype,
        );
        n.sizes(&meta.sizes)
            .strides(&meta.strides)
            .storage_offset(meta.storage_offset)
            .build()?
    };
    copy_strided(t, &out)?;
    Ok(out)
}

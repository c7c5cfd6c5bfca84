//! The graph: [`Node`]s (backward functions), [`Edge`]s between them, saved tensors.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use smallvec::SmallVec;
use switchboard_dispatcher::{DispatchErrorKind, Result};
use switchboard_tensor::{ScalarType, Tensor, WeakTensor};

use crate::autograd_meta;

/// A gradient hook: sees the gradient flowing into a tensor and may replace it
/// (`tensor.register_hook`).
pub type Hook = Arc<dyn Fn(&Tensor) -> Option<Tensor> + Send + Sync>;

/// A hook run on a leaf after its gradient was accumulated into `.grad`
/// (`register_post_accumulate_grad_hook`); it receives the leaf.
pub type PostAccumulateGradHook = Arc<dyn Fn(&Tensor) + Send + Sync>;

/// Where a gradient goes: input `input_nr` of `node` (`torch::autograd::Edge`). `node` is
/// `None` for inputs that do not require grad.
#[derive(Clone, Default)]
pub struct Edge {
    /// The function the gradient flows into.
    pub node: Option<Arc<dyn Node>>,
    /// Which of its inputs (which output of the forward op).
    pub input_nr: u32,
}

impl Edge {
    /// Whether the edge leads anywhere.
    pub fn is_valid(&self) -> bool {
        self.node.is_some()
    }
}

/// Shape and dtype of one input of a node (one output of its forward op): the engine checks
/// the gradients flowing in against it (`InputMetadata`).
#[derive(Clone, Debug)]
pub struct InputMeta {
    /// Sizes of the forward output.
    pub sizes: SmallVec<[i64; 6]>,
    /// Its dtype.
    pub dtype: ScalarType,
}

impl InputMeta {
    /// The metadata of forward output `t`.
    #[inline]
    pub(crate) fn of(t: &Tensor) -> InputMeta {
        InputMeta {
            sizes: SmallVec::from_slice(t.sizes()),
            dtype: t.dtype(),
        }
    }
}

/// The edges of a node, inline for up to two (most ops).
pub(crate) type Edges = SmallVec<[Edge; 2]>;
/// The input metadata of a node, inline for one input (most ops have one output).
pub(crate) type Inputs = SmallVec<[Option<InputMeta>; 1]>;

static NEXT_SEQUENCE_NR: AtomicU64 = AtomicU64::new(0);

/// What every node has: name, edges, input metadata, hooks.
pub struct NodeMeta {
    name: Cow<'static, str>,
    next_edges: SmallVec<[Edge; 2]>,
    pub(crate) inputs: Mutex<SmallVec<[Option<InputMeta>; 1]>>,
    pub(crate) pre_hooks: Mutex<Vec<(u32, Hook)>>,
    pub(crate) retained: Mutex<Vec<(u32, WeakTensor)>>,
    sequence_nr: u64,
}

impl NodeMeta {
    /// Metadata for a node named `name` with `num_inputs` inputs (outputs of the forward op)
    /// whose gradients flow along `next_edges`.
    pub fn new(
        name: impl Into<Cow<'static, str>>,
        num_inputs: usize,
        next_edges: impl IntoIterator<Item = Edge>,
    ) -> Self {
        NodeMeta::with_inputs(
            name.into(),
            next_edges.into_iter().collect(),
            smallvec::smallvec![None; num_inputs],
        )
    }

    /// Metadata with the input metadata already known (the kernels know their outputs when
    /// they build the node, so no lock is taken to fill it in afterwards).
    #[inline(always)]
    pub(crate) fn with_inputs(name: Cow<'static, str>, next_edges: Edges, inputs: Inputs) -> Self {
        NodeMeta {
            name,
            next_edges,
            inputs: Mutex::new(inputs),
            pre_hooks: Mutex::new(Vec::new()),
            retained: Mutex::new(Vec::new()),
            sequence_nr: NEXT_SEQUENCE_NR.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The name, without copying a static one (for error messages kept for later).
    pub(crate) fn name_cow(&self) -> Cow<'static, str> {
        self.name.clone()
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The edges its gradients flow along.
    pub fn next_edges(&self) -> &[Edge] {
        &self.next_edges
    }

    /// How many gradients it takes.
    pub fn num_inputs(&self) -> usize {
        lock(&self.inputs).len()
    }

    /// Creation order: later nodes run first when both are ready.
    pub fn sequence_nr(&self) -> u64 {
        self.sequence_nr
    }

    pub(crate) fn set_input(&self, nr: usize, t: &Tensor) {
        let mut v = lock(&self.inputs);
        if nr < v.len() {
            v[nr] = Some(InputMeta::of(t));
        }
    }
}

impl Drop for NodeMeta {
    fn drop(&mut self) {
        crate::graph_drop::release_edges(&mut self.next_edges);
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A backward function of the graph (`torch::autograd::Node`).
///
/// A node that holds tensors or other nodes besides its [`NodeMeta`] should drop them first
/// (in its `Drop`), so that dropping a deep graph stays iterative (Note [Dropping deep graphs]).
pub trait Node: Send + Sync + 'static {
    /// Name, hooks and edges.
    fn meta(&self) -> &NodeMeta;

    /// Computes the gradients of the forward inputs (one per next edge, `None` when not
    /// needed) from the gradients of the forward outputs. `this` is the node itself, for
    /// saved outputs that need it as their `grad_fn` under `create_graph`.
    fn apply(
        &self,
        this: &Arc<dyn Node>,
        grads: Vec<Option<Tensor>>,
    ) -> Result<Vec<Option<Tensor>>>;

    /// Frees the saved tensors (after a backward without `retain_graph`).
    fn release_variables(&self) {}

    /// The node's name, as PyTorch's (`AddBackward0`).
    fn name(&self) -> String {
        self.meta().name().to_owned()
    }

    /// The edges its gradients flow along.
    fn next_edges(&self) -> &[Edge] {
        self.meta().next_edges()
    }

    /// Whether the engine replaces the missing gradients of the node's inputs by zeros before
    /// calling it (custom functions', as PyTorch's `materialize_grads`); generated nodes
    /// take them missing (`None`), as PyTorch's undefined tensors.
    fn materialize_grads(&self) -> bool {
        false
    }
}

impl std::fmt::Debug for dyn Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{} object>", self.name())
    }
}

/// An error of autograd, in PyTorch's words.
#[cold]
pub(crate) fn err(msg: impl Into<String>) -> switchboard_dispatcher::DispatchError {
    DispatchErrorKind::Kernel(msg.into()).into()
}

pub(crate) const FREED_MSG: &str = "Trying to backward through the graph a second time (or \
directly access saved tensors after they have already been freed). Saved intermediate values \
of the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True \
if you need to backward through the graph a second time or if you need to access saved tensors \
after calling backward.";

/// A tensor saved for backward (`SavedVariable`): unpacking checks that it was not modified
/// in place since.
pub struct SavedTensor {
    data: Tensor,
    version: u64,
    /// Saved output of its own node: `Some(output_nr)`; the node is passed at unpack time
    /// (saving it here would be a reference cycle).
    output_nr: Option<u32>,
    /// For the error message: the grad_fn that produced it and its output number.
    producer: Option<(Cow<'static, str>, u32)>,
}

impl SavedTensor {
    /// Saves an input of the op (kept with its history).
    pub fn input(t: &Tensor) -> SavedTensor {
        // The name is static for every kernel's node: no String is allocated.
        let producer = autograd_meta::grad_fn_of(t).map(|(n, nr)| (n.meta().name_cow(), nr));
        SavedTensor {
            data: t.clone(),
            version: t.version(),
            output_nr: None,
            producer,
        }
    }

    /// Saves output `nr` of the node being built (kept without its history).
    pub fn output(t: &Tensor, nr: u32, node_name: &'static str) -> SavedTensor {
        let data = autograd_meta::alias(t);
        // The alias keeps the tangent (PyTorch's SavedVariable saves the forward grad too), so
        // that a backward formula reading the output propagates it (forward over reverse).
        crate::forward_grad::share_forward_grad(t, &data);
        SavedTensor {
            data,
            version: t.version(),
            output_nr: Some(nr),
            producer: Some((Cow::Borrowed(node_name), nr)),
        }
    }

    /// The tensor, after the version check. A saved output gets `node` as its `grad_fn` when
    /// grad mode is on (double backward).
    pub fn unpack(&self, node: &Arc<dyn Node>) -> Result<Tensor> {
        let now = self.data.version();
        if now != self.version {
            let mut m = format!(
                "one of the variables needed for gradient computation has been modified by an \
                 inplace operation: [{} [{}]]",
                self.data.type_string(),
                self.data
                    .sizes()
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if let Some((name, nr)) = &self.producer {
                m += &format!(", which is output {nr} of {name},");
            }
            m += &format!(
                " is at version {now}; expected version {} instead. Hint: enable anomaly \
                 detection to find the operation that failed to compute its gradient, with \
                 torch.autograd.set_detect_anomaly(True).",
                self.version
            );
            return Err(err(m));
        }
        match self.output_nr {
            Some(nr) if crate::is_grad_enabled() => {
                let t = autograd_meta::alias(&self.data);
                autograd_meta::set_grad_fn(&t, node.clone(), nr);
                Ok(t)
            }
            _ => Ok(self.data.clone()),
        }
    }
}

/// The backward formula of a [`FnNode`]: saved state, the node itself, the output gradients
/// (`None` = zero) and which inputs need a gradient; returns one gradient per input.
pub type Formula<S> =
    fn(&S, &Arc<dyn Node>, &[Option<Tensor>], &[bool]) -> Result<Vec<Option<Tensor>>>;

/// A node whose backward is a formula over saved state `S` (what the kernels build).
pub struct FnNode<S: Send + 'static> {
    meta: NodeMeta,
    saved: Mutex<Option<S>>,
    formula: Formula<S>,
}

impl<S: Send + 'static> FnNode<S> {
    /// A node named `name`.
    pub fn new(
        name: &'static str,
        num_outputs: usize,
        next_edges: impl IntoIterator<Item = Edge>,
        saved: S,
        formula: Formula<S>,
    ) -> Self {
        FnNode::from_meta(NodeMeta::new(name, num_outputs, next_edges), saved, formula)
    }

    /// The node, built straight into its `Arc` (see Note [Recording cost]):
    /// `Arc::new(FnNode { .. })` assembles the node on the stack and then copies its few
    /// hundred bytes, several times over, on the way to the heap.
    #[inline(always)]
    pub(crate) fn new_arc(
        name: &'static str,
        next_edges: Edges,
        inputs: Inputs,
        saved: impl FnOnce(&[Edge]) -> S,
        formula: Formula<S>,
    ) -> Arc<Self> {
        let mut node = Arc::<Self>::new_uninit();
        let slot = Arc::get_mut(&mut node)
            .expect("a new Arc has no other handle")
            .as_mut_ptr();
        // SAFETY: `slot` points to the uninitialised `FnNode` of an `Arc` nothing else refers
        // to. Every field of it (and of its `NodeMeta`) is written exactly once, through raw
        // field pointers (no reference to uninitialised memory is made), before
        // `assume_init`. Tested by `tests::new_arc_builds_the_node` and every recording test.
        unsafe {
            let m = std::ptr::addr_of_mut!((*slot).meta);
            std::ptr::addr_of_mut!((*m).name).write(Cow::Borrowed(name));
            std::ptr::addr_of_mut!((*m).next_edges).write(next_edges);
            std::ptr::addr_of_mut!((*m).inputs).write(Mutex::new(inputs));
            std::ptr::addr_of_mut!((*m).pre_hooks).write(Mutex::new(Vec::new()));
            std::ptr::addr_of_mut!((*m).retained).write(Mutex::new(Vec::new()));
            std::ptr::addr_of_mut!((*m).sequence_nr)
                .write(NEXT_SEQUENCE_NR.fetch_add(1, Ordering::Relaxed));
            // The state may depend on which edges are valid (which inputs need a gradient);
            // the edges are initialised just above.
            let edges: &[Edge] = &*std::ptr::addr_of!((*m).next_edges);
            std::ptr::addr_of_mut!((*slot).saved).write(Mutex::new(Some(saved(edges))));
            std::ptr::addr_of_mut!((*slot).formula).write(formula);
            node.assume_init()
        }
    }

    /// Never called: its exhaustive patterns stop compiling when a field is added to `FnNode`
    /// or `NodeMeta`, so `new_arc` cannot silently leave a new field uninitialised.
    #[allow(dead_code)]
    fn new_arc_writes_every_field(self) {
        let FnNode {
            meta:
                NodeMeta {
                    name: _,
                    next_edges: _,
                    inputs: _,
                    pre_hooks: _,
                    retained: _,
                    sequence_nr: _,
                },
            saved: _,
            formula: _,
        } = self;
    }

    /// Changes the saved state (an in-place operator saves its output after the call, once the
    /// node exists). Does nothing once the state is freed.
    pub(crate) fn with_saved(&self, f: impl FnOnce(&mut S)) {
        if let Some(s) = lock(&self.saved).as_mut() {
            f(s);
        }
    }

    /// A node with its metadata built.
    #[inline(always)]
    pub(crate) fn from_meta(meta: NodeMeta, saved: S, formula: Formula<S>) -> Self {
        FnNode {
            meta,
            saved: Mutex::new(Some(saved)),
            formula,
        }
    }
}

impl<S: Send + 'static> Drop for FnNode<S> {
    fn drop(&mut self) {
        // The saved tensors first (Note [Dropping deep graphs]).
        drop(
            self.saved
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
    }
}

impl<S: Send + 'static> Node for FnNode<S> {
    fn meta(&self) -> &NodeMeta {
        &self.meta
    }

    fn apply(
        &self,
        this: &Arc<dyn Node>,
        grads: Vec<Option<Tensor>>,
    ) -> Result<Vec<Option<Tensor>>> {
        let mask: SmallVec<[bool; 4]> = self.meta.next_edges.iter().map(Edge::is_valid).collect();
        let saved = lock(&self.saved);
        let Some(s) = saved.as_ref() else {
            return Err(err(FREED_MSG));
        };
        let mut out = (self.formula)(s, this, &grads, &mask)?;
        out.resize(mask.len(), None);
        for (g, m) in out.iter_mut().zip(&mask) {
            if !m {
                *g = None;
            }
        }
        Ok(out)
    }

    fn release_variables(&self) {
        lock(&self.saved).take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn formula(
        s: &(u32, Vec<u8>),
        _: &Arc<dyn Node>,
        grads: &[Option<Tensor>],
        _: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        assert_eq!(s, &(7, vec![1, 2, 3]));
        Ok(vec![grads[0].clone()])
    }

    #[test]
    fn new_arc_builds_the_node() {
        let t = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let mut inputs = Inputs::new();
        inputs.push(Some(InputMeta::of(&t)));
        let mut edges = Edges::new();
        edges.push(Edge::default());
        let before = NEXT_SEQUENCE_NR.load(Ordering::Relaxed);
        let node = FnNode::new_arc(
            "TestBackward0",
            edges,
            inputs,
            |_| (7u32, vec![1u8, 2, 3]),
            formula,
        );
        assert_eq!((Arc::strong_count(&node), Arc::weak_count(&node)), (1, 0));
        let node: Arc<dyn Node> = node;
        assert_eq!(node.name(), "TestBackward0");
        assert!(node.meta().sequence_nr() >= before);
        assert_eq!(node.meta().num_inputs(), 1);
        assert_eq!(node.next_edges().len(), 1);
        assert!(lock(&node.meta().inputs)[0]
            .as_ref()
            .is_some_and(|m| m.sizes.as_slice() == [2]));
        // One edge, not valid: the formula runs, its gradient is masked out.
        let g = node.apply(&node, vec![Some(t.clone())]).unwrap();
        assert_eq!(g.len(), 1);
        assert!(g[0].is_none());
        node.release_variables();
        assert!(node.apply(&node, vec![Some(t)]).is_err());
    }
}

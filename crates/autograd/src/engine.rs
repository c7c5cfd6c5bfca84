//! The engine: runs the graph backward from some tensors (`backward`, `grad`), and
//! [`AccumulateGrad`], the node that adds gradients into leaves.

use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use switchboard_dispatcher::Result;
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{Tensor, WeakTensor};

use crate::autograd_meta;
use crate::formulas::sum_to;
use crate::grad_mode::{no_grad, GradModeGuard};
use crate::node::{err, lock, Node, NodeMeta};

/// Adds the gradient it receives into its leaf's `.grad` (`AccumulateGrad`).
///
/// Unlike PyTorch (leaf -> weak accumulator, accumulator -> strong leaf), the leaf's metadata
/// owns its accumulator and the accumulator refers to the leaf weakly: no cycle either way,
/// and the accumulator is made once per leaf instead of once per graph (it was the largest
/// cost of recording an op on leaves).
pub struct AccumulateGrad {
    meta: NodeMeta,
    variable: WeakTensor,
}

impl AccumulateGrad {
    pub(crate) fn new(variable: &Tensor) -> Self {
        let meta = NodeMeta::new("AccumulateGrad", 1, Vec::new());
        meta.set_input(0, variable);
        AccumulateGrad {
            meta,
            variable: variable.downgrade(),
        }
    }

    /// The leaf, if it is still alive.
    pub fn variable(&self) -> Option<Tensor> {
        self.variable.upgrade()
    }
}

impl Node for AccumulateGrad {
    fn meta(&self) -> &NodeMeta {
        &self.meta
    }

    fn apply(&self, _: &Arc<dyn Node>, grads: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
        let (Some(mut g), Some(var)) = (grads.into_iter().next().flatten(), self.variable()) else {
            return Ok(Vec::new());
        };
        let hooks = autograd_meta::read(&var, |m| m.hooks.clone()).unwrap_or_default();
        for h in hooks {
            if let Some(r) = h(&g) {
                g = r;
            }
        }
        accumulate_into(&var, g)?;
        let post_hooks =
            autograd_meta::read(&var, |m| m.post_accumulate_grad_hooks.clone()).unwrap_or_default();
        for h in post_hooks {
            h(&var);
        }
        Ok(Vec::new())
    }
}

// Note [Gradient layout contract]
// As PyTorch's AccumulateGrad: a leaf's `.grad` has the leaf's strides when the leaf is
// non-overlapping and dense, and is contiguous otherwise. A gradient that already has that
// layout (and no other handle) is kept as it is; any other is copied into it. The optimizer's
// elementwise updates (`p.add_(buf)`, `buf.mul_(m).add_(g)`) then see operands of one layout
// and run over dense rows; a gradient stored transposed would make each of them a strided
// loop.

/// Whether `g` has the layout `var`'s gradient must have (Note [Gradient layout contract]):
/// `var`'s strides (on the dims of size above 1) for a non-overlapping and dense `var`, else
/// contiguous.
fn obeys_layout_contract(g: &Tensor, var: &Tensor) -> bool {
    if g.sizes() != var.sizes() {
        return false;
    }
    if var.is_non_overlapping_and_dense() {
        g.sizes()
            .iter()
            .zip(g.strides().iter().zip(var.strides()))
            .all(|(&n, (gs, vs))| n <= 1 || gs == vs)
    } else {
        g.is_contiguous()
    }
}

/// A copy of `g` in the layout `var`'s gradient must have (Note [Gradient layout contract]).
fn clone_obey_contract(g: &Tensor, var: &Tensor) -> Result<Tensor> {
    if var.is_non_overlapping_and_dense() && g.sizes() == var.sizes() {
        // PyTorch's calls: `new_empty_strided` + `copy_` (a trace records them).
        let out = g.new_empty_strided(var.sizes(), var.strides())?;
        ops::copy_(&out, g)
    } else {
        ops::clone_with(
            g,
            ops::CloneOptions::default()
                .memory_format(switchboard_tensor::MemoryFormat::Contiguous),
        )
    }
}

/// `tensor.grad += g` the way AccumulateGrad does it.
pub(crate) fn accumulate_into(var: &Tensor, g: Tensor) -> Result<()> {
    let create_graph = crate::is_grad_enabled();
    let old = autograd_meta::read(var, |m| m.grad.clone()).flatten();
    let new = match old {
        None if create_graph => g,
        None => {
            let _ng = no_grad();
            if g.use_count() == 1 && obeys_layout_contract(&g, var) {
                g
            } else {
                clone_obey_contract(&g, var)?
            }
        }
        Some(old) if create_graph => ops::add(&old, &g)?,
        Some(old) => {
            let _ng = no_grad();
            ops::add_(&old, &g)?;
            old
        }
    };
    autograd_meta::with(var, |m| m.grad = Some(new));
    Ok(())
}

/// `[2, 3]` -> `2, 3`.
fn sizes_str(s: &[i64]) -> String {
    s.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The synthetic root: hands the initial gradients to the roots' edges.
struct GraphRoot {
    meta: NodeMeta,
    grads: Vec<Option<Tensor>>,
}

impl Drop for GraphRoot {
    fn drop(&mut self) {
        // The gradients first (Note [Dropping deep graphs]).
        self.grads.clear();
    }
}

impl Node for GraphRoot {
    fn meta(&self) -> &NodeMeta {
        &self.meta
    }
    fn apply(&self, _: &Arc<dyn Node>, _: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
        Ok(self.grads.clone())
    }
}

fn key(n: &Arc<dyn Node>) -> usize {
    Arc::as_ptr(n) as *const () as usize
}

struct Ready(u64, Arc<dyn Node>);
impl PartialEq for Ready {
    fn eq(&self, o: &Self) -> bool {
        self.0 == o.0
    }
}
impl Eq for Ready {}
impl PartialOrd for Ready {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ready {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.cmp(&o.0)
    }
}

/// Runs the graph from `roots` with their gradients (`None`: implicit ones for a scalar).
/// With `inputs`, returns the gradients flowing into them and leaves `.grad` alone (the
/// `grad` function); without, accumulates into the leaves (`backward`).
pub(crate) fn run_backward(
    roots: &[Tensor],
    grad_outputs: &[Option<Tensor>],
    keep_graph: bool,
    create_graph: bool,
    inputs: Option<&[Tensor]>,
) -> Result<Vec<Option<Tensor>>> {
    let mut root_edges = Vec::with_capacity(roots.len());
    let mut root_grads = Vec::with_capacity(roots.len());
    for (i, t) in roots.iter().enumerate() {
        let e = autograd_meta::gradient_edge(t);
        if !e.is_valid() {
            return Err(err(format!(
                "element {i} of tensors does not require grad and does not have a grad_fn"
            )));
        }
        let g = match grad_outputs.get(i).cloned().flatten() {
            Some(g) => {
                if g.sizes() != t.sizes() {
                    return Err(err(format!(
                        "Mismatch in shape: grad_output[{i}] has a shape of torch.Size([{}]) \
                         and output[{i}] has a shape of torch.Size([{}]).",
                        sizes_str(g.sizes()),
                        sizes_str(t.sizes())
                    )));
                }
                g
            }
            None => {
                if t.numel() != 1 {
                    return Err(err(
                        "grad can be implicitly created only for scalar outputs",
                    ));
                }
                let _ng = no_grad();
                ops::ones_like(t)?
            }
        };
        root_edges.push(e);
        root_grads.push(Some(g));
    }
    let root: Arc<dyn Node> = Arc::new(GraphRoot {
        meta: NodeMeta::new("GraphRoot", 0, root_edges),
        grads: root_grads,
    });

    // Discover the graph in DFS post-order (children before parents).
    let mut order: Vec<Arc<dyn Node>> = Vec::new();
    let mut seen: HashMap<usize, ()> = HashMap::new();
    let mut stack: Vec<(Arc<dyn Node>, usize)> = vec![(root.clone(), 0)];
    seen.insert(key(&root), ());
    while let Some((n, i)) = stack.pop() {
        let edges = n.next_edges();
        if i < edges.len() {
            stack.push((n.clone(), i + 1));
            if let Some(c) = &edges[i].node {
                if seen.insert(key(c), ()).is_none() {
                    stack.push((c.clone(), 0));
                }
            }
        } else {
            order.push(n);
        }
    }

    // Captures (grad()) and which nodes must run.
    let mut captures: Vec<(usize, u32)> = Vec::new();
    if let Some(inputs) = inputs {
        for t in inputs {
            let e = autograd_meta::gradient_edge(t);
            let Some(n) = &e.node else {
                return Err(err(
                    "One of the differentiated Tensors does not require grad",
                ));
            };
            captures.push((key(n), e.input_nr));
        }
    }
    let mut needed: HashMap<usize, bool> = HashMap::new();
    for n in &order {
        let k = key(n);
        let v = if inputs.is_some() {
            captures.iter().any(|c| c.0 == k)
                || n.next_edges()
                    .iter()
                    .any(|e| e.node.as_ref().is_some_and(|c| needed[&key(c)]))
        } else {
            true
        };
        needed.insert(k, v);
    }
    let mut deps: HashMap<usize, usize> = HashMap::new();
    for n in &order {
        if !needed[&key(n)] {
            continue;
        }
        for e in n.next_edges() {
            if let Some(c) = &e.node {
                if needed[&key(c)] {
                    *deps.entry(key(c)).or_default() += 1;
                }
            }
        }
    }

    let _mode = GradModeGuard::new(create_graph);
    let mut captured: Vec<Option<Tensor>> = vec![None; captures.len()];
    let mut buffers: HashMap<usize, Vec<Option<Tensor>>> = HashMap::new();
    let mut ready = BinaryHeap::new();
    ready.push(Ready(u64::MAX, root));
    while let Some(Ready(_, node)) = ready.pop() {
        let k = key(&node);
        let mut grads = buffers
            .remove(&k)
            .unwrap_or_else(|| vec![None; node.meta().num_inputs()]);
        run_pre_hooks(&node, &mut grads)?;
        for (ci, c) in captures.iter().enumerate() {
            if c.0 == k {
                captured[ci] = grads.get(c.1 as usize).cloned().flatten();
            }
        }
        let is_acc = node.meta().name() == "AccumulateGrad";
        if is_acc && inputs.is_some() {
            continue;
        }
        // Nothing flows in (all gradients undefined): nothing flows out.
        let outs = if grads.iter().all(Option::is_none) && !is_root(&node) {
            vec![None; node.next_edges().len()]
        } else {
            if node.materialize_grads() {
                materialize(&node, &mut grads)?;
            }
            node.apply(&node, grads)?
        };
        if !keep_graph {
            node.release_variables();
        }
        for (i, e) in node.next_edges().iter().enumerate() {
            let Some(c) = &e.node else { continue };
            let ck = key(c);
            if !needed[&ck] {
                continue;
            }
            if let Some(g) = outs.get(i).cloned().flatten() {
                let g = validate(&node, i, c, e.input_nr, g)?;
                let buf = buffers
                    .entry(ck)
                    .or_insert_with(|| vec![None; c.meta().num_inputs()]);
                let slot = &mut buf[e.input_nr as usize];
                *slot = Some(match slot.take() {
                    None => g,
                    Some(old) => ops::add(&old, &g)?,
                });
            }
            let d = deps.get_mut(&ck).expect("counted");
            *d -= 1;
            if *d == 0 {
                ready.push(Ready(c.meta().sequence_nr(), c.clone()));
            }
        }
    }
    Ok(captured)
}

fn is_root(n: &Arc<dyn Node>) -> bool {
    n.meta().name() == "GraphRoot"
}

fn run_pre_hooks(node: &Arc<dyn Node>, grads: &mut [Option<Tensor>]) -> Result<()> {
    let hooks = lock(&node.meta().pre_hooks).clone();
    for (nr, h) in hooks {
        if let Some(Some(g)) = grads.get(nr as usize) {
            if let Some(r) = h(g) {
                grads[nr as usize] = Some(r);
            }
        }
    }
    let retained = lock(&node.meta().retained).clone();
    for (nr, w) in retained {
        let (Some(t), Some(Some(g))) = (w.upgrade(), grads.get(nr as usize)) else {
            continue;
        };
        let g = if crate::is_grad_enabled() {
            g.clone()
        } else {
            autograd_meta::alias(g)
        };
        let old = autograd_meta::read(&t, |m| m.grad.clone()).flatten();
        let new = match old {
            None => {
                let _ng = no_grad();
                ops::clone(&g)?
            }
            Some(o) => ops::add(&o, &g)?,
        };
        autograd_meta::with(&t, |m| m.grad = Some(new));
    }
    Ok(())
}

/// Replaces missing gradients of a node that got some by zeros of the right shape.
fn materialize(node: &Arc<dyn Node>, grads: &mut [Option<Tensor>]) -> Result<()> {
    if grads.iter().all(Option::is_some) {
        return Ok(());
    }
    let metas = lock(&node.meta().inputs).clone();
    for (g, m) in grads.iter_mut().zip(metas) {
        if let (None, Some(m)) = (&g, m) {
            let _ng = no_grad();
            *g = Some(ops::zeros_with(
                &m.sizes,
                ops::ZerosOptions::default().dtype(m.dtype),
            )?);
        }
    }
    Ok(())
}

/// Checks a gradient against the metadata of the input it flows into (`validate_outputs`):
/// sums broadcast dimensions away, casts to the input's dtype.
fn validate(
    from: &Arc<dyn Node>,
    i: usize,
    to: &Arc<dyn Node>,
    nr: u32,
    g: Tensor,
) -> Result<Tensor> {
    let m = lock(&to.meta().inputs).get(nr as usize).cloned().flatten();
    let Some(m) = m else { return Ok(g) };
    let mut g = g;
    if g.sizes() != m.sizes.as_slice() {
        if !switchboard_tensor::infer_size(&m.sizes, g.sizes())
            .is_ok_and(|s| s.as_slice() == g.sizes())
        {
            return Err(err(format!(
                "Function {} returned an invalid gradient at index {i} - got [{}] but expected \
                 shape compatible with [{}]",
                from.name(),
                sizes_str(g.sizes()),
                sizes_str(&m.sizes)
            )));
        }
        g = sum_to(&g, &m.sizes)?;
    }
    if g.dtype() != m.dtype {
        g = ops::_to_copy_with(&g, ops::ToCopyOptions::default().dtype(m.dtype))?;
    }
    Ok(g)
}

/// `torch.autograd.backward` for one tensor.
pub(crate) fn backward(
    t: &Tensor,
    gradient: Option<&Tensor>,
    retain_graph: bool,
    create_graph: bool,
) -> Result<()> {
    run_backward(
        std::slice::from_ref(t),
        &[gradient.cloned()],
        retain_graph || create_graph,
        create_graph,
        None,
    )?;
    Ok(())
}

/// `torch.autograd.grad`: the gradients of `outputs` with respect to `inputs` (`None` for an
/// input the outputs do not depend on, as `allow_unused=True`). `.grad` is left alone.
/// `retain_graph` is also implied by `create_graph`, as PyTorch's default.
pub fn grad(
    outputs: &[Tensor],
    inputs: &[Tensor],
    grad_outputs: &[Option<Tensor>],
    retain_graph: bool,
    create_graph: bool,
) -> Result<Vec<Option<Tensor>>> {
    run_backward(
        outputs,
        grad_outputs,
        retain_graph || create_graph,
        create_graph,
        Some(inputs),
    )
}

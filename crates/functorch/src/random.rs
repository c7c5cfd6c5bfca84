//! Random operators under `vmap` (functorch's `FuncTorchVmapMode` kernels): the randomness
//! mode of the innermost vmap decides whether they are an error, draw per sample or draw once
//! for the whole batch.

use std::cell::RefCell;

use switchboard_dispatcher::{
    ExcludeDispatchKeyGuard, IValue, OperatorHandle, Result, SchemaKind, Stack,
};
use switchboard_keys::{DispatchKey, DispatchKeySet};
use switchboard_tensor::{Generator, GeneratorState, Tensor};

use crate::batched_tensor::front_value;
use crate::batched_tensor::{front_value_or_expand, is_batched_at, make_batched};
use crate::fallback::{arg_tensors, composite_key, vmap_error};
use crate::layers::{self, Randomness};

// Note [Randomness under vmap]
// `FuncTorchVmapMode` is included while a vmap runs, so that a random operator reaches this
// kernel even when it has no tensor argument (`randn(3)`). In "error" mode it is PyTorch's
// error. In "different" mode a factory draws `[batch] + size` numbers and returns them batched;
// an operator on tensors that are not batched gets its first tensor expanded to the batch, so
// that the per-sample loop draws for each sample. In "same" mode a factory draws once (the
// result is not batched and broadcasts); an operator on batched tensors runs the per-sample
// loop with the generator's state restored before each sample, so every sample draws the same
// numbers (this path serves composites such as `dropout`, whose decomposition draws into
// batched tensors; a primitive operator draws once, see `same_on_batched`; another thread
// drawing from that generator meanwhile changes what the samples
// after it draw: the default generator is shared, as PyTorch's is). The key is excluded while the operator runs: its per-sample calls are not random
// calls of this vmap again.

thread_local! {
    static SAME_STATE: RefCell<Option<SavedGenerator>> = const { RefCell::new(None) };
}

/// A generator's state, to restore before each sample in "same" mode.
#[derive(Clone)]
pub(crate) struct SavedGenerator {
    generator: Generator,
    state: GeneratorState,
}

impl SavedGenerator {
    pub(crate) fn restore(&self) {
        self.generator.set_state(self.state.clone());
    }
}

/// The generator state the slow path restores before each sample, in "same" mode.
pub(crate) fn same_randomness_state() -> Option<SavedGenerator> {
    SAME_STATE.with(|s| s.borrow().clone())
}

struct SameStateGuard(Option<SavedGenerator>);

impl Drop for SameStateGuard {
    fn drop(&mut self) {
        let previous = self.0.take();
        SAME_STATE.with(|s| *s.borrow_mut() = previous);
    }
}

fn random_error() -> switchboard_dispatcher::DispatchError {
    vmap_error(
        "vmap: called random operation while in randomness error mode. Please either use the \
         'same' or 'different' randomness flags on vmap or perform the randomness operation out \
         of vmap"
            .into(),
    )
}

/// The boxed kernel of `FuncTorchVmapMode`.
pub(crate) fn vmap_mode_kernel(
    op: &OperatorHandle,
    keys: DispatchKeySet,
    stack: &mut Stack,
) -> Result<()> {
    let below = keys & DispatchKeySet::full_after(DispatchKey::FuncTorchVmapMode);
    let Some(record) = op.schema() else {
        return op.redispatch_boxed(below, stack);
    };
    let semantics = &record.semantics;
    let Some((level, batch_size, randomness)) = layers::innermost_vmap() else {
        return op.redispatch_boxed(below, stack);
    };
    if !semantics.is_random {
        return op.redispatch_boxed(below, stack);
    }
    let _mode_off = ExcludeDispatchKeyGuard::new(DispatchKey::FuncTorchVmapMode);
    let schema = &record.schema;
    let n = schema.arguments().len();
    let first = stack.len() - n;
    let any_batched = arg_tensors(&stack[first..]).any(|t| is_batched_at(t, level));
    let has_tensors = arg_tensors(&stack[first..]).next().is_some();
    match randomness {
        Randomness::Error => Err(random_error()),
        Randomness::Same => {
            if !any_batched {
                return op.redispatch_boxed(below, stack);
            }
            if composite_key(op, keys).is_none() {
                return same_on_batched(op, semantics.kind, stack, first, level);
            }
            let generator = stack[first..]
                .iter()
                .find_map(|a| match a {
                    IValue::Generator(g) => Some(g.clone()),
                    _ => None,
                })
                .unwrap_or_else(Generator::default_cpu);
            let saved = SavedGenerator {
                state: generator.state(),
                generator,
            };
            let previous = SAME_STATE.with(|s| s.borrow_mut().replace(saved));
            let _restore = SameStateGuard(previous);
            op.redispatch_boxed(below, stack)
        }
        Randomness::Different if any_batched => op.redispatch_boxed(below, stack),
        Randomness::Different if !has_tensors => {
            let size_at = schema.arguments().iter().position(|a| a.name() == "size");
            let Some(i) = size_at else {
                return Err(random_error());
            };
            if let IValue::IntList(size) = &mut stack[first + i] {
                size.insert(0, batch_size);
            }
            op.redispatch_boxed(below, stack)?;
            let out = stack.pop().and_then(|v| match v {
                IValue::Tensor(t) => Some(t),
                _ => None,
            });
            let out = out.ok_or_else(random_error)?;
            stack.push(IValue::Tensor(make_batched(out, 0, level)?));
            Ok(())
        }
        Randomness::Different => {
            if semantics.kind != SchemaKind::Functional {
                return Err(vmap_error(
                    "vmap: Cannot ask for different inplace randomness on an unbatched tensor. \
                     This will appear like same randomness. If this is necessary for your \
                     usage, please file an issue with functorch."
                        .into(),
                ));
            }
            // Batch the first tensor so that the per-sample loop draws for each sample.
            if let Some(IValue::Tensor(t)) =
                stack[first..].iter_mut().find(|a| a.as_tensor().is_some())
            {
                let expanded: Tensor = front_value_or_expand(t, level, batch_size)?;
                *t = make_batched(expanded, 0, level)?;
            }
            op.call_boxed(stack)
        }
    }
}

/// "same" randomness for a primitive random operator with batched tensors, as functorch's
/// random batching rules: an in-place operator on a batched `self` (its only batched argument)
/// draws once into a tensor shaped as one sample and copies it into every sample; a `*_like`
/// factory draws once for one sample and returns it unbatched (it broadcasts); an operator
/// whose batched tensors give values (`bernoulli(p)`, `normal(mean, std)`, `poisson`) is
/// PyTorch's error.
fn same_on_batched(
    op: &OperatorHandle,
    kind: SchemaKind,
    stack: &mut Stack,
    first: usize,
    level: u32,
) -> Result<()> {
    let only_self_batched = stack[first..]
        .iter()
        .enumerate()
        .all(|(i, a)| (i == 0) == a.tensors().any(|t| is_batched_at(t, level)));
    let like = op.name().base_name().ends_with("_like");
    let self_ = match &stack[first] {
        IValue::Tensor(t) if only_self_batched && (kind == SchemaKind::Inplace || like) => {
            t.clone()
        }
        _ => {
            return Err(vmap_error(
                "Vmap does not currently support same randomness with a batched tensor input. \
                 Please file an issue with functorch"
                    .into(),
            ))
        }
    };
    let physical = front_value(&self_, level)?.expect("self is batched at this level");
    let sample = switchboard_ops::select(&physical, 0, 0)?;
    if kind == SchemaKind::Inplace {
        let once = switchboard_ops::empty_like(&sample)?;
        stack[first] = IValue::Tensor(once.clone());
        op.call_boxed(stack)?;
        stack.truncate(first);
        switchboard_ops::copy_(&self_, &once)?;
        stack.push(IValue::Tensor(self_));
        return Ok(());
    }
    stack[first] = IValue::Tensor(sample);
    op.call_boxed(stack)
}

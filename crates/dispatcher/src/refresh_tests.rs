//! Checks of Note [Refreshing the slots a key can change]: a kernel change at a key changes no
//! slot outside `SlotSet::touched_by(key)`, and an operator's table after any sequence of
//! registrations and deregistrations equals a full recomputation.

use std::sync::Arc;

use switchboard_keys::{DispatchKey as K, NUM_RUNTIME_ENTRIES};
use switchboard_schema::OperatorName;

use crate::dispatcher::Dispatcher;
use crate::handle::RegistrationHandle;
use crate::kernel::KernelFunction;
use crate::operator::{AnnotatedKernel, KernelStacks};
use crate::table::{BaseTable, Globals, Resolver, SlotSet, RUNTIME_KEYS};

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Keys whose kernels interact: backends of each kind, their autograd keys, AutogradOther's
/// backends, and every alias.
const KEYS: [K; 22] = [
    K::CPU,
    K::CUDA,
    K::Meta,
    K::SparseCPU,
    K::QuantizedCPU,
    K::NestedTensorCPU,
    K::FPGA,
    K::PrivateUse1,
    K::AutogradCPU,
    K::AutogradCUDA,
    K::AutogradOther,
    K::AutogradNestedTensor,
    K::BackendSelect,
    K::Python,
    K::FuncTorchBatched,
    K::Autograd,
    K::CompositeImplicitAutograd,
    K::CompositeExplicitAutograd,
    K::CompositeExplicitAutogradNonFunctional,
    K::CompositeImplicitAutogradNestedTensor,
    K::FuncTorchBatchedDecomposition,
    K::ADInplaceOrView,
];

fn kernel(id: u64, fallthrough: bool) -> Arc<AnnotatedKernel> {
    Arc::new(AnnotatedKernel {
        kernel: if fallthrough {
            KernelFunction::fallthrough()
        } else {
            KernelFunction::from_boxed(|_, _, _| Ok(()))
        },
        debug: format!("k{id}").into(),
        id,
    })
}

fn resolve_all(kernels: &KernelStacks, globals: &Globals<'_>) -> Vec<*const AnnotatedKernel> {
    let r = Resolver::new(kernels, globals);
    (0..NUM_RUNTIME_ENTRIES)
        .map(|slot| Arc::as_ptr(r.resolve_slot(slot, RUNTIME_KEYS[slot]).0))
        .collect()
}

#[test]
fn touched_by_covers_every_slot_a_kernel_change_can_change() {
    let missing = kernel(0, false);
    let ambiguous = kernel(0, false);
    let mut fallbacks = vec![None; NUM_RUNTIME_ENTRIES];
    for (i, k) in [K::CPU, K::AutogradCPU, K::Python, K::AutogradOther]
        .into_iter()
        .enumerate()
    {
        let slot = switchboard_keys::DispatchKeySet::from_key(k).dispatch_table_index();
        fallbacks[slot] = Some(kernel(1000 + i as u64, i % 2 == 0));
    }
    let base = BaseTable::compute(&fallbacks, &missing);
    let globals = Globals {
        fallbacks: &fallbacks,
        base: &base,
        missing: &missing,
        ambiguous: &ambiguous,
    };
    // Every key that has a slot or is an alias.
    let changed_keys: Vec<K> = K::ALL
        .into_iter()
        .filter(|k| k.is_alias() || (RUNTIME_KEYS.contains(k) && *k != K::Undefined))
        .collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut id = 1;
    for _ in 0..300 {
        let mut stacks = KernelStacks::default();
        for _ in 0..rng.below(5) {
            stacks.push(KEYS[rng.below(KEYS.len())], kernel(id, false));
            id += 1;
        }
        let before = resolve_all(&stacks, &globals);
        for &k in &changed_keys {
            stacks.push(k, kernel(id, false));
            let after = resolve_all(&stacks, &globals);
            stacks.remove(k, id);
            id += 1;
            let touched = SlotSet::touched_by(k);
            for slot in 0..NUM_RUNTIME_ENTRIES {
                assert!(
                    before[slot] == after[slot] || touched.contains(slot),
                    "a kernel at {k} changed slot {slot} ({}) outside touched_by({k})",
                    RUNTIME_KEYS[slot]
                );
            }
        }
    }
}

#[test]
fn touched_sets_are_indexed_by_key_number() {
    for (i, k) in K::ALL.into_iter().enumerate() {
        assert_eq!(k as usize, i);
    }
    let slots = |k: K| SlotSet::touched_by(k).iter().collect::<Vec<_>>();
    let cpu = switchboard_keys::DispatchKeySet::from_key(K::CPU).dispatch_table_index();
    let autograd_cpu =
        switchboard_keys::DispatchKeySet::from_key(K::AutogradCPU).dispatch_table_index();
    assert_eq!(slots(K::CPU), vec![cpu, autograd_cpu]);
    assert_eq!(slots(K::AutogradCPU), vec![autograd_cpu]);
}

/// The table and fallthrough mask an entry would get from a full recomputation.
fn check_entry(d: &Dispatcher, name: &OperatorName) {
    let reg = d.registry();
    let Some(entry) = reg.ops.get(name).cloned() else {
        return;
    };
    let state = entry.state();
    let globals = d.globals(&reg);
    let expected = resolve_all(&state.kernels, &globals);
    for (slot, want) in expected.iter().enumerate() {
        assert_eq!(
            entry.table_slot(slot),
            *want,
            "slot {slot} ({})",
            RUNTIME_KEYS[slot]
        );
    }
    let mut masks = globals.base.masks;
    let r = Resolver::new(&state.kernels, &globals);
    for slot in SlotSet::affected_by_all(&state.kernels).iter() {
        let (k, _) = r.resolve_slot(slot, RUNTIME_KEYS[slot]);
        masks.set(slot, k.kernel.is_fallthrough());
    }
    assert_eq!(entry.non_fallthrough_raw(), masks.mask());
}

#[test]
fn tables_equal_a_full_recomputation_after_any_sequence() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let name = OperatorName::new("t::op", "");
    for _ in 0..60 {
        let d = Dispatcher::new();
        let mut live: Vec<RegistrationHandle> = Vec::new();
        for _ in 0..24 {
            match rng.below(8) {
                0..=4 => {
                    let key = KEYS[rng.below(KEYS.len())];
                    let k = if rng.below(4) == 0 {
                        KernelFunction::fallthrough()
                    } else {
                        KernelFunction::from_boxed(|_, _, _| Ok(()))
                    };
                    live.push(d.register_impl(name.clone(), Some(key), k, "t").unwrap());
                }
                5 => {
                    let key = [K::CPU, K::AutogradCPU, K::Python, K::AutogradOther, K::CUDA]
                        [rng.below(5)];
                    if let Ok(h) = d.register_fallback(key, KernelFunction::fallthrough(), "f") {
                        live.push(h);
                    }
                }
                _ => {
                    if !live.is_empty() {
                        drop(live.swap_remove(rng.below(live.len())));
                    }
                }
            }
            check_entry(&d, &name);
        }
    }
}

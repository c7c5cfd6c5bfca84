//! The computed dispatch table: which kernel each runtime key runs, and why.

use std::sync::Arc;

use switchboard_keys::{DispatchKey, DispatchKeySet, AUTOGRADOTHER_BACKENDS};

use crate::operator::{AnnotatedKernel, KernelStacks};

// Note [Computing the dispatch table]
// Every runtime key of an operator gets one kernel, chosen by PyTorch's precedence
// (OperatorEntry::computeDispatchTableEntryWithDebug):
//   1. a kernel registered directly to the key;
//   2. an alias kernel covering the key, in the order CompositeExplicitAutogradNonFunctional >
//      CompositeExplicitAutograd > CompositeImplicitAutogradNestedTensor >
//      CompositeImplicitAutograd > Autograd > FuncTorchBatchedDecomposition, where a
//      CompositeImplicitAutograd kernel is skipped for a key whose backend has a kernel (or when a
//      CompositeExplicitAutograd kernel exists), and is ambiguous for AutogradOther when a backend
//      mapped to AutogradOther has a kernel;
//   3. the dispatcher's backend fallback for the key;
//   4. nothing ("missing").
// `Undefined` (slot 0) takes the CEANF, CEA and CIA kernels only.
// Unlike PyTorch, which patches its table incrementally and can keep stale slots, we recompute
// every slot after every change, so the table depends only on what is registered, never on the
// order it was registered in.

/// Why a slot holds its kernel: PyTorch's `kind` strings of `_dispatch_dump_table`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provenance {
    /// Registered to the key itself.
    Kernel,
    /// From CompositeExplicitAutograd or CompositeExplicitAutogradNonFunctional.
    DefaultBackend,
    /// From CompositeImplicitAutogradNestedTensor.
    Nested,
    /// From CompositeImplicitAutograd.
    Math,
    /// From the Autograd alias.
    Autograd,
    /// From FuncTorchBatchedDecomposition.
    Batched,
    /// The AutogradOther ambiguity marker.
    AmbiguousAutogradOther,
    /// The dispatcher's backend fallback.
    BackendFallback,
    /// No kernel.
    Missing,
}

impl Provenance {
    /// The text PyTorch prints in brackets.
    pub fn as_str(self) -> &'static str {
        match self {
            Provenance::Kernel => "kernel",
            Provenance::DefaultBackend => "default backend kernel",
            Provenance::Nested => "nested kernel",
            Provenance::Math => "math kernel",
            Provenance::Autograd => "autograd kernel",
            Provenance::Batched => "batched kernel",
            Provenance::AmbiguousAutogradOther => "ambiguous autogradother",
            Provenance::BackendFallback => "backend fallback",
            Provenance::Missing => "missing",
        }
    }
}

/// What the table computation reads besides the operator's own kernels.
pub(crate) struct Globals<'a> {
    /// Backend fallbacks, by dispatch-table slot.
    pub fallbacks: &'a [Option<Arc<AnnotatedKernel>>],
    pub missing: &'a Arc<AnnotatedKernel>,
    pub ambiguous: &'a Arc<AnnotatedKernel>,
}

/// The kernel of runtime key `k` and why (see Note [Computing the dispatch table]).
pub(crate) fn compute_entry(
    kernels: &KernelStacks,
    globals: &Globals<'_>,
    k: DispatchKey,
) -> (Arc<AnnotatedKernel>, Provenance) {
    use DispatchKey as K;
    let get = |key: DispatchKey| kernels.front(key).cloned();
    let undefined = k == K::Undefined;

    if let Some(kernel) = get(k) {
        return (kernel, Provenance::Kernel);
    }
    for alias in [
        K::CompositeExplicitAutogradNonFunctional,
        K::CompositeExplicitAutograd,
    ] {
        if undefined || k.is_included_in_alias(alias) {
            if let Some(kernel) = get(alias) {
                return (kernel, Provenance::DefaultBackend);
            }
        }
    }
    let has_backend_kernel = kernels.has_kernel_for_any(k.backend_key_set_from_autograd())
        || kernels.has(K::CompositeExplicitAutograd);
    if !undefined && k.is_included_in_alias(K::CompositeImplicitAutogradNestedTensor) {
        if let Some(kernel) = get(K::CompositeImplicitAutogradNestedTensor) {
            return (kernel, Provenance::Nested);
        }
    }
    if undefined || k.is_included_in_alias(K::CompositeImplicitAutograd) {
        if let Some(kernel) = get(K::CompositeImplicitAutograd) {
            if k == K::AutogradOther && kernels.has_kernel_for_any(AUTOGRADOTHER_BACKENDS) {
                return (
                    globals.ambiguous.clone(),
                    Provenance::AmbiguousAutogradOther,
                );
            } else if !has_backend_kernel {
                return (kernel, Provenance::Math);
            }
        }
    }
    if k.is_included_in_alias(K::Autograd) {
        if let Some(kernel) = get(K::Autograd) {
            return (kernel, Provenance::Autograd);
        }
    }
    if k.is_included_in_alias(K::FuncTorchBatchedDecomposition) {
        if let Some(kernel) = get(K::FuncTorchBatchedDecomposition) {
            return (kernel, Provenance::Batched);
        }
    }
    if !undefined {
        let slot = DispatchKeySet::from_key(k).dispatch_table_index();
        if let Some(fallback) = &globals.fallbacks[slot] {
            return (fallback.clone(), Provenance::BackendFallback);
        }
    }
    (globals.missing.clone(), Provenance::Missing)
}

/// The runtime keys in table-dump order: `Undefined`, then the iteration order of FULL. The
/// position of a key in this list is its dispatch-table slot.
pub fn runtime_keys() -> impl Iterator<Item = DispatchKey> {
    std::iter::once(DispatchKey::Undefined).chain(DispatchKeySet::FULL.iter())
}

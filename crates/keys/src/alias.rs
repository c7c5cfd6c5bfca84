//! Alias keys and the key sets they stand for; autograd and autocast keys of a backend.

use crate::backend::{BackendComponent, FULL_BACKEND_MASK};
use crate::key::DispatchKey as K;
use crate::keyset::DispatchKeySet;

const fn ks(keys: &[K]) -> DispatchKeySet {
    DispatchKeySet::from_keys(keys)
}

const ALL_BACKENDS: DispatchKeySet = DispatchKeySet::from_raw(FULL_BACKEND_MASK);

/// The functionalities of autograd: `AutogradFunctionality`, `AutogradOther`,
/// `AutogradNestedTensor` (no backend bits; see `runtime_key_set` for the runtime keys).
pub const AUTOGRAD_DISPATCH_KEYSET: DispatchKeySet = ks(&[
    K::AutogradFunctionality,
    K::AutogradOther,
    K::AutogradNestedTensor,
]);

/// The autocast keys of every backend.
pub const AUTOCAST_DISPATCH_KEYSET: DispatchKeySet = ks(&[
    K::AutocastCPU,
    K::AutocastMPS,
    K::AutocastCUDA,
    K::AutocastXPU,
    K::AutocastIPU,
    K::AutocastHPU,
    K::AutocastXLA,
    K::AutocastPrivateUse1,
    K::AutocastMTIA,
    K::AutocastMAIA,
]);

/// The thread-local included set every thread starts with: `BackendSelect`, `ADInplaceOrView`.
pub const DEFAULT_INCLUDED_SET: DispatchKeySet = ks(&[K::BackendSelect, K::ADInplaceOrView]);

/// The thread-local excluded set every thread starts with: every Autocast key (autocast is off
/// until enabled).
pub const DEFAULT_EXCLUDED_SET: DispatchKeySet = AUTOCAST_DISPATCH_KEYSET;

/// Backends whose autograd key is `AutogradOther`: the backend functionalities that have no
/// per-backend autograd key, on every backend.
pub const AUTOGRADOTHER_BACKENDS: DispatchKeySet = ks(&[
    K::FPGA,
    K::Vulkan,
    K::Metal,
    K::CustomRNGKeyId,
    K::MkldnnCPU,
    K::Sparse,
    K::SparseCsr,
    K::Quantized,
])
.union(ALL_BACKENDS);

/// Every key that maps to a backend; what `CompositeExplicitAutograd` covers.
pub const BACKEND_DISPATCH_KEYSET: DispatchKeySet =
    AUTOGRADOTHER_BACKENDS.union(DispatchKeySet::from_key(K::Dense));

/// What `CompositeExplicitAutogradNonFunctional` covers: the backend keys except Sparse and the
/// functional backends XLA and Lazy.
pub const NON_FUNCTIONAL_BACKEND_DISPATCH_KEYSET: DispatchKeySet = BACKEND_DISPATCH_KEYSET
    .remove(K::Sparse)
    .remove_backend(BackendComponent::XLABit)
    .remove_backend(BackendComponent::LazyBit);

/// What `CompositeImplicitAutograd` covers: backends, autograd and NestedTensor. (Newer PyTorch
/// adds Functionalize; 2.15 does not, as its recorded tables show.)
pub const MATH_DISPATCH_KEYSET: DispatchKeySet = BACKEND_DISPATCH_KEYSET
    .union(AUTOGRAD_DISPATCH_KEYSET)
    .union(DispatchKeySet::from_key(K::NestedTensor));

/// What `CompositeImplicitAutogradNestedTensor` covers.
pub const NESTED_DISPATCH_KEYSET: DispatchKeySet =
    ks(&[K::AutogradNestedTensor, K::NestedTensor]).union(ALL_BACKENDS);

/// What `FuncTorchBatchedDecomposition` covers.
pub const FUNCTORCH_BATCHED_KEYSET: DispatchKeySet = ks(&[K::FuncTorchBatched]);

/// Every key after (below) autograd: what an autograd kernel redispatches to.
pub const AFTER_AUTOGRAD_KEYSET: DispatchKeySet = DispatchKeySet::full_after(K::AutogradOther);

/// Every key after (below) ADInplaceOrView.
pub const AFTER_AD_INPLACE_OR_VIEW_KEYSET: DispatchKeySet =
    DispatchKeySet::full_after(K::ADInplaceOrView);

/// Every key after Functionalize, without ADInplaceOrView.
pub const AFTER_FUNC_KEYSET: DispatchKeySet =
    DispatchKeySet::full_after(K::Functionalize).remove(K::ADInplaceOrView);

/// The backend functionalities (Dense, Quantized, Sparse, SparseCsr) on every backend.
pub const BACKEND_FUNCTIONALITY_KEYS: DispatchKeySet =
    ks(&[K::Dense, K::Quantized, K::Sparse, K::SparseCsr]).union(ALL_BACKENDS);

impl K {
    /// The runtime keys an alias key stands for (`getRuntimeDispatchKeySet`); for any other key,
    /// its own set. `Undefined` has none (PyTorch asserts instead).
    pub const fn runtime_key_set(self) -> DispatchKeySet {
        match self {
            K::Undefined => DispatchKeySet::EMPTY,
            K::Autograd => AUTOGRAD_DISPATCH_KEYSET.union(ALL_BACKENDS),
            K::CompositeImplicitAutograd => MATH_DISPATCH_KEYSET,
            K::CompositeImplicitAutogradNestedTensor => NESTED_DISPATCH_KEYSET,
            K::CompositeExplicitAutograd => BACKEND_DISPATCH_KEYSET,
            K::CompositeExplicitAutogradNonFunctional => NON_FUNCTIONAL_BACKEND_DISPATCH_KEYSET,
            _ => DispatchKeySet::from_key(self),
        }
    }

    /// True when the runtime key `self` is covered by `alias` (`isIncludedInAlias`); for a
    /// non-alias `alias`, true when the two keys are equal. `Undefined` is in no alias.
    pub const fn is_included_in_alias(self, alias: K) -> bool {
        if matches!(self, K::Undefined) || matches!(alias, K::Undefined) {
            return false;
        }
        let not_nested = !matches!(self, K::NestedTensor);
        match alias {
            K::Autograd => AUTOGRAD_DISPATCH_KEYSET.has(self.to_functionality_key()),
            K::CompositeImplicitAutograd => MATH_DISPATCH_KEYSET.has(self),
            K::CompositeImplicitAutogradNestedTensor => NESTED_DISPATCH_KEYSET.has(self),
            K::CompositeExplicitAutograd => not_nested && BACKEND_DISPATCH_KEYSET.has(self),
            K::CompositeExplicitAutogradNonFunctional => {
                not_nested && NON_FUNCTIONAL_BACKEND_DISPATCH_KEYSET.has(self)
            }
            K::FuncTorchBatchedDecomposition => FUNCTORCH_BATCHED_KEYSET.has(self),
            _ => self as u8 == alias as u8,
        }
    }

    /// The backend keys an autograd key is for (`getBackendKeySetFromAutograd`): `AutogradCPU`
    /// -> {CPU}, `AutogradOther` -> the AutogradOther backends; empty for other keys (including
    /// the autograd keys PyTorch leaves out: HIP, VE, MTIA).
    pub const fn backend_key_set_from_autograd(self) -> DispatchKeySet {
        let backend = match self {
            K::AutogradCPU => K::CPU,
            K::AutogradCUDA => K::CUDA,
            K::AutogradXLA => K::XLA,
            K::AutogradLazy => K::Lazy,
            K::AutogradMeta => K::Meta,
            K::AutogradMPS => K::MPS,
            K::AutogradHPU => K::HPU,
            K::AutogradIPU => K::IPU,
            K::AutogradXPU => K::XPU,
            K::AutogradMAIA => K::MAIA,
            K::AutogradPrivateUse1 => K::PrivateUse1,
            K::AutogradPrivateUse2 => K::PrivateUse2,
            K::AutogradPrivateUse3 => K::PrivateUse3,
            K::AutogradNestedTensor => {
                return DispatchKeySet::from_key(K::NestedTensor).union(ALL_BACKENDS)
            }
            K::AutogradOther => return AUTOGRADOTHER_BACKENDS,
            _ => return DispatchKeySet::EMPTY,
        };
        DispatchKeySet::from_key(backend)
    }
}

impl BackendComponent {
    /// `ADInplaceOrView` plus the backend's autograd key (`getAutogradRelatedKeySetFromBackend`);
    /// `AutogradOther` for backends without one (HIP, VE, InvalidBit).
    pub const fn autograd_related_key_set(self) -> DispatchKeySet {
        use BackendComponent as B;
        let autograd = match self {
            B::InvalidBit | B::HIPBit | B::VEBit => K::AutogradOther,
            _ => K::to_runtime_per_backend_functionality_key(K::AutogradFunctionality, self),
        };
        ks(&[K::ADInplaceOrView, autograd])
    }

    /// The backend's autocast key, if it has one (`getAutocastRelatedKeySetFromBackend`).
    pub const fn autocast_related_key_set(self) -> DispatchKeySet {
        use BackendComponent as B;
        let key = match self {
            B::CPUBit => K::AutocastCPU,
            B::MTIABit => K::AutocastMTIA,
            B::MAIABit => K::AutocastMAIA,
            B::XPUBit => K::AutocastXPU,
            B::IPUBit => K::AutocastIPU,
            B::HPUBit => K::AutocastHPU,
            B::CUDABit => K::AutocastCUDA,
            B::XLABit => K::AutocastXLA,
            B::PrivateUse1Bit => K::AutocastPrivateUse1,
            B::MPSBit => K::AutocastMPS,
            _ => return DispatchKeySet::EMPTY,
        };
        DispatchKeySet::from_key(key)
    }

    /// The autograd key of a backend (`getAutogradKeyFromBackend`).
    pub const fn autograd_key(self) -> K {
        self.autograd_related_key_set().highest_priority_type_id()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alias_membership() {
        assert!(K::AutogradCPU.is_included_in_alias(K::Autograd));
        assert!(K::CPU.is_included_in_alias(K::CompositeExplicitAutograd));
        assert!(!K::XLA.is_included_in_alias(K::CompositeExplicitAutogradNonFunctional));
        assert!(!K::NestedTensorCPU.is_included_in_alias(K::CompositeExplicitAutograd));
        assert!(K::NestedTensorCPU.is_included_in_alias(K::CompositeImplicitAutograd));
        assert!(!K::Undefined.is_included_in_alias(K::CompositeImplicitAutograd));
        assert!(K::Vulkan.is_included_in_alias(K::Vulkan));
    }

    #[test]
    fn autograd_of_backends() {
        assert_eq!(BackendComponent::CPUBit.autograd_key(), K::AutogradCPU);
        assert_eq!(BackendComponent::HIPBit.autograd_key(), K::AutogradOther);
        assert_eq!(BackendComponent::MetaBit.autograd_key(), K::AutogradMeta);
        assert_eq!(
            K::AutogradMTIA.backend_key_set_from_autograd(),
            DispatchKeySet::EMPTY
        );
    }
}

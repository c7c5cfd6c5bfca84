//! Introspection: which kernels and fallbacks are registered where (PyTorch's
//! `torch._C._dispatch_has_kernel_for_dispatch_key` and friends).
//!
//! Note [Registered versus computed kernels]
//! Two questions have different answers. *Registered*: is a kernel registered at exactly this key
//! (`has_kernel_for_dispatch_key`, `registrations_for_dispatch_key`)? Alias keys are keys like any
//! other here: an operator with a `CompositeImplicitAutograd` kernel has a kernel "for"
//! `CompositeImplicitAutograd`, not for `CPU`, and a kernel registered at `Autograd` is not one
//! for `AutogradCPU`. *Computed*: does a call that dispatches to this runtime key find a kernel
//! (`has_computed_kernel_for_dispatch_key`)? That counts alias kernels, backend fallbacks and
//! fallthroughs, as the operator's dispatch table does, and is meaningless for alias keys.

use switchboard_keys::{DispatchKey, DispatchKeySet};
use switchboard_schema::OperatorName;

use crate::call::OperatorHandle;
use crate::dispatcher::Dispatcher;
use crate::error::{DispatchError, DispatchErrorKind, Result};
use crate::operator::OperatorEntry;
use crate::table::{Provenance, Resolver, RUNTIME_KEYS};

impl OperatorHandle {
    /// Whether a kernel is registered at exactly `key` (PyTorch's `hasKernelForDispatchKey`;
    /// alias keys count as themselves, Note [Registered versus computed kernels]).
    ///
    /// ```
    /// use switchboard_dispatcher::{Dispatcher, KernelFunction, Library, LibraryKind, Result};
    /// use switchboard_keys::DispatchKey;
    /// use switchboard_tensor::Tensor;
    ///
    /// fn id(x: &Tensor) -> Result<Tensor> { Ok(x.clone()) }
    /// let d = Dispatcher::new();
    /// let mut lib = Library::new(&d, LibraryKind::Def, "demo", None)?;
    /// lib.def("id(Tensor x) -> Tensor")?;
    /// lib.impl_("id", Some(DispatchKey::CompositeImplicitAutograd), KernelFunction::from_fn(id))?;
    /// let op = d.find_schema_or_throw("demo::id")?;
    /// assert!(op.has_kernel_for_dispatch_key(DispatchKey::CompositeImplicitAutograd));
    /// assert!(!op.has_kernel_for_dispatch_key(DispatchKey::CPU));
    /// assert!(op.has_computed_kernel_for_dispatch_key(DispatchKey::CPU)?); // through the alias
    /// # Ok::<(), switchboard_dispatcher::DispatchError>(())
    /// ```
    pub fn has_kernel_for_dispatch_key(&self, key: DispatchKey) -> bool {
        self.0.state().kernels.front(key).is_some()
    }

    /// Whether a kernel is registered at a runtime key of `keys` (PyTorch's
    /// `hasKernelForAnyDispatchKey`). Kernels at alias keys never count: a key set holds no alias
    /// keys.
    pub fn has_kernel_for_any_dispatch_key(&self, keys: DispatchKeySet) -> bool {
        self.0.state().kernels.has_kernel_for_any(keys)
    }

    /// Whether a call dispatching to runtime key `key` finds a kernel: registered there, through
    /// an alias key, a backend fallback or a fallthrough (PyTorch's
    /// `hasComputedKernelForDispatchKey`). Fails for alias keys, which have no slot.
    pub fn has_computed_kernel_for_dispatch_key(&self, key: DispatchKey) -> Result<bool> {
        let dispatcher = self.dispatcher().ok_or_else(|| {
            // The dispatcher is gone: every slot of the operator is missing.
            DispatchError::from(DispatchErrorKind::NoSuchOperator(self.name().to_string()))
        })?;
        dispatcher.computed_kernel_exists(&self.0, key)
    }

    /// Whether the kernel registered at `key` (the newest, the one that counts) is a
    /// fallthrough (PyTorch's `isKernelFallthroughKernel`); an error when none is registered.
    pub fn kernel_for_dispatch_key_is_fallthrough(&self, key: DispatchKey) -> Result<bool> {
        match self.0.state().kernels.front(key) {
            Some(kernel) => Ok(kernel.kernel.is_fallthrough()),
            None => Err(DispatchError::from(DispatchErrorKind::InvalidKey(format!(
                "no kernel for {key} on {}",
                self.name()
            )))),
        }
    }

    fn dispatcher(&self) -> Option<Dispatcher> {
        self.0
            .dispatcher
            .upgrade()
            .map(|inner| Dispatcher { inner })
    }
}

impl Dispatcher {
    /// The operator `name` (`ns::op.overload`), defined or only implemented, or PyTorch's
    /// "operator ... does not exist".
    fn existing_op(&self, name: &str) -> Result<OperatorHandle> {
        let parsed = OperatorName::parse(name)
            .map_err(|e| DispatchError::from(DispatchErrorKind::Schema(e.to_string())))?;
        self.find_op(&parsed)
            .ok_or_else(|| DispatchErrorKind::NoSuchOperator(name.to_owned()).into())
    }

    /// Whether operator `name` has a kernel registered at exactly `key`
    /// (`torch._C._dispatch_has_kernel_for_dispatch_key`; see
    /// [`OperatorHandle::has_kernel_for_dispatch_key`]). An error when there is no such operator.
    pub fn has_kernel_for_dispatch_key(&self, name: &str, key: DispatchKey) -> Result<bool> {
        Ok(self.existing_op(name)?.has_kernel_for_dispatch_key(key))
    }

    /// Whether operator `name` has a kernel registered at a runtime key of `keys`
    /// (`torch._C._dispatch_has_kernel_for_any_dispatch_key`).
    pub fn has_kernel_for_any_dispatch_key(
        &self,
        name: &str,
        keys: DispatchKeySet,
    ) -> Result<bool> {
        Ok(self
            .existing_op(name)?
            .has_kernel_for_any_dispatch_key(keys))
    }

    /// Whether a call of operator `name` dispatching to runtime key `key` finds a kernel
    /// (`torch._C._dispatch_has_computed_kernel_for_dispatch_key`).
    pub fn has_computed_kernel_for_dispatch_key(
        &self,
        name: &str,
        key: DispatchKey,
    ) -> Result<bool> {
        let op = self.existing_op(name)?;
        self.computed_kernel_exists(&op.0, key)
    }

    /// Whether the kernel registered at `key` for operator `name` is a fallthrough
    /// (`torch._C._dispatch_kernel_for_dispatch_key_is_fallthrough`).
    pub fn kernel_for_dispatch_key_is_fallthrough(
        &self,
        name: &str,
        key: DispatchKey,
    ) -> Result<bool> {
        self.existing_op(name)?
            .kernel_for_dispatch_key_is_fallthrough(key)
    }

    /// Whether a backend fallback is registered at `key`'s dispatch-table slot
    /// (`torch._C._dispatch_has_backend_fallback`). As in PyTorch, the slot is that of the set
    /// holding `key`: an alias key has none (false), a per-backend functionality key (`Dense`)
    /// shares the slot of its first backend (`CPU`).
    pub fn has_backend_fallback_for_dispatch_key(&self, key: DispatchKey) -> bool {
        let slot = DispatchKeySet::from_key(key).dispatch_table_index();
        self.registry().has_fallback(slot)
    }

    /// The operators with a kernel registered at exactly `key` (a key, or `Some(key)`), or every
    /// operator for `None`
    /// (`torch._C._dispatch_get_registrations_for_dispatch_key`), in registration order. Alias
    /// keys match kernels registered at that alias key (Note [Registered versus computed
    /// kernels]); operators that have kernels but no schema are included.
    ///
    /// ```
    /// use switchboard_dispatcher::{DispatchKey, Dispatcher, KernelFunction, Library, LibraryKind};
    /// # fn id(x: &switchboard_tensor::Tensor) -> switchboard_dispatcher::Result<switchboard_tensor::Tensor> { Ok(x.clone()) }
    /// let d = Dispatcher::new();
    /// let mut lib = Library::new(&d, LibraryKind::Def, "demo", None)?;
    /// lib.def("a(Tensor x) -> Tensor")?;
    /// lib.def("b(Tensor x) -> Tensor")?;
    /// lib.impl_("a", Some(DispatchKey::CPU), KernelFunction::from_fn(id))?;
    /// lib.impl_("b", Some(DispatchKey::CompositeImplicitAutograd), KernelFunction::from_fn(id))?;
    /// let names = |v: Vec<_>| v.iter().map(ToString::to_string).collect::<Vec<_>>();
    /// assert_eq!(names(d.registrations_for_dispatch_key(DispatchKey::CPU)), ["demo::a"]);
    /// let composite = d.registrations_for_dispatch_key(DispatchKey::CompositeImplicitAutograd);
    /// assert_eq!(names(composite), ["demo::b"]);
    /// assert_eq!(names(d.registrations_for_dispatch_key(None)), ["demo::a", "demo::b"]);
    /// # Ok::<(), switchboard_dispatcher::DispatchError>(())
    /// ```
    pub fn registrations_for_dispatch_key(
        &self,
        key: impl Into<Option<DispatchKey>>,
    ) -> Vec<OperatorName> {
        let key = key.into();
        let reg = self.registry();
        Self::entries_in_creation_order(&reg)
            .into_iter()
            .filter(|e| key.is_none_or(|k| e.state().kernels.front(k).is_some()))
            .map(|e| e.name().clone())
            .collect()
    }

    /// Whether the slot of runtime key `key` of `entry` has a kernel (not missing).
    pub(crate) fn computed_kernel_exists(
        &self,
        entry: &OperatorEntry,
        key: DispatchKey,
    ) -> Result<bool> {
        if key.is_alias() {
            return Err(DispatchError::from(DispatchErrorKind::InvalidKey(
                "Alias keys do not have runtime kernel registrations.".into(),
            )));
        }
        // The slot a set holding `key` dispatches to, and the runtime key that owns it (a
        // per-backend functionality key such as `Dense` shares its first backend's slot).
        let slot = DispatchKeySet::from_key(key).dispatch_table_index();
        let reg = self.registry();
        let state = entry.state();
        let globals = self.globals(&reg);
        let (_, why) =
            Resolver::new(&state.kernels, &globals).resolve_slot(slot, RUNTIME_KEYS[slot]);
        Ok(why != Provenance::Missing)
    }
}

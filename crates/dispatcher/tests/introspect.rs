//! The introspection queries (PyTorch's `torch._C._dispatch_has_kernel_for_dispatch_key`,
//! `_dispatch_has_kernel_for_any_dispatch_key`, `_dispatch_has_computed_kernel_for_dispatch_key`,
//! `_dispatch_kernel_for_dispatch_key_is_fallthrough`, `_dispatch_has_backend_fallback`,
//! `_dispatch_get_registrations_for_dispatch_key`). `tests/conformance.rs` checks them against
//! PyTorch's dumps of every recorded case; these are the edges.

use switchboard_dispatcher::*;
use switchboard_keys::DispatchKey as K;
use switchboard_tensor::Tensor;

fn id(x: &Tensor) -> Result<Tensor> {
    Ok(x.clone())
}

fn kernel() -> KernelFunction {
    KernelFunction::from_fn(id)
}

fn names(list: Vec<OperatorName>) -> Vec<String> {
    list.into_iter().map(|n| n.to_string()).collect()
}

#[test]
fn registered_kernels_count_at_their_own_key_only() -> Result<()> {
    let d = Dispatcher::with_builtin_fallbacks();
    let mut lib = Library::new(&d, LibraryKind::Def, "intro", None)?;
    lib.def("cpu_only(Tensor x) -> Tensor")?;
    lib.impl_("cpu_only", Some(K::CPU), kernel())?;
    lib.def("composite(Tensor x) -> Tensor")?;
    // A catch-all kernel is a CompositeImplicitAutograd kernel, as in PyTorch.
    lib.impl_("composite", None, kernel())?;
    lib.def("autograd(Tensor x) -> Tensor")?;
    lib.impl_("autograd", Some(K::Autograd), kernel())?;
    lib.impl_("autograd", Some(K::Meta), kernel())?;

    assert!(d.has_kernel_for_dispatch_key("intro::cpu_only", K::CPU)?);
    assert!(!d.has_kernel_for_dispatch_key("intro::cpu_only", K::CUDA)?);
    assert!(!d.has_kernel_for_dispatch_key("intro::cpu_only", K::Dense)?);
    assert!(d.has_kernel_for_dispatch_key("intro::composite", K::CompositeImplicitAutograd)?);
    assert!(!d.has_kernel_for_dispatch_key("intro::composite", K::CPU)?);
    // The alias key is a key like any other; its runtime keys have no registration.
    assert!(d.has_kernel_for_dispatch_key("intro::autograd", K::Autograd)?);
    assert!(!d.has_kernel_for_dispatch_key("intro::autograd", K::AutogradCPU)?);

    // Any: runtime keys only, never the alias ones.
    let cpu_and_meta = DispatchKeySet::from_keys(&[K::CPU, K::Meta]);
    assert!(d.has_kernel_for_any_dispatch_key("intro::cpu_only", cpu_and_meta)?);
    assert!(d.has_kernel_for_any_dispatch_key("intro::autograd", cpu_and_meta)?);
    assert!(!d.has_kernel_for_any_dispatch_key("intro::composite", DispatchKeySet::FULL)?);
    assert!(!d.has_kernel_for_any_dispatch_key(
        "intro::autograd",
        DispatchKeySet::from_key(K::AutogradCPU)
    )?);

    // Computed: through the alias kernels.
    assert!(d.has_computed_kernel_for_dispatch_key("intro::composite", K::CPU)?);
    assert!(d.has_computed_kernel_for_dispatch_key("intro::composite", K::AutogradCPU)?);
    assert!(d.has_computed_kernel_for_dispatch_key("intro::autograd", K::AutogradCUDA)?);
    assert!(!d.has_computed_kernel_for_dispatch_key("intro::autograd", K::CPU)?);
    assert!(!d.has_computed_kernel_for_dispatch_key("intro::cpu_only", K::CUDA)?);
    // BackendSelect's builtin fallthrough fallback is a computed kernel of every operator.
    assert!(d.has_computed_kernel_for_dispatch_key("intro::cpu_only", K::BackendSelect)?);
    // `Dense` stands for the slot it shares with CPU.
    assert!(d.has_computed_kernel_for_dispatch_key("intro::cpu_only", K::Dense)?);
    let err = d
        .has_computed_kernel_for_dispatch_key("intro::cpu_only", K::CompositeImplicitAutograd)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Alias keys do not have runtime kernel registrations."
    );
    Ok(())
}

#[test]
fn registrations_list_operators_by_key() -> Result<()> {
    let d = Dispatcher::new();
    let mut def = Library::new(&d, LibraryKind::Def, "reg", None)?;
    def.def("a(Tensor x) -> Tensor")?;
    def.def("b.out(Tensor x) -> Tensor")?;
    def.impl_("a", Some(K::CPU), kernel())?;
    def.impl_("b.out", Some(K::CPU), kernel())?;
    def.impl_("b.out", Some(K::CompositeExplicitAutograd), kernel())?;
    // An implementation without a definition is an operator too.
    let mut other = Library::new(&d, LibraryKind::Impl, "reg", Some(K::Meta))?;
    other.impl_("c", None, kernel())?;

    assert_eq!(
        names(d.registrations_for_dispatch_key(Some(K::CPU))),
        ["reg::a", "reg::b.out"]
    );
    assert_eq!(
        names(d.registrations_for_dispatch_key(Some(K::CompositeExplicitAutograd))),
        ["reg::b.out"]
    );
    assert_eq!(
        names(d.registrations_for_dispatch_key(Some(K::Meta))),
        ["reg::c"]
    );
    assert!(d.registrations_for_dispatch_key(Some(K::CUDA)).is_empty());
    assert!(d
        .registrations_for_dispatch_key(Some(K::Undefined))
        .is_empty());
    assert_eq!(
        names(d.registrations_for_dispatch_key(None)),
        ["reg::a", "reg::b.out", "reg::c"]
    );
    // Deregistering removes them.
    drop(other);
    assert!(d.registrations_for_dispatch_key(Some(K::Meta)).is_empty());
    assert_eq!(d.registrations_for_dispatch_key(None).len(), 2);
    drop(def);
    assert!(d.registrations_for_dispatch_key(None).is_empty());
    Ok(())
}

#[test]
fn unknown_operators_are_errors() {
    let d = Dispatcher::new();
    let err = d
        .has_kernel_for_dispatch_key("nope::op", K::CPU)
        .unwrap_err();
    assert_eq!(err.to_string(), "operator nope::op does not exist");
    assert!(d
        .has_kernel_for_any_dispatch_key("nope::op.overload", DispatchKeySet::FULL)
        .is_err());
    assert!(d
        .has_computed_kernel_for_dispatch_key("nope::op", K::CPU)
        .is_err());
    assert!(d
        .kernel_for_dispatch_key_is_fallthrough("nope::op", K::CPU)
        .is_err());
    // A malformed name is an error too, not a panic.
    assert!(d.has_kernel_for_dispatch_key("a::b::c", K::CPU).is_err());
}

#[test]
fn fallthrough_kernels_are_reported() -> Result<()> {
    let d = Dispatcher::new();
    let mut lib = Library::new(&d, LibraryKind::Def, "ft", None)?;
    lib.def("op(Tensor x) -> Tensor")?;
    lib.impl_("op", Some(K::CPU), kernel())?;
    lib.fallthrough("op", K::AutogradCPU)?;
    assert!(d.kernel_for_dispatch_key_is_fallthrough("ft::op", K::AutogradCPU)?);
    assert!(!d.kernel_for_dispatch_key_is_fallthrough("ft::op", K::CPU)?);
    let err = d
        .kernel_for_dispatch_key_is_fallthrough("ft::op", K::Meta)
        .unwrap_err();
    assert_eq!(err.to_string(), "no kernel for Meta on ft::op");
    // A fallthrough is a computed kernel.
    assert!(d.has_computed_kernel_for_dispatch_key("ft::op", K::AutogradCPU)?);
    Ok(())
}

#[test]
fn backend_fallbacks_by_key() -> Result<()> {
    let d = Dispatcher::new();
    assert!(!d.has_backend_fallback_for_dispatch_key(K::CPU));
    let mut lib = Library::new(&d, LibraryKind::Impl, "_", None)?;
    lib.fallback(Some(K::CPU), KernelFunction::fallthrough())?;
    lib.fallback(Some(K::Autograd), KernelFunction::fallthrough())?;
    assert!(d.has_backend_fallback_for_dispatch_key(K::CPU));
    assert!(!d.has_backend_fallback_for_dispatch_key(K::CUDA));
    // A per-backend functionality key stands for its first backend's slot, as in PyTorch.
    assert!(d.has_backend_fallback_for_dispatch_key(K::Dense));
    assert!(!d.has_backend_fallback_for_dispatch_key(K::Quantized));
    // An alias key has no slot of its own: false, though its runtime keys have fallbacks.
    assert!(d.has_backend_fallback_for_dispatch_key(K::AutogradCPU));
    assert!(!d.has_backend_fallback_for_dispatch_key(K::Autograd));
    assert!(!d.has_backend_fallback_for_dispatch_key(K::Undefined));
    drop(lib);
    assert!(!d.has_backend_fallback_for_dispatch_key(K::CPU));
    assert!(!d.has_backend_fallback_for_dispatch_key(K::AutogradCPU));

    let builtin = Dispatcher::with_builtin_fallbacks();
    for key in BUILTIN_FALLTHROUGH_KEYS {
        assert!(builtin.has_backend_fallback_for_dispatch_key(key), "{key}");
    }
    Ok(())
}

#[test]
fn operator_handles_answer_the_same_questions() -> Result<()> {
    let d = Dispatcher::new();
    let mut lib = Library::new(&d, LibraryKind::Def, "h", None)?;
    lib.def("op(Tensor x) -> Tensor")?;
    lib.impl_("op", Some(K::Meta), kernel())?;
    let op = d.find_schema_or_throw("h::op")?;
    assert!(op.has_kernel_for_dispatch_key(K::Meta));
    assert!(op.has_kernel_for_any_dispatch_key(DispatchKeySet::from_key(K::Meta)));
    assert!(op.has_computed_kernel_for_dispatch_key(K::Meta)?);
    assert!(!op.has_computed_kernel_for_dispatch_key(K::CPU)?);
    assert!(!op.kernel_for_dispatch_key_is_fallthrough(K::Meta)?);
    drop(lib);
    // The handle outlives the registration: nothing is registered any more.
    assert!(!op.has_kernel_for_dispatch_key(K::Meta));
    assert!(!op.has_computed_kernel_for_dispatch_key(K::Meta)?);
    Ok(())
}

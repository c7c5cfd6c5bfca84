//! Calling operators: `OperatorHandle` (boxed calls) and `TypedOperatorHandle` (typed calls).

use crate::semantics::OperatorSemantics;
use std::marker::PhantomData;
use std::sync::Arc;

use switchboard_keys::{DispatchKey, DispatchKeySet};
use switchboard_schema::Tag;

use crate::dispatcher::Dispatcher;
use crate::error::{DispatchError, DispatchErrorKind, Result};
use crate::ivalue::Stack;
use crate::kernel::{signature_id, ArgList, Invoke, KernelKind, SlowPath};
use crate::observe;
use crate::operator::{AnnotatedKernel, OperatorEntry, SchemaRecord};
use crate::ret::KernelReturn;
use crate::schema_check::{format_inferred, schema_difference};
use crate::stack_cache::{BoxingStack, CachedStack};
use crate::tls::apply_tls;

/// A handle to a registered operator: cheap to clone, valid as long as it lives (even after the
/// operator is deregistered, when calls report the missing kernel).
#[derive(Clone)]
pub struct OperatorHandle(pub(crate) Arc<OperatorEntry>);

impl std::fmt::Debug for OperatorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OperatorHandle({})", self.0.name())
    }
}

/// Handles are equal when they refer to the same operator ([`OperatorHandle::ptr_eq`]).
impl PartialEq for OperatorHandle {
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other)
    }
}

impl Eq for OperatorHandle {}

/// Hashes the operator's identity ([`OperatorHandle::id`]), consistently with `==`.
impl std::hash::Hash for OperatorHandle {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_usize(self.id());
    }
}

/// The key set of a call: the arguments' keys with this thread's included keys added and its
/// excluded keys removed, minus the operator's fallthrough keys.
#[inline(always)]
fn call_key_set(entry: &OperatorEntry, args: DispatchKeySet) -> DispatchKeySet {
    entry.mask_fallthrough(apply_tls(args))
}

impl OperatorHandle {
    /// The operator's name.
    pub fn name(&self) -> &switchboard_schema::OperatorName {
        self.0.name()
    }

    /// The operator's schema, if it is defined.
    pub fn schema(&self) -> Option<Arc<SchemaRecord>> {
        self.0.schema()
    }

    /// What the operator's schema and tags say about it, computed when it was defined (Note
    /// [One home for an operator's facts]); `None` when it has no schema.
    pub fn semantics(&self) -> Option<Arc<OperatorSemantics>> {
        self.0.schema().map(|r| r.semantics.clone())
    }

    /// True when the operator was defined with `tag` (`OperatorHandle::hasTag`). An operator
    /// without a schema has no tags. Not for the call path: it reads the schema record under
    /// its lock (Note [Operator tags] in switchboard-schema).
    ///
    /// ```
    /// use switchboard_dispatcher::{Dispatcher, Library, LibraryKind, Tag};
    ///
    /// let d = Dispatcher::new();
    /// let mut lib = Library::new(&d, LibraryKind::Def, "myops", None)?;
    /// lib.def_with_tags("where_nonzero(Tensor x) -> Tensor", &[Tag::DynamicOutputShape])?;
    /// let op = d.find_schema_or_throw("myops::where_nonzero")?;
    /// assert!(op.has_tag(Tag::DynamicOutputShape));
    /// drop(lib);
    /// assert!(!op.has_tag(Tag::DynamicOutputShape));
    /// # Ok::<(), switchboard_dispatcher::DispatchError>(())
    /// ```
    pub fn has_tag(&self, tag: Tag) -> bool {
        self.0.schema().is_some_and(|r| r.tags.contains(&tag))
    }

    /// The tags the operator was defined with, in the order given (`OperatorHandle::getTags`);
    /// empty when it has no schema.
    ///
    /// ```
    /// use switchboard_dispatcher::{Dispatcher, Library, LibraryKind, Tag};
    ///
    /// let d = Dispatcher::new();
    /// let mut lib = Library::new(&d, LibraryKind::Def, "myops", None)?;
    /// lib.def_with_tags("scale(Tensor x) -> Tensor", &[Tag::Core, Tag::Pointwise])?;
    /// lib.def("plain(Tensor x) -> Tensor")?;
    /// assert_eq!(d.find_schema_or_throw("myops::scale")?.tags(), [Tag::Core, Tag::Pointwise]);
    /// assert!(d.find_schema_or_throw("myops::plain")?.tags().is_empty());
    /// # Ok::<(), switchboard_dispatcher::DispatchError>(())
    /// ```
    pub fn tags(&self) -> Vec<Tag> {
        self.0.schema().map(|r| r.tags.to_vec()).unwrap_or_default()
    }

    /// True when both handles refer to the same operator.
    pub fn ptr_eq(&self, other: &OperatorHandle) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The operator's identity: equal for handles of the same registered operator, distinct
    /// from every other operator alive (its entry's address). For caches keyed by operator
    /// (graph caches, per-operator statistics) that must not hash names on every call.
    #[inline]
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// A typed handle with calling convention `A -> R` (tuples of argument families, see
    /// Note [Argument families]). Checked once against the schema here; calls through it do no
    /// checks.
    pub fn typed<A: ArgList, R: KernelReturn>(&self) -> Result<TypedOperatorHandle<A, R>> {
        if let Some(record) = self.schema() {
            let (args, rets) = (A::schema_types(), R::schema_types());
            if let Some(reason) = schema_difference(&record.schema, args, rets) {
                return Err(DispatchError::from(DispatchErrorKind::WrongSignature(
                    format!(
                        "Tried to access or call an operator with a wrong signature.\n  operator: \
                     {}\n    {}\n  accessed/called as: {}\n  reason: {reason}",
                        record.schema,
                        record.debug,
                        format_inferred(args, rets)
                    ),
                )));
            }
        }
        Ok(TypedOperatorHandle {
            op: self.clone(),
            sig: signature_id::<A, R>(),
            _sig: PhantomData,
        })
    }

    /// Calls the operator with the arguments on `stack`, leaving its returns there. Push the
    /// arguments with [`push`](crate::push) rather than one `Vec::push` each (Note [Pushing
    /// onto a stack]).
    ///
    /// ```
    /// use switchboard_dispatcher::{push, Dispatcher, IValue, KernelFunction, Library, LibraryKind};
    /// use switchboard_keys::DispatchKey;
    /// use switchboard_tensor::{ScalarType, Tensor};
    ///
    /// let d = Dispatcher::with_builtin_fallbacks();
    /// let mut lib = Library::new(&d, LibraryKind::Def, "demo", None)?;
    /// lib.def("scale(Tensor x, int k) -> int")?;
    /// let kernel = |x: &Tensor, k: i64| Ok(x.numel() as i64 * k);
    /// lib.impl_("scale", Some(DispatchKey::CPU), KernelFunction::from_fn(kernel))?;
    /// let op = d.find_schema_or_throw("demo::scale")?;
    ///
    /// let x = Tensor::zeros(&[2, 3], ScalarType::Float).unwrap();
    /// let _no_grad = switchboard_dispatcher::AutoDispatchBelowAutograd::new();
    /// let mut stack = Vec::new();
    /// push(&mut stack, (&x, 10i64));
    /// op.call_boxed(&mut stack)?;
    /// assert!(matches!(stack.as_slice(), [IValue::Int(60)]));
    /// # Ok::<(), switchboard_dispatcher::DispatchError>(())
    /// ```
    // Note [Inlined boxed calls]
    // A boxed call is key extraction, a table load and one indirect call into the kernel's
    // trampoline. Out of line, it would add a call, a frame and register shuffling around that
    // indirect call, a noticeable share of a boxed call; inlined into the caller (a fallback, an
    // interpreter loop) the operator and stack are already in the registers the trampoline takes
    // them in (`BoxedTrampoline`'s parameter order). The rare paths stay out of line.
    // The fast path (one or two tensor dispatch arguments, calls not observed, see
    // Note [Boxed dispatch arguments]) needs no observing test of its own.
    #[inline]
    pub fn call_boxed(&self, stack: &mut Stack) -> Result<()> {
        let Some(keys) = self.0.fast_boxed_key_set(stack) else {
            return self.call_boxed_slow(stack);
        };
        let ks = call_key_set(&self.0, keys);
        self.0.lookup(ks).kernel.call_boxed(self, ks, stack)
    }

    /// A boxed call off the fast path: any layout of dispatch arguments, calls observed.
    #[inline(never)]
    fn call_boxed_slow(&self, stack: &mut Stack) -> Result<()> {
        let ks = call_key_set(&self.0, self.0.boxed_key_set(stack));
        self.redispatch_boxed(ks, stack)
    }

    /// Calls the kernel of `ks` (already masked: a kernel passes `ks & full_after(its key)`).
    #[inline]
    pub fn redispatch_boxed(&self, ks: DispatchKeySet, stack: &mut Stack) -> Result<()> {
        let kernel = self.0.lookup(ks);
        // The hot path: not observed. Observers are out of line; markers (fallthrough, errors)
        // have boxed forms of their own (Note [Boxed markers]).
        if !self.0.observed() {
            return kernel.kernel.call_boxed(self, ks, stack);
        }
        self.redispatch_boxed_slow(kernel, ks, stack)
    }

    #[inline(never)]
    fn redispatch_boxed_slow(
        &self,
        kernel: &AnnotatedKernel,
        ks: DispatchKeySet,
        stack: &mut Stack,
    ) -> Result<()> {
        let _scope = (self.0.observed() && observe::active())
            .then(|| observe::Scope::enter(self, ks, kernel, Some(stack)));
        kernel.kernel.call_boxed(self, ks, stack)
    }

    /// The error of a call that reached a slot without a runnable kernel.
    #[cold]
    pub(crate) fn report_error(&self, kind: KernelKind, ks: DispatchKeySet) -> DispatchError {
        let op = self.name().to_string();
        match kind {
            KernelKind::AmbiguousAutogradOther => {
                DispatchError::from(DispatchErrorKind::AmbiguousAutogradOther { op })
            }
            _ => {
                let key = ks.highest_priority_type_id();
                let available: Vec<String> = match self.0.dispatcher.upgrade() {
                    Some(inner) => Dispatcher { inner }
                        .available_keys(&self.0)
                        .iter()
                        .map(ToString::to_string)
                        .collect(),
                    None => Vec::new(),
                };
                if key == DispatchKey::Undefined {
                    return DispatchError::from(DispatchErrorKind::NoTensorArguments {
                        op,
                        available: available.join(", "),
                    });
                }
                let hint = no_kernel_hint(key);
                DispatchError::from(DispatchErrorKind::NoKernel {
                    op,
                    key,
                    available: available.join(", "),
                    hint,
                })
            }
        }
    }
}

// Note [Fallthrough reached at run time]
// The fallthrough mask normally keeps calls away from fallthrough slots. A slot can still be
// reached when a registration lands between a call's mask load and its slot load, or when a
// kernel redispatches with a key set it built itself. PyTorch reports an internal error then; we
// do what the mask would have done and continue with the next key.

/// The key set with its highest-priority functionality removed (see Note [Fallthrough reached
/// at run time]).
#[inline]
pub(crate) fn skip_fallthrough(ks: DispatchKeySet) -> DispatchKeySet {
    ks.remove(ks.highest_priority_type_id())
}

/// A suggestion for the "Could not run" error.
fn no_kernel_hint(key: DispatchKey) -> String {
    let backend = key.to_backend_component();
    if key.to_functionality_key() == DispatchKey::Dense {
        format!(
            " Is the backend for '{key}' linked into this program? If it is, register a kernel \
             for this operator with `impl_(op, DispatchKey::{key}, kernel)` or a \
             CompositeExplicitAutograd kernel."
        )
    } else if key.to_functionality_key() == DispatchKey::AutogradFunctionality {
        let _ = backend;
        " Register an Autograd kernel for this operator, or a CompositeImplicitAutograd \
          decomposition."
            .into()
    } else {
        format!(" Register a kernel for '{key}' or a backend fallback for it.")
    }
}

/// The slow path of typed calls, as a kernel object: `redispatch` calls its entry point with
/// the handle when the kernel's typed form does not match (Note [Typed calls end in one jump]).
/// Its entry point is out of line, like every kernel's.
impl<A: ArgList, R: KernelReturn> Invoke for TypedOperatorHandle<A, R> {
    type Args = A;
    type Ret = R;
    #[inline(always)]
    fn invoke(&self, ks: DispatchKeySet, args: A::Refs<'_>) -> Result<R> {
        self.slow_path(ks, args)
    }
}

/// A handle to an operator with a known calling convention: arguments `A` (a tuple of argument
/// families) and returns `R`. Calls are lock-free and allocation-free when the kernel is typed
/// with the same convention.
///
/// ```
/// use switchboard_dispatcher::{Dispatcher, KernelFunction, Library, LibraryKind};
/// use switchboard_dispatcher::{PackedScalar, Result, TypedOperatorHandle};
/// use switchboard_tensor::{Scalar, ScalarType, Tensor};
///
/// fn fill(x: &Tensor, value: Scalar) -> Result<Tensor> {
///     Ok(Tensor::full(x.sizes(), value, x.dtype())?)
/// }
///
/// let d = Dispatcher::with_builtin_fallbacks();
/// let mut lib = Library::new(&d, LibraryKind::Def, "myops", None)?;
/// lib.def("fill(Tensor x, Scalar value) -> Tensor")?;
/// lib.impl_("fill", None, KernelFunction::from_fn(fill))?; // every key
/// let op: TypedOperatorHandle<(Tensor, Scalar), Tensor> =
///     d.find_schema_or_throw("myops::fill")?.typed()?;
/// let x = Tensor::zeros(&[2], ScalarType::Float)?;
/// let y = op.call((&x, PackedScalar::new(Scalar::Int(3))))?; // scalars travel packed
/// assert_eq!(y.to_vec::<f32>()?, [3.0, 3.0]);
/// # Ok::<(), switchboard_dispatcher::DispatchError>(())
/// ```
pub struct TypedOperatorHandle<A: ArgList, R: KernelReturn> {
    op: OperatorHandle,
    /// `signature_id::<A, R>()`, computed once (Note [Signature ids]); set only by
    /// `OperatorHandle::typed`, which the unboxed calls' safety relies on.
    sig: u64,
    _sig: PhantomData<fn(A) -> R>,
}

impl<A: ArgList, R: KernelReturn> std::fmt::Debug for TypedOperatorHandle<A, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TypedOperatorHandle({})", self.op.name())
    }
}

impl<A: ArgList, R: KernelReturn> Clone for TypedOperatorHandle<A, R> {
    fn clone(&self) -> Self {
        TypedOperatorHandle {
            op: self.op.clone(),
            sig: self.sig,
            _sig: PhantomData,
        }
    }
}

impl<A: ArgList, R: KernelReturn> TypedOperatorHandle<A, R> {
    /// The untyped handle.
    pub fn handle(&self) -> &OperatorHandle {
        &self.op
    }

    /// Calls the operator: computes the call's key set from the tensor arguments and this
    /// thread's keys, and runs the kernel of its highest-priority key.
    #[inline]
    pub fn call(&self, args: A::Refs<'_>) -> Result<R> {
        let ks = call_key_set(&self.op.0, A::key_set(args));
        self.redispatch(ks, args)
    }

    /// Runs the kernel of `ks`; a kernel at key K redispatches with `ks & full_after(K)`.
    #[inline]
    pub fn redispatch(&self, ks: DispatchKeySet, args: A::Refs<'_>) -> Result<R> {
        let kernel = self.op.0.lookup(ks);
        // Note [Observed calls miss the typed fast path]
        // Whether calls are observed and whether the kernel's typed form matches are one test:
        // the id compared with the kernel's signature has its top bit flipped while the entry
        // is observed, and no signature id has that bit (Note [Signature ids]), so an observed
        // call always takes the slow path, which checks for observers first. The hot path pays
        // one load and one xor for observation instead of a separate load, test and branch.
        let sig = self.sig ^ self.op.0.observed_bit();
        // Note [Typed calls end in one jump]
        // Whatever the test says, the call is the function's last act, so both outcomes
        // compile to a jump with the arguments in registers: the kernel's entry point (spread
        // form, Note [Spread arguments]), or the slow path, an out-of-line function taking the
        // arguments spread too, with the handle and the kernel already found (`call_slow`). A
        // slow path taking the arguments as a tuple would make every caller store them to its
        // stack first, in case the test fails, and keep a frame for it; a kernel that only
        // redispatches (autograd with nothing requiring grad) would pay that on every call.
        // The slow path takes three words besides the arguments (handle, key set, kernel); with
        // the arguments in more than three registers some would travel on the stack, which
        // rules out the jump. There the slow path is this handle's own entry point instead (the
        // handle is a kernel object of the kernel's spread form, see its `Invoke`), chosen in
        // place of the kernel's; it looks the kernel up again.
        if A::WORDS <= 3 {
            if kernel.kernel.signature() == sig {
                let (entry, ctx) = kernel.kernel.unboxed_entry();
                // SAFETY: the kernel's typed form has the id `sig`, which is
                // `signature_id::<A, R>()` (only `OperatorHandle::typed` sets `self.sig`; the
                // observed bit matches no kernel), so `entry` is its entry point for `(A, R)`
                // with its live kernel object.
                return unsafe { A::call_entry::<R>(entry, ctx, ks, args) };
            }
            return A::call_slow::<R, Self>(self, ks, kernel, args);
        }
        let (entry, ctx) = kernel
            .kernel
            .unboxed_or(sig, (A::entry::<Self>(), self as *const Self as *const ()));
        // SAFETY: `sig` is `signature_id::<A, R>()` (only `OperatorHandle::typed` sets
        // `self.sig`), or that with its top bit flipped, which matches no kernel; so `entry` is
        // the kernel's entry point for `(A, R)` with its live kernel object (see
        // `KernelFunction::unboxed_or`), or `Self`'s, an entry point for `(A, R)` too, with
        // `self`, which outlives the call.
        unsafe { A::call_entry::<R>(entry, ctx, ks, args) }
    }

    /// Runs `kernel`: its typed form when it has one for `(A, R)`, its boxed form otherwise.
    #[inline(always)]
    fn run(&self, kernel: &AnnotatedKernel, ks: DispatchKeySet, args: A::Refs<'_>) -> Result<R> {
        // SAFETY: `self.sig` is `signature_id::<A, R>()`: only `OperatorHandle::typed` sets it.
        match unsafe { kernel.kernel.call_unboxed::<A, R>(self.sig, ks, args) } {
            Ok(result) => result,
            Err(args) => self.call_boxed_kernel(kernel, ks, args),
        }
    }

    /// A call the typed fast path did not take: observed, or the kernel has no typed form for
    /// `(A, R)` (see Note [Observed calls miss the typed fast path]). Reached through this
    /// handle's entry point (Note [Typed calls end in one jump]).
    #[inline(always)]
    fn slow_path(&self, ks: DispatchKeySet, args: A::Refs<'_>) -> Result<R> {
        // Looked up again: the entry point receives only the handle. A registration landing in
        // between makes the call run the newer kernel, which a call may see as well as the
        // older one (Note [Lock-free dispatch table]); whichever it is, `slow` handles it (a
        // typed kernel of this convention runs through its boxed form).
        self.slow(ks, self.op.0.lookup(ks), args)
    }
}

impl<A: ArgList, R: KernelReturn> SlowPath<A, R> for TypedOperatorHandle<A, R> {
    /// A call the typed fast path did not take, with the kernel it found: observed, or the
    /// kernel has no typed form for `(A, R)`.
    #[inline(always)]
    fn slow(&self, ks: DispatchKeySet, kernel: &AnnotatedKernel, args: A::Refs<'_>) -> Result<R> {
        if self.op.0.observed() {
            if observe::active() {
                return self.run_observed(kernel, ks, args);
            }
            return self.run(kernel, ks, args);
        }
        // Not observed: the fast path's signature test was the real one, so the kernel has no
        // typed form for `(A, R)`.
        self.call_boxed_kernel(kernel, ks, args)
    }
}

impl<A: ArgList, R: KernelReturn> TypedOperatorHandle<A, R> {
    #[cold]
    #[inline(never)]
    fn run_observed(
        &self,
        kernel: &AnnotatedKernel,
        ks: DispatchKeySet,
        args: A::Refs<'_>,
    ) -> Result<R> {
        let mut boxed = Stack::new();
        A::push_to_stack(args, &mut boxed);
        let _scope = observe::Scope::enter(&self.op, ks, kernel, Some(&boxed));
        self.run(kernel, ks, args)
    }

    /// The slow path: the kernel has no typed form for this convention (a boxed fallback, a
    /// kernel registered with other Rust types, a marker), so the arguments are boxed onto the
    /// thread's reused stack (Note [Reused boxing stacks]). A fallthrough marker's boxed form
    /// continues with the next key, a missing kernel's returns the error (Note [Boxed markers]).
    #[inline(always)]
    fn call_boxed_kernel(
        &self,
        kernel: &AnnotatedKernel,
        ks: DispatchKeySet,
        args: A::Refs<'_>,
    ) -> Result<R> {
        let Some(mut cached) = CachedStack::take(A::LEN) else {
            return self.call_boxed_kernel_uncached(kernel, ks, args);
        };
        let stack = cached.stack();
        // SAFETY: a cached stack just taken is empty with room for `A::LEN` values; they are
        // counted in once written.
        unsafe {
            A::write_boxed(args, stack.as_mut_ptr());
            stack.set_len(A::LEN);
        }
        self.run_boxed_and_pop(kernel, ks, stack)
    }

    /// `call_boxed_kernel` when the cached stack is not at hand: first use on the thread, a
    /// nested call, the thread's teardown.
    #[inline(never)]
    fn call_boxed_kernel_uncached(
        &self,
        kernel: &AnnotatedKernel,
        ks: DispatchKeySet,
        args: A::Refs<'_>,
    ) -> Result<R> {
        let mut boxing = BoxingStack::take();
        let stack = boxing.stack();
        A::push_to_stack(args, stack);
        self.run_boxed_and_pop(kernel, ks, stack)
    }

    #[inline(always)]
    fn run_boxed_and_pop(
        &self,
        kernel: &AnnotatedKernel,
        ks: DispatchKeySet,
        stack: &mut Stack,
    ) -> Result<R> {
        kernel.kernel.call_boxed(&self.op, ks, stack)?;
        R::pop_from_stack(stack).ok_or_else(|| self.return_error(ks, stack))
    }

    /// The error of a boxed kernel that left no returns of type `R` on the stack.
    #[cold]
    #[inline(never)]
    fn return_error(&self, ks: DispatchKeySet, stack: &Stack) -> DispatchError {
        DispatchError::from(DispatchErrorKind::Kernel(format!(
            "{}: the kernel for {} returned {} value(s) of the wrong type (expected {})",
            self.op.name(),
            ks.highest_priority_type_id(),
            stack.len(),
            R::schema_types().join(", ")
        )))
    }
}

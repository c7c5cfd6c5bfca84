//! `KernelFunction`: a kernel as the dispatcher stores it, boxed, unboxed (typed) or both.

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::Arc;

use switchboard_keys::DispatchKeySet;

use crate::call::OperatorHandle;
use crate::error::{DispatchError, DispatchErrorKind, Result};
use crate::ivalue::{IValue, Stack};
use crate::operator::AnnotatedKernel;
use crate::ret::KernelReturn;

/// A boxed kernel: takes its arguments from the stack and leaves its returns there.
pub type BoxedKernelFn =
    dyn Fn(&OperatorHandle, DispatchKeySet, &mut Stack) -> Result<()> + Send + Sync;

/// What a table slot's kernel is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelKind {
    /// A kernel that computes.
    Regular,
    /// Skips its key: the call continues with the next key (`torch::CppFunction::makeFallthrough`).
    Fallthrough,
    /// The AutogradOther slot of an operator whose CompositeImplicitAutograd kernel would be
    /// ambiguous there; calling it is an error.
    AmbiguousAutogradOther,
    /// No kernel: calling it is an error.
    Missing,
}

/// A list of argument families: the typed calling convention of an operator (see
/// Note [Argument families]). Implemented for tuples of [`Arg`](crate::Arg) families.
pub trait ArgList: 'static {
    /// The tuple of borrowed arguments.
    type Refs<'a>: Copy;
    /// The number of arguments.
    const LEN: usize;
    /// An upper bound on the integer registers the spread arguments take (a word per argument
    /// up to 8 bytes, one per 8 bytes beyond; Note [Typed calls end in one jump]).
    #[doc(hidden)]
    const WORDS: usize;
    /// The schema types, in order (a static list, see [`KernelReturn::schema_types`]).
    fn schema_types() -> &'static [&'static str];
    /// The union of the key sets of the tensor arguments.
    fn key_set(refs: Self::Refs<'_>) -> DispatchKeySet;
    /// Reads the arguments from the last `LEN` values of a slice; on a type mismatch, the index of
    /// the offending argument (`usize::MAX` when the slice is shorter than `LEN`).
    fn from_stack(values: &[IValue]) -> std::result::Result<Self::Refs<'_>, usize>;
    /// Pushes the boxed arguments.
    fn push_to_stack(refs: Self::Refs<'_>, stack: &mut Stack);
    /// Writes the boxed arguments to `LEN` consecutive slots from `dst`, in order.
    ///
    /// # Safety
    /// `dst` must be valid for `LEN` writes; the values are not dropped there.
    #[doc(hidden)]
    unsafe fn write_boxed(refs: Self::Refs<'_>, dst: *mut IValue);
    /// The boxed arguments moved out of a stack: [`TakenArgs`] of `LEN` values.
    #[doc(hidden)]
    type Taken;
    /// Moves the `LEN` boxed arguments starting at `args` out (the arguments, after the kernel
    /// ran, see Note [Boxed trampolines]); dropping the result drops each as the variant its
    /// family expects.
    ///
    /// # Safety
    /// `args` must point to `LEN` consecutive valid `IValue`s that the caller owns and neither
    /// reads nor drops again, and that `from_stack` accepted (each of its family's type).
    #[doc(hidden)]
    unsafe fn take_boxed(args: *const IValue) -> Self::Taken;
    /// Drops the `LEN` boxed arguments starting at `args` in place, each as the variant its
    /// family expects.
    ///
    /// # Safety
    /// As for [`take_boxed`](Self::take_boxed).
    #[doc(hidden)]
    unsafe fn drop_boxed(args: *mut IValue);
    /// The typed entry point of kernel object `K`, type-erased (Note [Spread arguments]).
    #[doc(hidden)]
    fn entry<K: Invoke<Args = Self>>() -> *const ();
    /// Calls an entry point made by [`entry`](Self::entry).
    ///
    /// # Safety
    /// `entry` must come from `Self::entry::<K>()` for a `K` whose `Ret` is `R`, and `ctx` must
    /// point to a live `K`.
    #[doc(hidden)]
    unsafe fn call_entry<R: KernelReturn>(
        entry: *const (),
        ctx: *const (),
        ks: DispatchKeySet,
        args: Self::Refs<'_>,
    ) -> Result<R>;
    /// Calls `handle.slow(ks, kernel, args)` through an out-of-line function taking the
    /// arguments spread (Note [Typed calls end in one jump]).
    #[doc(hidden)]
    fn call_slow<R: KernelReturn, H: SlowPath<Self, R>>(
        handle: &H,
        ks: DispatchKeySet,
        kernel: &AnnotatedKernel,
        args: Self::Refs<'_>,
    ) -> Result<R>;
}

/// The integer registers a spread argument of type `T` takes at most (see [`ArgList::WORDS`]).
#[doc(hidden)]
pub const fn arg_words<T>() -> usize {
    let size = std::mem::size_of::<T>();
    if size <= 8 {
        1
    } else {
        size.div_ceil(8)
    }
}

/// The slow path of a typed call, given the kernel its look-up found (an implementation detail
/// of [`ArgList::call_slow`]).
#[doc(hidden)]
pub trait SlowPath<A: ArgList + ?Sized, R: KernelReturn> {
    /// Runs `kernel` (whose typed form does not match, or calls are observed) on `args`.
    fn slow(&self, ks: DispatchKeySet, kernel: &AnnotatedKernel, args: A::Refs<'_>) -> Result<R>;
}

// Note [Spread arguments]
// A typed kernel's entry point takes its arguments one by one, `(ctx, ks, a, b, alpha)`, not as
// the tuple the handle holds: Rust passes a tuple larger than two registers through memory,
// which costs the caller a copy to its stack and keeps it from tail-calling the kernel, so a
// kernel that only redispatches (autograd with nothing requiring grad) would need a frame of
// its own. Spread, the arguments travel in registers (the first six words), and a redispatching
// kernel ends in a jump. The entry points are generated per arity by `arities!`.

// Note [Unboxed kernel calls]
// A typed kernel is stored type-erased as two raw pointers: `unboxed_fn`, a monomorphised
// entry point `unsafe fn(ctx, ks, a, b, ...) -> Result<R>` for the kernel's calling convention
// (A, R) (arguments spread, Note [Spread arguments]), and `ctx`, the kernel object (closure or
// fn item) the entry point calls, kept alive by
// `_owner`. Next to them sits `signature`, the interned id of (A, R) (Note [Signature ids]). A
// typed call compares the id its handle computed once with `signature` (one integer compare)
// and, when they match, transmutes `unboxed_fn` back to its real type and calls it: one indirect
// call into code where the kernel is inlined.
// No vtable lookup, no downcast, no reference counting on the hot path. When they do not match
// (a kernel registered with other Rust types, or a boxed-only kernel) the call takes the boxed
// path instead.

/// The schema types of a typed kernel's (arguments, returns).
pub type InferredSignature = (&'static [&'static str], &'static [&'static str]);

/// Holds the static list of schema types of argument list `T` (an associated const, evaluated
/// per `T` at compile time).
pub(crate) struct ArgTypes<T>(pub(crate) std::marker::PhantomData<T>);

fn inferred_signature<A: ArgList, R: KernelReturn>() -> InferredSignature {
    (A::schema_types(), R::schema_types())
}

// Note [Signature ids]
// A calling convention (A, R) is identified by its `TypeId`, 16 bytes whose comparison costs
// five instructions on every typed call. Instead, the first time a convention is seen (at kernel
// creation or when a typed handle is made, never during a call) its `TypeId` is interned into a
// process-wide map that hands out consecutive integers: equal ids mean equal `TypeId`s, so an id
// is as good a proof of the kernel's real type as the `TypeId` itself, and comparing it costs
// one load and one compare. Id 0 is never handed out: it marks kernels without an unboxed form.

/// The interned id of calling convention `(A, R)` (see Note [Signature ids]); never 0, and
/// below `1 << 63` (Note [Observed calls miss the typed fast path]).
pub(crate) fn signature_id<A: 'static, R: 'static>() -> u64 {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static IDS: OnceLock<Mutex<HashMap<TypeId, u64>>> = OnceLock::new();
    let mut ids = IDS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    // A process cannot create 2^63 conventions (each is a distinct Rust type), so the top bit
    // stays clear.
    let next = ids.len() as u64 + 1;
    *ids.entry(TypeId::of::<(A, R)>()).or_insert(next)
}

/// The `signature` of kernels without an unboxed form.
const NO_UNBOXED: u64 = 0;

/// The type-erased boxed entry point of a kernel: `ctx` is the kernel object (see
/// Note [Boxed kernel calls]). The parameters come in the order of `call_boxed`'s, so that the
/// operator and stack stay in their registers on the way in (Note [Inlined boxed calls]).
type BoxedTrampoline =
    unsafe fn(&OperatorHandle, &mut Stack, DispatchKeySet, *const ()) -> Result<()>;

// Note [Boxed kernel calls]
// The boxed form is stored like the unboxed one: a monomorphised function pointer reading the
// same kernel object `ctx`, owned by `_owner`. For a typed kernel the boxed trampoline reads the
// arguments from the stack, calls the kernel inlined and replaces the arguments with the returns
// (Note [Boxed trampolines]); for a boxed kernel (a closure over the stack) it just calls the
// closure. A boxed call is then one indirect call, with no trait-object vtable or reference
// count on the way.

// Note [Boxed trampolines]
// After a typed kernel ran boxed, its arguments (the last `A::LEN` values) give way to its
// returns. Popping each argument and pushing each return would move every value through a
// temporary and test the capacity at every push. Instead the trampoline moves the arguments out
// of their slots (`ArgList::take_boxed`, a copy of the words into registers), shortens the
// stack to below them, writes the returns straight into the freed slots
// (`KernelReturn::write_to`) and counts them in; only then do the arguments drop, each as the
// variant its family expects (`Arg::drop_boxed`: a tensor is a reference count decrement, an
// int nothing). Dropping last matters for the frame: a drop's slow path is a call, and with the
// drops first, the stack, its length and the returns all had to live across those calls in
// callee-saved registers (six pushes and pops on every call); dropped last, only the arguments
// not yet dropped are live. When a kernel returns more values than it takes (known at compile
// time), the returns are pushed instead.

/// `N` boxed arguments of family list `A`, moved out of a stack; dropping drops each as the
/// variant its family accepts (see Note [Boxed trampolines]).
#[doc(hidden)]
pub struct TakenArgs<A: ArgList, const N: usize> {
    values: [std::mem::MaybeUninit<IValue>; N],
    _list: std::marker::PhantomData<A>,
}

impl<A: ArgList, const N: usize> TakenArgs<A, N> {
    /// Moves `N` values out of `args`.
    ///
    /// # Safety
    /// As for [`ArgList::take_boxed`], with `N == A::LEN`.
    #[inline(always)]
    pub(crate) unsafe fn read(args: *const IValue) -> Self {
        // SAFETY: guaranteed by the caller: `args` points to `N` valid values we now own.
        let values = unsafe { std::ptr::read(args.cast::<[std::mem::MaybeUninit<IValue>; N]>()) };
        TakenArgs {
            values,
            _list: std::marker::PhantomData,
        }
    }
}

impl<A: ArgList, const N: usize> Drop for TakenArgs<A, N> {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: `values` holds the `N == A::LEN` initialised values `read` moved out of the
        // stack, each accepted by its family, owned by us and dropped only here.
        unsafe { A::drop_boxed(self.values.as_mut_ptr().cast::<IValue>()) }
    }
}

/// Runs a typed kernel on a stack.
///
/// # Safety
/// `ctx` must point to a live `K`.
unsafe fn boxed_trampoline<K: Invoke>(
    op: &OperatorHandle,
    stack: &mut Stack,
    ks: DispatchKeySet,
    ctx: *const (),
) -> Result<()> {
    // SAFETY: guaranteed by the caller: `ctx` points to the live `K` that `_owner` keeps (or
    // is a dangling, aligned pointer to a zero-sized `K`, see Note [Kernel objects without a
    // heap cell]).
    let kernel = unsafe { &*(ctx as *const K) };
    let ret = {
        let refs = match <K::Args as ArgList>::from_stack(stack) {
            Ok(refs) => refs,
            Err(i) => return Err(stack_error::<K::Args>(op, stack, i)),
        };
        kernel.invoke(ks, refs)?
    };
    let n = <K::Args as ArgList>::LEN;
    // `from_stack` succeeded, so the stack holds at least `n` values.
    let base = stack.len() - n;
    // SAFETY: the last `n` values are the arguments, initialised, accepted by `from_stack` and
    // no longer borrowed (the kernel returned owned values). `take_boxed` moves them out and
    // `set_len(base)` gives up the stack's claim on them, so each is dropped exactly once, by
    // `args`. The buffer is not reallocated before the writes, so `slots` stays valid; the
    // `R::LEN <= n` returns fit in the `n` freed slots, below the capacity, and are counted in
    // only once written.
    let args = unsafe {
        let slots = stack.as_mut_ptr().add(base);
        let args = <K::Args as ArgList>::take_boxed(slots);
        stack.set_len(base);
        if <K::Ret as KernelReturn>::LEN <= n {
            ret.write_to(slots);
            stack.set_len(base + <K::Ret as KernelReturn>::LEN);
            drop(args);
            return Ok(());
        }
        args
    };
    ret.push_to_stack(stack);
    drop(args);
    Ok(())
}

/// The error of a boxed call whose stack does not hold `A`'s arguments: too few values
/// (`index == usize::MAX`), or the value for argument `index` has another type. Out of line,
/// so that the trampolines' common path keeps a small frame.
#[cold]
#[inline(never)]
fn stack_error<A: ArgList>(op: &OperatorHandle, stack: &[IValue], index: usize) -> DispatchError {
    let n = A::LEN;
    match stack.len().checked_sub(n) {
        Some(base) if index < n => {
            argument_type_error(op, index, A::schema_types()[index], &stack[base + index])
        }
        _ => DispatchError::from(DispatchErrorKind::ArgumentCount {
            op: op.name().to_string(),
            expected: n,
            got: stack.len(),
        }),
    }
}

// Note [Boxed markers]
// Markers (fallthrough, missing, ambiguous AutogradOther) have a boxed form too: the fallthrough
// continues with the next key (Note [Fallthrough reached at run time]) and the others return the
// slot's error. A boxed call then never tests whether its kernel has a boxed form: it calls
// whatever the slot holds.

/// The boxed form of the fallthrough marker.
///
/// # Safety
/// None needed (`ctx` is not read); `unsafe` for the trampoline type.
unsafe fn boxed_fallthrough(
    op: &OperatorHandle,
    stack: &mut Stack,
    ks: DispatchKeySet,
    _ctx: *const (),
) -> Result<()> {
    op.redispatch_boxed(crate::call::skip_fallthrough(ks), stack)
}

/// The boxed form of the missing marker (`AMBIGUOUS` false) and of the ambiguous-AutogradOther
/// marker (true): the slot's error.
///
/// # Safety
/// None needed (`ctx` is not read); `unsafe` for the trampoline type.
#[cold]
unsafe fn boxed_error<const AMBIGUOUS: bool>(
    op: &OperatorHandle,
    _stack: &mut Stack,
    ks: DispatchKeySet,
    _ctx: *const (),
) -> Result<()> {
    let kind = if AMBIGUOUS {
        KernelKind::AmbiguousAutogradOther
    } else {
        KernelKind::Missing
    };
    Err(op.report_error(kind, ks))
}

/// Runs a boxed kernel (a closure over the stack).
///
/// # Safety
/// `ctx` must point to a live `F`.
unsafe fn boxed_closure<F>(
    op: &OperatorHandle,
    stack: &mut Stack,
    ks: DispatchKeySet,
    ctx: *const (),
) -> Result<()>
where
    F: Fn(&OperatorHandle, DispatchKeySet, &mut Stack) -> Result<()> + Send + Sync + 'static,
{
    // SAFETY: guaranteed by the caller: `ctx` points to the live `F` that `_owner` keeps (or
    // is a dangling, aligned pointer to a zero-sized `F`, see Note [Kernel objects without a
    // heap cell]).
    let f = unsafe { &*(ctx as *const F) };
    f(op, ks, stack)
}

/// A typed kernel object, whatever its Rust signature looked like (an implementation detail
/// of [`ArgList`]'s entry points).
#[doc(hidden)]
pub trait Invoke: Send + Sync + 'static {
    /// The argument families.
    type Args: ArgList;
    /// The returns.
    type Ret: KernelReturn;
    /// Calls the kernel.
    fn invoke(
        &self,
        ks: DispatchKeySet,
        args: <Self::Args as ArgList>::Refs<'_>,
    ) -> Result<Self::Ret>;
}

struct Plain<F, M>(F, std::marker::PhantomData<fn() -> M>);
struct WithKeys<F, M>(F, std::marker::PhantomData<fn() -> M>);

impl<M: 'static, F: KernelFn<M>> Invoke for Plain<F, M> {
    type Args = F::Args;
    type Ret = F::Ret;
    #[inline(always)]
    fn invoke(
        &self,
        ks: DispatchKeySet,
        args: <Self::Args as ArgList>::Refs<'_>,
    ) -> Result<Self::Ret> {
        self.0.invoke(ks, args)
    }
}

impl<M: 'static, F: KernelFnWithKeys<M>> Invoke for WithKeys<F, M> {
    type Args = F::Args;
    type Ret = F::Ret;
    #[inline(always)]
    fn invoke(
        &self,
        ks: DispatchKeySet,
        args: <Self::Args as ArgList>::Refs<'_>,
    ) -> Result<Self::Ret> {
        self.0.invoke(ks, args)
    }
}

/// A kernel: a boxed function, an unboxed (typed) function, or both, or a marker
/// (fallthrough, missing, ambiguous AutogradOther).
///
/// Every typed kernel also gets a boxed form, generated from its signature, so that boxed calls
/// and fallbacks can run it; a typed call of a kernel that has only a boxed form boxes its
/// arguments.
#[derive(Clone)]
pub struct KernelFunction {
    kind: KernelKind,
    /// The boxed form (see Note [Boxed kernel calls]; for markers, Note [Boxed markers]).
    boxed_fn: BoxedTrampoline,
    /// Interned id of the unboxed form's (A, R), or `NO_UNBOXED` (Note [Signature ids]).
    signature: u64,
    unboxed_fn: *const (),
    /// The kernel object both trampolines read (null for markers).
    ctx: *const (),
    /// Owns what `ctx` points to.
    _owner: Option<Arc<dyn Any + Send + Sync>>,
    /// Computes the schema types inferred from the Rust signature: (arguments, returns). A
    /// function rather than the lists, so that a kernel costs no heap for them.
    inferred: Option<fn() -> InferredSignature>,
}

// SAFETY: the raw pointers are plain `fn` pointers and pointers into `_owner`, an immutable
// `Send + Sync` kernel object; sharing or sending them is as safe as sharing `_owner`.
unsafe impl Send for KernelFunction {}
// SAFETY: as above; nothing is mutated through the pointers.
unsafe impl Sync for KernelFunction {}

impl fmt::Debug for KernelFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "KernelFunction({:?} [ {}])",
            self.kind,
            self.dump_state()
        )
    }
}

// Note [Kernel objects without a heap cell]
// A kernel object (a function item, a closure, a `Plain` wrapper of one) is reached through
// `ctx` and kept alive by `_owner`. Most kernels are plain functions or capture-free closures:
// zero-sized types. For those no `Arc` is made (it would be a 16-byte allocation per
// registration for nothing): `ctx` is a dangling but well-aligned, non-null pointer, which is
// a valid place for a zero-sized value, and the value itself is forgotten (it has no drop glue,
// checked below, so forgetting it changes nothing). Other kernels are moved into an `Arc`.

/// The kernel object's pointer and its owner (see Note [Kernel objects without a heap cell]).
fn kernel_object<K: Send + Sync + 'static>(
    kernel: K,
) -> (*const (), Option<Arc<dyn Any + Send + Sync>>) {
    if size_of::<K>() == 0 && !std::mem::needs_drop::<K>() {
        std::mem::forget(kernel);
        (
            std::ptr::NonNull::<K>::dangling().as_ptr() as *const (),
            None,
        )
    } else {
        let kernel = Arc::new(kernel);
        (Arc::as_ptr(&kernel) as *const (), Some(kernel))
    }
}

impl KernelFunction {
    /// A boxed kernel.
    pub fn from_boxed<F>(f: F) -> Self
    where
        F: Fn(&OperatorHandle, DispatchKeySet, &mut Stack) -> Result<()> + Send + Sync + 'static,
    {
        let (ctx, owner) = kernel_object(f);
        KernelFunction {
            boxed_fn: boxed_closure::<F>,
            ctx,
            _owner: owner,
            ..Self::marker(KernelKind::Regular)
        }
    }

    /// A typed kernel from a function or closure; its schema is inferred from its signature.
    ///
    /// The function takes the operator's arguments (`&Tensor`, `i64`, `f64`, `bool`, `Scalar`,
    /// `Option<&Tensor>`, `&[i64]`, `&str`, ...) and returns `Result<R>` where `R` is one return
    /// or a tuple of them.
    pub fn from_fn<M: 'static, F: KernelFn<M>>(f: F) -> Self {
        Self::typed(Plain(f, std::marker::PhantomData))
    }

    /// Like [`from_fn`](Self::from_fn) for a function whose first parameter is the call's
    /// `DispatchKeySet`, for kernels that redispatch.
    pub fn from_fn_with_keys<M: 'static, F: KernelFnWithKeys<M>>(f: F) -> Self {
        Self::typed(WithKeys(f, std::marker::PhantomData))
    }

    fn typed<K: Invoke>(kernel: K) -> Self {
        let (ctx, owner) = kernel_object(kernel);
        KernelFunction {
            kind: KernelKind::Regular,
            boxed_fn: boxed_trampoline::<K>,
            signature: signature_id::<K::Args, K::Ret>(),
            unboxed_fn: <K::Args as ArgList>::entry::<K>(),
            ctx,
            inferred: Some(inferred_signature::<K::Args, K::Ret>),
            _owner: owner,
        }
    }

    /// The fallthrough kernel: its key is skipped.
    pub fn fallthrough() -> Self {
        Self::marker(KernelKind::Fallthrough)
    }

    pub(crate) fn marker(kind: KernelKind) -> Self {
        KernelFunction {
            kind,
            boxed_fn: match kind {
                KernelKind::Fallthrough => boxed_fallthrough,
                KernelKind::AmbiguousAutogradOther => boxed_error::<true>,
                // A regular kernel is never made a marker; its error is the missing one's.
                KernelKind::Missing | KernelKind::Regular => boxed_error::<false>,
            },
            signature: NO_UNBOXED,
            unboxed_fn: std::ptr::null(),
            ctx: std::ptr::null(),
            _owner: None,
            inferred: None,
        }
    }

    /// What the kernel is.
    #[inline]
    pub fn kind(&self) -> KernelKind {
        self.kind
    }

    /// True for the fallthrough kernel.
    #[inline]
    pub fn is_fallthrough(&self) -> bool {
        self.kind == KernelKind::Fallthrough
    }

    /// True when calling the kernel can run code (not missing, not ambiguous).
    pub fn is_valid(&self) -> bool {
        matches!(self.kind, KernelKind::Regular | KernelKind::Fallthrough)
    }

    /// The interned id of a typed kernel's calling convention, 0 for kernels without one
    /// (Note [Signature ids]).
    pub(crate) fn signature_id(&self) -> u64 {
        self.signature
    }

    /// The schema types inferred from a typed kernel's signature: (arguments, returns).
    pub fn inferred_signature(&self) -> Option<InferredSignature> {
        self.inferred.map(|f| f())
    }

    /// PyTorch's `KernelFunction::dumpState`: `fallthrough `, `boxed `, `unboxed `.
    pub fn dump_state(&self) -> String {
        let mut s = String::new();
        if self.kind == KernelKind::Fallthrough {
            s.push_str("fallthrough boxed ");
        } else if self.kind == KernelKind::Regular {
            s.push_str("boxed ");
        }
        if self.inferred.is_some() {
            s.push_str("unboxed ");
        }
        s
    }

    /// Calls the unboxed form if the kernel has one with exactly the calling convention
    /// `(A, R)`, whose id is `sig`; gives the arguments back otherwise (see Note [Unboxed kernel
    /// calls]).
    ///
    /// # Safety
    /// `sig` must be `signature_id::<A, R>()` or a value no signature id has (one with the top
    /// bit set).
    #[inline(always)]
    pub(crate) unsafe fn call_unboxed<'a, A: ArgList, R: KernelReturn>(
        &self,
        sig: u64,
        ks: DispatchKeySet,
        args: A::Refs<'a>,
    ) -> std::result::Result<Result<R>, A::Refs<'a>> {
        if self.signature != sig {
            return Err(args);
        }
        // SAFETY: `sig` is the id of `(A, R)` or matches no id (guaranteed by the caller), and
        // ids are unique per `TypeId` and never 0 (Note [Signature ids]), so `signature == sig`
        // only when
        // `unboxed_fn` was made by `A::entry::<K>()` for a `K` with `K::Ret == R` (in `typed`).
        // Its `ctx` points into `_owner`, which lives as long as `self`.
        unsafe { Ok(A::call_entry::<R>(self.unboxed_fn, self.ctx, ks, args)) }
    }

    /// The interned id of the typed form's calling convention (`NO_UNBOXED` without one, see
    /// Note [Signature ids]).
    #[inline(always)]
    pub(crate) fn signature(&self) -> u64 {
        self.signature
    }

    /// The unboxed entry point and kernel object `(unboxed_fn, ctx)`: callable with
    /// `A::call_entry::<R>` when [`signature`](Self::signature) is `signature_id::<A, R>()`.
    #[inline(always)]
    pub(crate) fn unboxed_entry(&self) -> (*const (), *const ()) {
        (self.unboxed_fn, self.ctx)
    }

    /// The unboxed entry point and kernel object `(unboxed_fn, ctx)` if the kernel has a typed
    /// form with exactly the calling convention whose id is `sig`, `otherwise` if not (see Note
    /// [Typed calls end in one jump]). Calling the pair with `A::call_entry` is sound when `sig`
    /// is `signature_id::<A, R>()` or a value no signature id has, and `otherwise` is an entry
    /// point of `(A, R)` with its kernel object.
    #[inline(always)]
    pub(crate) fn unboxed_or(
        &self,
        sig: u64,
        otherwise: (*const (), *const ()),
    ) -> (*const (), *const ()) {
        if self.signature == sig {
            (self.unboxed_fn, self.ctx)
        } else {
            otherwise
        }
    }

    /// Runs the boxed form (a marker's: Note [Boxed markers]).
    #[inline(always)]
    pub(crate) fn call_boxed(
        &self,
        op: &OperatorHandle,
        ks: DispatchKeySet,
        stack: &mut Stack,
    ) -> Result<()> {
        // SAFETY: `boxed_fn` was made for the kernel object `ctx` points to (in `typed` or
        // `from_boxed`), which `_owner` keeps alive as long as `self`; a marker's ignores `ctx`.
        unsafe { (self.boxed_fn)(op, stack, ks, self.ctx) }
    }
}

pub(crate) fn argument_type_error(
    op: &OperatorHandle,
    index: usize,
    expected: &str,
    got: &IValue,
) -> DispatchError {
    let arg = op
        .schema()
        .and_then(|s| s.schema.arguments().get(index).map(|a| a.name().to_owned()))
        .unwrap_or_else(|| format!("_{index}"));
    DispatchError::from(DispatchErrorKind::ArgumentType {
        op: op.name().to_string(),
        arg,
        expected: expected.to_owned(),
        got: got.type_name().to_owned(),
    })
}

/// A Rust function usable as a typed kernel; implemented for functions and closures of up to
/// thirteen parameters whose types are [`KernelParam`](crate::KernelParam)s and whose return is `Result<R>`.
pub trait KernelFn<Marker>: Send + Sync + 'static {
    /// The argument families.
    type Args: ArgList;
    /// The returns.
    type Ret: KernelReturn;
    /// Calls the function.
    fn invoke(
        &self,
        ks: DispatchKeySet,
        args: <Self::Args as ArgList>::Refs<'_>,
    ) -> Result<Self::Ret>;
}

/// Like [`KernelFn`] for functions that take the call's `DispatchKeySet` first.
pub trait KernelFnWithKeys<Marker>: Send + Sync + 'static {
    /// The argument families.
    type Args: ArgList;
    /// The returns.
    type Ret: KernelReturn;
    /// Calls the function.
    fn invoke(
        &self,
        ks: DispatchKeySet,
        args: <Self::Args as ArgList>::Refs<'_>,
    ) -> Result<Self::Ret>;
}

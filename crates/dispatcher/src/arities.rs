//! The per-arity implementations of the typed calling convention: [`ArgList`] for tuples of
//! argument families and [`KernelFn`] / [`KernelFnWithKeys`] for functions and closures of up
//! to thirteen parameters (Note [Spread arguments]; thirteen: `native_batch_norm_backward.out`).

use switchboard_keys::DispatchKeySet;

use crate::arg::{Arg, KernelParam};
use crate::error::Result;
use crate::ivalue::{IValue, Stack};
use crate::kernel::{
    arg_words, ArgList, ArgTypes, Invoke, KernelFn, KernelFnWithKeys, SlowPath, TakenArgs,
};
use crate::operator::AnnotatedKernel;
use crate::ret::KernelReturn;

type ParamOf<'a, P> = <P as KernelParam>::Param<'a>;

macro_rules! arities {
    ($n:literal; $($p:ident $i:tt),*) => {
        impl<$($p: Arg),*> ArgTypes<($($p,)*)> {
            const LIST: &'static [&'static str] = &[$($p::SCHEMA_TYPE),*];
        }

        impl<$($p: Arg),*> ArgList for ($($p,)*) {
            type Refs<'a> = ($($p::Ref<'a>,)*);
            const LEN: usize = $n;
            const WORDS: usize = 0 $(+ arg_words::<$p::Ref<'static>>())*;
            fn schema_types() -> &'static [&'static str] {
                ArgTypes::<Self>::LIST
            }
            #[inline(always)]
            #[allow(unused_variables)]
            fn key_set(refs: Self::Refs<'_>) -> DispatchKeySet {
                DispatchKeySet::EMPTY $(| $p::key_set(refs.$i))*
            }
            #[allow(unused_variables)]
            #[inline(always)]
            fn from_stack(values: &[IValue]) -> std::result::Result<Self::Refs<'_>, usize> {
                let Some(args) = values.last_chunk::<$n>() else {
                    return Err(usize::MAX);
                };
                // Types first, then the conversions knowing them: a conversion that may fail
                // tests the payload's address for null (the `Option<&T>` niche) after the tag.
                $(if !$p::accepts(&args[$i]) {
                    return Err($i);
                })*
                // SAFETY: each value's family accepts it (tested above).
                Ok(($(unsafe { $p::from_accepted(&args[$i]) },)*))
            }
            #[inline]
            #[allow(unused_variables)]
            fn push_to_stack(refs: Self::Refs<'_>, stack: &mut Stack) {
                // One capacity test for all the arguments rather than one per push.
                stack.reserve($n);
                let len = stack.len();
                // SAFETY: `reserve` made room for `$n` values past `len`, written in order and
                // counted in only once all are written (a panic while boxing one leaks the
                // ones before it rather than exposing uninitialised slots).
                unsafe {
                    Self::write_boxed(refs, stack.as_mut_ptr().add(len));
                    stack.set_len(len + $n);
                }
            }
            #[inline(always)]
            #[allow(unused_variables, unused_unsafe)]
            unsafe fn write_boxed(refs: Self::Refs<'_>, dst: *mut IValue) {
                // SAFETY: guaranteed by the caller: `dst` is valid for `$n` writes.
                unsafe { $(dst.add($i).write($p::to_ivalue(refs.$i));)* }
            }
            type Taken = TakenArgs<Self, $n>;
            #[inline(always)]
            unsafe fn take_boxed(args: *const IValue) -> Self::Taken {
                // SAFETY: guaranteed by the caller, with `$n == LEN`.
                unsafe { TakenArgs::read(args) }
            }
            #[inline(always)]
            #[allow(unused_variables, unused_unsafe)]
            unsafe fn drop_boxed(args: *mut IValue) {
                // SAFETY: guaranteed by the caller: `args` points to `$n` valid values we own,
                // each accepted by its family; each is dropped once.
                unsafe { $($p::drop_boxed(args.add($i));)* }
            }
            fn entry<Kern: Invoke<Args = Self>>() -> *const () {
                /// Calls the kernel object behind `ctx`.
                ///
                /// # Safety
                /// `ctx` must point to a live `Kern`.
                #[allow(
                    non_snake_case,
                    clippy::too_many_arguments,
                    clippy::extra_unused_lifetimes // unused only in the zero-argument entry
                )]
                unsafe fn entry<'x, Kern: Invoke<Args = ($($p,)*)>, $($p: Arg),*>(
                    ctx: *const (),
                    ks: DispatchKeySet,
                    $($p: $p::Ref<'x>),*
                ) -> Result<Kern::Ret> {
                    // SAFETY: guaranteed by the caller: `ctx` points to the live `Kern` that
                    // `_owner` keeps (or is a dangling, aligned pointer to a zero-sized `Kern`, see
                    // Note [Kernel objects without a heap cell]).
                    let kernel = unsafe { &*(ctx as *const Kern) };
                    kernel.invoke(ks, ($($p,)*))
                }
                let f: for<'x> unsafe fn(*const (), DispatchKeySet, $($p::Ref<'x>),*) -> Result<Kern::Ret> =
                    entry::<Kern, $($p),*>;
                f as *const ()
            }
            #[inline(always)]
            #[allow(unused_variables)]
            unsafe fn call_entry<R: KernelReturn>(
                entry: *const (),
                ctx: *const (),
                ks: DispatchKeySet,
                args: Self::Refs<'_>,
            ) -> Result<R> {
                // SAFETY: guaranteed by the caller: `entry` is `Self::entry::<K>()` with
                // `K::Ret == R`, a function of exactly this type, and `ctx` points to a live `K`.
                unsafe {
                    let f = std::mem::transmute::<
                        *const (),
                        for<'x> unsafe fn(*const (), DispatchKeySet, $($p::Ref<'x>),*) -> Result<R>,
                    >(entry);
                    f(ctx, ks, $(args.$i),*)
                }
            }
            #[inline(always)]
            #[allow(unused_variables)]
            fn call_slow<R: KernelReturn, Hdl: SlowPath<Self, R>>(
                handle: &Hdl,
                ks: DispatchKeySet,
                kernel: &AnnotatedKernel,
                args: Self::Refs<'_>,
            ) -> Result<R> {
                #[inline(never)]
                #[allow(
                    non_snake_case,
                    clippy::too_many_arguments,
                    clippy::extra_unused_lifetimes // unused only in the zero-argument form
                )]
                fn spread<'x, R: KernelReturn, Hdl: SlowPath<($($p,)*), R>, $($p: Arg),*>(
                    handle: &Hdl,
                    ks: DispatchKeySet,
                    $($p: $p::Ref<'x>,)*
                    kernel: &AnnotatedKernel,
                ) -> Result<R> {
                    handle.slow(ks, kernel, ($($p,)*))
                }
                // The kernel last: the arguments stay in the registers the kernel's entry point
                // takes them in (Note [Spread arguments]), whichever way the call goes.
                spread::<R, Hdl, $($p),*>(handle, ks, $(args.$i,)* kernel)
            }
        }

        impl<Func, R, $($p),*> KernelFn<fn($($p,)*) -> R> for Func
        where
            Func: Fn($($p),*) -> Result<R> + for<'a> Fn($(ParamOf<'a, $p>),*) -> Result<R>,
            Func: Send + Sync + 'static,
            R: KernelReturn,
            $($p: KernelParam,)*
        {
            type Args = ($($p::Family,)*);
            type Ret = R;
            #[inline(always)]
            #[allow(unused_variables)]
            fn invoke(&self, _ks: DispatchKeySet, args: <Self::Args as ArgList>::Refs<'_>) -> Result<R> {
                // Picks the higher-ranked `Fn` impl without a trait object, so the call inlines.
                #[inline(always)]
                #[allow(non_snake_case, clippy::too_many_arguments)]
                fn call<Func: Fn($($p),*) -> O, O, $($p),*>(f: &Func, $($p: $p),*) -> O {
                    f($($p),*)
                }
                call::<Func, Result<R>, $(ParamOf<'_, $p>),*>(self, $($p::param(args.$i)),*)
            }
        }

        impl<Func, R, $($p),*> KernelFnWithKeys<fn($($p,)*) -> R> for Func
        where
            Func: Fn(DispatchKeySet, $($p),*) -> Result<R>
                + for<'a> Fn(DispatchKeySet, $(ParamOf<'a, $p>),*) -> Result<R>,
            Func: Send + Sync + 'static,
            R: KernelReturn,
            $($p: KernelParam,)*
        {
            type Args = ($($p::Family,)*);
            type Ret = R;
            #[inline(always)]
            #[allow(unused_variables)]
            fn invoke(&self, ks: DispatchKeySet, args: <Self::Args as ArgList>::Refs<'_>) -> Result<R> {
                #[inline(always)]
                #[allow(non_snake_case, clippy::too_many_arguments)]
                fn call<Func: Fn(DispatchKeySet, $($p),*) -> O, O, $($p),*>(
                    f: &Func,
                    ks: DispatchKeySet,
                    $($p: $p),*
                ) -> O {
                    f(ks, $($p),*)
                }
                call::<Func, Result<R>, $(ParamOf<'_, $p>),*>(self, ks, $($p::param(args.$i)),*)
            }
        }
    };
}

arities!(0;);
arities!(1; A 0);
arities!(2; A 0, B 1);
arities!(3; A 0, B 1, C 2);
arities!(4; A 0, B 1, C 2, D 3);
arities!(5; A 0, B 1, C 2, D 3, E 4);
arities!(6; A 0, B 1, C 2, D 3, E 4, F 5);
arities!(7; A 0, B 1, C 2, D 3, E 4, F 5, G 6);
arities!(8; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
arities!(9; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
arities!(10; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
arities!(11; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
arities!(12; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);
arities!(13; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12);

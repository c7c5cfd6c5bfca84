//! The Rust types of kernel returns, and how they move through a boxed stack.

use switchboard_tensor::{Scalar, ScalarType, Tensor};

use crate::ivalue::{IValue, Stack};

/// The return type of a kernel: one value or a tuple of them, and how it moves through a stack.
pub trait KernelReturn: Sized + 'static {
    /// The number of returns (the length of [`schema_types`](Self::schema_types)).
    const LEN: usize;
    /// The schema types of the returns, in order (a static list: checking a kernel against its
    /// schema allocates nothing for it).
    fn schema_types() -> &'static [&'static str];
    /// Writes the boxed returns to `LEN` consecutive slots from `dst` (see Note [Boxed
    /// trampolines]).
    ///
    /// # Safety
    /// `dst` must be valid for writes of `LEN` `IValue`s; what the slots held is overwritten
    /// without being dropped.
    unsafe fn write_to(self, dst: *mut IValue);
    /// Pushes the returns onto a stack.
    #[inline]
    fn push_to_stack(self, stack: &mut Stack) {
        stack.reserve(Self::LEN);
        let len = stack.len();
        // SAFETY: `reserve` made room for `LEN` values past `len`; they are counted in only once
        // written (a panic in between leaks them rather than exposing uninitialised slots).
        unsafe {
            self.write_to(stack.as_mut_ptr().add(len));
            stack.set_len(len + Self::LEN);
        }
    }
    /// Pops the returns pushed by a boxed kernel (the last `schema_types().len()` values).
    fn pop_from_stack(stack: &mut Stack) -> Option<Self>;
}

/// A single returned value.
pub trait ReturnValue: Sized + 'static {
    /// The schema type.
    const SCHEMA_TYPE: &'static str;
    /// Boxes the value.
    fn into_ivalue(self) -> IValue;
    /// Unboxes the value.
    fn from_ivalue(v: IValue) -> Option<Self>;
}

macro_rules! return_value {
    ($ty:ty, $name:literal, $variant:ident) => {
        impl ReturnValue for $ty {
            const SCHEMA_TYPE: &'static str = $name;
            #[inline]
            fn into_ivalue(self) -> IValue {
                IValue::$variant(self.into())
            }
            #[inline(always)]
            fn from_ivalue(v: IValue) -> Option<Self> {
                match v {
                    IValue::$variant(x) => Some(x.into()),
                    other => drop_mismatched(other),
                }
            }
        }
    };
}

/// Drops a returned value of an unexpected type, out of line: the whole enum's drop glue would
/// otherwise be inlined into every typed call of a boxed kernel.
#[cold]
#[inline(never)]
fn drop_mismatched<T>(v: IValue) -> Option<T> {
    drop(v);
    None
}

return_value!(Tensor, "Tensor", Tensor);
return_value!(i64, "int", Int);
return_value!(f64, "float", Double);
return_value!(bool, "bool", Bool);
return_value!(Vec<Tensor>, "Tensor[]", TensorList);
return_value!(ScalarType, "ScalarType", ScalarType);
return_value!(Vec<i64>, "int[]", IntList);

impl ReturnValue for Scalar {
    const SCHEMA_TYPE: &'static str = "Scalar";
    #[inline]
    fn into_ivalue(self) -> IValue {
        IValue::from(self)
    }
    #[inline]
    fn from_ivalue(v: IValue) -> Option<Self> {
        v.as_scalar()
    }
}

/// Holds the static list of schema types of return type `T` (an associated const, evaluated
/// per `T` at compile time).
struct ReturnTypes<T>(std::marker::PhantomData<T>);

impl<T: ReturnValue> ReturnTypes<T> {
    const ONE: &'static [&'static str] = &[T::SCHEMA_TYPE];
}

impl<T: ReturnValue> KernelReturn for T {
    const LEN: usize = 1;
    fn schema_types() -> &'static [&'static str] {
        ReturnTypes::<T>::ONE
    }
    #[inline(always)]
    unsafe fn write_to(self, dst: *mut IValue) {
        // SAFETY: guaranteed by the caller: `dst` is valid for one write.
        unsafe { dst.write(self.into_ivalue()) }
    }
    #[inline]
    fn push_to_stack(self, stack: &mut Stack) {
        stack.push(self.into_ivalue());
    }
    #[inline(always)]
    fn pop_from_stack(stack: &mut Stack) -> Option<Self> {
        stack.pop().and_then(T::from_ivalue)
    }
}

impl KernelReturn for () {
    const LEN: usize = 0;
    fn schema_types() -> &'static [&'static str] {
        &[]
    }
    #[inline(always)]
    unsafe fn write_to(self, _dst: *mut IValue) {}
    fn push_to_stack(self, _stack: &mut Stack) {}
    fn pop_from_stack(_stack: &mut Stack) -> Option<Self> {
        Some(())
    }
}

macro_rules! tuple_return {
    ($n:literal; $($t:ident),+) => {
        impl<$($t: ReturnValue),+> ReturnTypes<($($t,)+)> {
            const TUPLE: &'static [&'static str] = &[$($t::SCHEMA_TYPE),+];
        }

        impl<$($t: ReturnValue),+> KernelReturn for ($($t,)+) {
            const LEN: usize = $n;
            fn schema_types() -> &'static [&'static str] {
                ReturnTypes::<Self>::TUPLE
            }
            #[inline]
            #[allow(non_snake_case, unused_assignments)]
            unsafe fn write_to(self, mut dst: *mut IValue) {
                let ($($t,)+) = self;
                // SAFETY: guaranteed by the caller: `dst` is valid for `$n` writes, one per
                // element, and `dst` moves one slot per element.
                unsafe {
                    $(
                        dst.write($t.into_ivalue());
                        dst = dst.add(1);
                    )+
                }
            }
            #[allow(non_snake_case)]
            fn pop_from_stack(stack: &mut Stack) -> Option<Self> {
                let base = stack.len().checked_sub($n)?;
                let mut it = stack.drain(base..);
                $(let $t = $t::from_ivalue(it.next()?)?;)+
                Some(($($t,)+))
            }
        }
    };
}

tuple_return!(2; A, B);
tuple_return!(3; A, B, C);
tuple_return!(4; A, B, C, D);
tuple_return!(5; A, B, C, D, E);

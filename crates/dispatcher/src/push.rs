//! `push`: boxing several values onto a [`Stack`] at once (see Note [Pushing onto a stack]).

use crate::ivalue::{IValue, Stack};

// Note [Pushing onto a stack]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// `stack.push(IValue::Tensor(t.clone()))` builds the value before `Vec::push` tests the
// capacity, and the value must survive the growth call that test may make, so the compiler
// puts it in a stack temporary: two 8-byte stores (tag, payload), then one 16-byte load to copy
// it into the vector. A load wider than the stores it reads cannot be forwarded from the store
// buffer; the processor waits for them to reach the cache, about five nanoseconds per push on
// the development machine. A boxed call whose caller pushes two tensors that way spends more
// time in those stalls than in dispatch (`call_boxed`: 35 ns with `Vec::push`, 12 ns with
// `push`). `push` instead takes the plain values (`&Tensor`, `i64`, ...), makes room for all of
// them with one capacity test, and only then converts each, writing it straight into its slot
// as two 8-byte stores. Already-built `IValue`s can be passed too, but they pay the copy.

/// Values that [`push`] boxes onto a stack: tuples of up to twelve values convertible into
/// [`IValue`] (`&Tensor`, `Tensor`, `i64`, `f64`, `bool`, `&str`, `Scalar`, lists, `IValue`...).
pub trait PushValues {
    /// How many values.
    const LEN: usize;
    /// Converts the values and writes them to `LEN` consecutive slots from `dst`, in order.
    ///
    /// # Safety
    /// `dst` must be valid for `LEN` writes; the values written are not dropped there.
    #[doc(hidden)]
    unsafe fn write(self, dst: *mut IValue);
}

macro_rules! push_values {
    ($n:literal; $($t:ident $i:tt),+) => {
        impl<$($t: Into<IValue>),+> PushValues for ($($t,)+) {
            const LEN: usize = $n;
            #[inline(always)]
            unsafe fn write(self, dst: *mut IValue) {
                // SAFETY: guaranteed by the caller: `dst` is valid for `$n` writes.
                unsafe { $(dst.add($i).write(self.$i.into());)+ }
            }
        }
    };
}

push_values!(1; A 0);
push_values!(2; A 0, B 1);
push_values!(3; A 0, B 1, C 2);
push_values!(4; A 0, B 1, C 2, D 3);
push_values!(5; A 0, B 1, C 2, D 3, E 4);
push_values!(6; A 0, B 1, C 2, D 3, E 4, F 5);
push_values!(7; A 0, B 1, C 2, D 3, E 4, F 5, G 6);
push_values!(8; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
push_values!(9; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
push_values!(10; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
push_values!(11; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
push_values!(12; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);

/// Pushes several values onto `stack`, boxed, in order: PyTorch's `torch::jit::push`. Faster
/// than one `Vec::push` per value (Note [Pushing onto a stack]): one capacity test, and each
/// value converted straight into its slot.
///
/// ```
/// use switchboard_dispatcher::{push, IValue, Stack};
/// let mut stack = Stack::new();
/// push(&mut stack, (3i64, 0.5f64, true));
/// assert!(matches!(stack.as_slice(), [IValue::Int(3), IValue::Double(_), IValue::Bool(true)]));
/// ```
#[inline]
pub fn push<V: PushValues>(stack: &mut Stack, values: V) {
    stack.reserve(V::LEN);
    let len = stack.len();
    // SAFETY: `reserve` made room for `V::LEN` values past `len`; they are written in order and
    // counted in only once all are written (a panic in a conversion leaks the ones before it
    // rather than exposing uninitialised slots).
    unsafe {
        values.write(stack.as_mut_ptr().add(len));
        stack.set_len(len + V::LEN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_tensor::{ScalarType, Tensor};

    #[test]
    fn pushes_in_order_after_what_is_there() {
        let t = Tensor::ones(&[2], ScalarType::Float).unwrap();
        let mut stack = vec![IValue::None];
        push(
            &mut stack,
            (&t, 7i64, vec![1i64, 2], "s", IValue::Bool(false)),
        );
        push(&mut stack, (t.clone(),));
        assert_eq!(stack.len(), 7);
        assert!(matches!(&stack[1], IValue::Tensor(x) if x.is_same(&t)));
        assert!(matches!(stack[2], IValue::Int(7)));
        assert!(matches!(&stack[3], IValue::IntList(v) if v == &[1, 2]));
        assert!(matches!(&stack[4], IValue::Str(s) if s.as_str() == "s"));
        assert!(matches!(stack[5], IValue::Bool(false)));
        assert!(matches!(&stack[6], IValue::Tensor(x) if x.is_same(&t)));
        // Growth past the capacity keeps what was there.
        let mut small = Stack::with_capacity(1);
        for i in 0..20 {
            push(&mut small, (i as i64, i as f64));
        }
        assert_eq!(small.len(), 40);
        assert!(matches!(small[38], IValue::Int(19)));
    }
}

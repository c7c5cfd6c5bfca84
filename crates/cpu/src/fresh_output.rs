//! Fresh outputs that a kernel writes in full, allocated without a zero fill, and the typed
//! write access to them (Note [Fresh outputs]).

use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};

use switchboard_tensor::{Access, Device, Element, ScalarType, Tensor};

use crate::dispatch_dtype::{CpuElement, Num};
use crate::error::{invalid, Result};

// Note [Fresh outputs]
// A kernel whose output it writes entirely (a convolution, a pooling, a matrix product) gains
// nothing from a zeroed buffer: on a 10 MB activation the zero fill is a memset as long as a
// pass of the kernel's own stores, serial, before the kernel starts. `fresh_output` allocates
// such outputs uninitialised (`Tensor::empty_uninit`) and the kernel writes them through
// [`FreshData`], a `&mut [MaybeUninit<T>]` under an exclusive borrow of the storage, so that no
// `&[T]` over uninitialised memory ever exists. Soundness rests on the kernel writing every
// element before the tensor leaves it (each use says why it does, under `// SAFETY:`); on an
// error the tensor is dropped unread. A kernel that accumulates into part of its output (a
// col2im, a scatter) first writes zeros there with [`zero_fill`], in the pass that uses them
// (in cache, in parallel), rather than all at once up front.

/// A contiguous output of `shape` that the caller's kernel writes entirely: uninitialised on
/// CPU, metadata only on other devices.
///
/// # Safety
/// On CPU, every element must be written through [`FreshData`] (or raw pointers under an
/// [`Access`]) before the tensor is read or leaves the kernel; on an error it must be dropped
/// unread (Note [Fresh outputs]).
pub(crate) unsafe fn fresh_output(
    shape: &[i64],
    dtype: ScalarType,
    device: Device,
) -> Result<Tensor> {
    if device.is_cpu() {
        // SAFETY: forwarded to the caller.
        unsafe { Tensor::empty_uninit(shape, dtype) }
    } else {
        Tensor::empty_on(shape, dtype, device)
    }
}

/// The elements of a contiguous CPU tensor as `&mut [MaybeUninit<T>]`, behind an exclusive
/// borrow of its storage: the write access to a [`fresh_output`].
pub(crate) struct FreshData<'a, T> {
    slice: &'a mut [MaybeUninit<T>],
    _access: Access<'a>,
}

impl<'a, T: Element> FreshData<'a, T> {
    /// The write access to `t`. Fails for a wrong `T` or a non-contiguous tensor, or when the
    /// storage is borrowed.
    ///
    /// # Safety
    /// Nothing may store an uninitialised value (`MaybeUninit::uninit()`) through it into a
    /// tensor whose elements were initialised: only fresh outputs are written this way.
    pub(crate) unsafe fn new(t: &'a Tensor) -> Result<Self> {
        if !t.is_contiguous() || !t.is_cpu() {
            return Err(invalid(
                "internal error: a fresh output must be a contiguous CPU tensor",
            ));
        }
        let access = Access::new(&[], &[t])?;
        let ptr = t.mut_data_ptr_as::<T>()?;
        let len = t.numel() as usize;
        let slice = if len == 0 {
            &mut []
        } else {
            // SAFETY: a contiguous tensor's `numel` elements from its data pointer lie in its
            // storage, which `access` borrows exclusively for `'a`: no other reference to them
            // exists or can be made meanwhile. `MaybeUninit<T>` has `T`'s layout and has no
            // validity requirement, so uninitialised bytes are fine.
            unsafe { std::slice::from_raw_parts_mut(ptr as *mut MaybeUninit<T>, len) }
        };
        Ok(FreshData {
            slice,
            _access: access,
        })
    }
}

impl<T> Deref for FreshData<'_, T> {
    type Target = [MaybeUninit<T>];
    fn deref(&self) -> &[MaybeUninit<T>] {
        self.slice
    }
}

impl<T> DerefMut for FreshData<'_, T> {
    fn deref_mut(&mut self) -> &mut [MaybeUninit<T>] {
        self.slice
    }
}

/// Writes `value` to every element of `s` and returns it as initialised.
pub(crate) fn fill<T: Copy>(s: &mut [MaybeUninit<T>], value: T) -> &mut [T] {
    for v in s.iter_mut() {
        v.write(value);
    }
    // SAFETY: every element was just written; `MaybeUninit<T>` has `T`'s layout.
    unsafe { &mut *(s as *mut [MaybeUninit<T>] as *mut [T]) }
}

/// Zeroes `s` (see [`fill`]) and returns it as initialised.
pub(crate) fn zero_fill<T: CpuElement>(s: &mut [MaybeUninit<T>]) -> &mut [T] {
    fill(s, T::from_acc(<T::Acc as Num>::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_output_is_written_through_fresh_data() {
        // SAFETY: both elements are written below before the tensor is read.
        let t = unsafe { fresh_output(&[2], ScalarType::Float, Device::CPU) }.unwrap();
        {
            // SAFETY: a fresh output; nothing uninitialised is stored.
            let mut d = unsafe { FreshData::<f32>::new(&t) }.unwrap();
            let init = fill(&mut d, 3.0);
            init[1] = 4.0;
        }
        assert_eq!(t.to_vec::<f32>().unwrap(), [3.0, 4.0]);
    }

    #[test]
    fn fresh_data_checks_the_element_type_and_the_borrow() {
        let t = Tensor::zeros(&[2], ScalarType::Float).unwrap();
        // SAFETY: nothing is written.
        assert!(unsafe { FreshData::<f64>::new(&t) }.is_err());
        let _read = t.data::<f32>().unwrap();
        // SAFETY: nothing is written.
        assert!(unsafe { FreshData::<f32>::new(&t) }.is_err());
    }

    #[test]
    fn meta_outputs_have_no_data() {
        // SAFETY: a meta tensor has no elements to write.
        let t = unsafe { fresh_output(&[3], ScalarType::Float, Device::META) }.unwrap();
        assert!(t.device().is_meta());
    }
}

//! The [`Tensor`] handle's block: `TensorImpl`s live in recycled [`Shared`] blocks (Note
//! [Tensor blocks]), and [`WeakTensor`] is the weak handle autograd needs.

use std::fmt;

use crate::storage_block::{impl_cached, Shared, SharedWeak};
use crate::tensor::{Tensor, TensorImpl};

// Note [Tensor blocks]
// A `Tensor` is a handle to a `TensorImpl` in a `Shared` block (an `Arc` of this crate's own,
// Note [Storage blocks]) rather than a `std::sync::Arc`: an eager op on small tensors makes and
// drops a TensorImpl per output, and malloc plus free of its block was the largest single cost
// of `add` on 1-element tensors (more than the kernel or the dispatch). Freed blocks go to a
// per-thread cache from which the next tensor on that thread is taken. The impl is written in
// place into its block (`Shared::new_with`), field by field, so the ~200-byte struct is not
// built on the stack and copied. Tensors have weak handles (`WeakTensor`, as PyTorch's
// `WeakTensor` / `weak_intrusive_ptr`): autograd's `AccumulateGrad` and `retain_grad` hold
// their tensors weakly (Note [Weak handles]). The raw `Arc` is no longer part of the API;
// `use_count`, `weak_count`, `downgrade` replace what callers used it for.

// Freed tensor blocks of this thread (Note [Tensor blocks]).
impl_cached!(TensorImpl, TENSOR_BLOCKS, weak_handles: true, outline_last_drop: true);

/// A weak handle to a tensor (PyTorch's `WeakTensor`): does not keep the tensor's metadata
/// and storage alive, and gives a [`Tensor`] back while some strong handle still exists.
///
/// ```
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
/// let w = t.downgrade();
/// assert_eq!((t.use_count(), t.weak_count(), w.use_count()), (1, 1, 1));
/// assert!(w.upgrade().unwrap().is_same(&t));
/// drop(t);
/// assert!(w.expired() && w.upgrade().is_none());
/// ```
#[derive(Clone)]
pub struct WeakTensor(SharedWeak<TensorImpl>);

impl WeakTensor {
    /// The tensor, if a strong handle to it still exists (`weak_intrusive_ptr::lock`).
    #[inline]
    pub fn upgrade(&self) -> Option<Tensor> {
        self.0.upgrade().map(Tensor)
    }

    /// Number of strong handles ([`Tensor`]s) to the tensor; 0 once it was dropped.
    #[inline]
    pub fn use_count(&self) -> usize {
        self.0.strong_count()
    }

    /// Whether the tensor was dropped (no strong handle is left): upgrading fails.
    #[inline]
    pub fn expired(&self) -> bool {
        self.use_count() == 0
    }

    /// Whether two weak handles refer to the same tensor.
    #[inline]
    pub fn ptr_eq(a: &WeakTensor, b: &WeakTensor) -> bool {
        SharedWeak::ptr_eq(&a.0, &b.0)
    }
}

impl fmt::Debug for WeakTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WeakTensor(use_count={})", self.use_count())
    }
}

impl Tensor {
    /// A weak handle to this tensor (see [`WeakTensor`]).
    #[inline]
    pub fn downgrade(&self) -> WeakTensor {
        WeakTensor(Shared::downgrade(&self.0))
    }

    /// Number of strong handles to this tensor (this one included), as PyTorch's
    /// `use_count`. Racy as any count read while other threads hold handles.
    #[inline]
    pub fn use_count(&self) -> usize {
        Shared::strong_count(&self.0)
    }

    /// Number of weak handles ([`WeakTensor`]) to this tensor.
    #[inline]
    pub fn weak_count(&self) -> usize {
        Shared::weak_count(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage_block::Cached;
    use crate::{Device, ScalarType, Storage, TensorBuilder};

    fn cached() -> usize {
        // SAFETY: reading the length does not reach the cache again.
        unsafe { TensorImpl::with_cache(|c| c.len()) }.unwrap()
    }

    fn tensor() -> Tensor {
        TensorBuilder::new(Storage::zeros(Device::CPU, 4).unwrap(), ScalarType::Float)
            .build()
            .unwrap()
    }

    #[test]
    fn weak_counts_and_upgrade() {
        let t = tensor();
        assert_eq!((t.use_count(), t.weak_count()), (1, 0));
        let w = t.downgrade();
        let w2 = w.clone();
        assert!(WeakTensor::ptr_eq(&w, &w2));
        assert_eq!((t.use_count(), t.weak_count()), (1, 2));
        let u = w.upgrade().unwrap();
        assert!(u.is_same(&t));
        assert_eq!((w.use_count(), t.weak_count()), (2, 2));
        drop(w2);
        assert_eq!(t.weak_count(), 1);
        drop(u);
        let storage = t.storage().clone();
        assert_eq!(storage.use_count(), 2);
        drop(t);
        // The last strong handle dropped the impl (and its storage handle), not the block.
        assert!(w.expired());
        assert_eq!(w.use_count(), 0);
        assert!(w.upgrade().is_none());
        assert_eq!(storage.use_count(), 1);
        drop(w);
    }

    #[test]
    fn blocks_are_reused() {
        let t = tensor();
        let addr = &*t as *const TensorImpl as usize;
        let before = cached();
        drop(t);
        assert_eq!(cached(), before + 1);
        let u = tensor();
        assert_eq!(&*u as *const TensorImpl as usize, addr);
        // A weak handle keeps the block out of the cache until it goes.
        let w = u.downgrade();
        drop(u);
        assert_eq!(cached(), before);
        drop(w);
        assert_eq!(cached(), before + 1);
    }

    #[test]
    fn handles_dropped_on_other_threads() {
        let t = tensor();
        let w = t.downgrade();
        // Last strong handle dropped on another thread: the weak one keeps the block.
        std::thread::spawn(move || drop(t)).join().unwrap();
        assert!(w.expired());
        // Last weak handle dropped on another thread: that thread caches (or frees) the block.
        std::thread::spawn(move || drop(w)).join().unwrap();
        let t = tensor();
        let w = t.downgrade();
        let upgraded = std::thread::spawn(move || w.upgrade().map(|u| u.use_count()))
            .join()
            .unwrap();
        assert_eq!(upgraded, Some(2));
        assert_eq!(t.weak_count(), 0);
    }
}

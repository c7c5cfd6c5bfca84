//! [`FixedAccess`]: the borrows of a kernel with a fixed number of operands, for the hottest
//! loops (Note [Fixed accesses]).

use std::fmt;

use crate::error::Result;
use crate::storage::{borrow_error, Storage};
use crate::tensor::Tensor;

// Note [Fixed accesses]
// `Access` takes any number of tensors in slices, so it loops over them at run time, keeps
// what it holds in an array plus a spill vector, and deduplicates each storage against all
// earlier ones. An elementwise loop knows its operands at compile time: at most one written
// tensor and `R` read ones. `FixedAccess` takes exactly those, in arrays, so every loop
// unrolls and the held storages live in registers: for `out = a + b` it is a couple of
// comparisons and one compare-and-swap per distinct input storage. It gives the same
// guarantees as `Access` (Note [Storage mutability]): the written storage exclusively, the
// others shared, each storage once (a storage both written and read is held exclusively), and
// storages without data skipped.

/// The borrows a kernel holds while it writes at most one tensor and reads `R` tensors through
/// raw pointers: an [`Access`](crate::Access) with its operands fixed at compile time
/// (Note [Fixed accesses]). Released on drop.
///
/// ```
/// use switchboard_tensor::{FixedAccess, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
/// let out = a.empty_like().unwrap();
/// let access = FixedAccess::new(Some(&out), [&a, &a]).unwrap();
/// assert!(out.data::<f32>().is_err(), "the output is borrowed exclusively");
/// assert!(a.data::<f32>().is_ok(), "inputs are shared");
/// drop(access);
/// assert!(out.data::<f32>().is_ok());
/// ```
pub struct FixedAccess<'a, const R: usize> {
    /// The written storage, held exclusively.
    write: Option<&'a Storage>,
    /// The read storages held shared (`None`: no data, or already held).
    reads: [Option<&'a Storage>; R],
}

impl<'a, const R: usize> FixedAccess<'a, R> {
    /// Borrows `write`'s storage exclusively and the storages of `reads` shared. Fails without
    /// waiting if any is borrowed in a conflicting way elsewhere (releasing what it took).
    #[inline(always)]
    pub fn new(write: Option<&'a Tensor>, reads: [&'a Tensor; R]) -> Result<FixedAccess<'a, R>> {
        let mut access = FixedAccess {
            write: None,
            reads: [None; R],
        };
        if let Some(w) = write {
            let s = w.storage();
            if s.has_data() {
                if !s.acquire(true) {
                    return Err(borrow_error(true));
                }
                access.write = Some(s);
            }
        }
        for (i, t) in reads.iter().enumerate() {
            let s = t.storage();
            let held = |h: &Option<&Storage>| h.is_some_and(|h| Storage::ptr_eq(h, s));
            if !s.has_data() || held(&access.write) || access.reads[..i].iter().any(held) {
                continue;
            }
            if !s.acquire(false) {
                // Dropping `access` releases what was taken so far.
                return Err(borrow_error(false));
            }
            access.reads[i] = Some(s);
        }
        Ok(access)
    }
}

impl<const R: usize> Drop for FixedAccess<'_, R> {
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(s) = self.write {
            s.release(true);
        }
        for s in self.reads.iter().flatten() {
            s.release(false);
        }
    }
}

impl<const R: usize> fmt::Debug for FixedAccess<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FixedAccess")
            .field("write", &self.write.is_some())
            .field("reads", &self.reads.iter().flatten().count())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;
    use crate::dtype::ScalarType;

    #[test]
    fn dedups_and_conflicts() {
        let a = Tensor::zeros(&[2], ScalarType::Int).unwrap();
        let view = a.with_key_set(a.key_set());
        let b = Tensor::zeros(&[2], ScalarType::Int).unwrap();
        // In place: the output's storage is also read; held once, exclusively.
        let acc = FixedAccess::new(Some(&a), [&view, &b, &a]).unwrap();
        assert!(acc.reads[0].is_none() && acc.reads[2].is_none() && acc.reads[1].is_some());
        assert!(b.data::<i32>().is_ok() && b.data_mut::<i32>().is_err());
        assert!(view.data::<i32>().is_err());
        drop(acc);
        assert!(a.data_mut::<i32>().is_ok() && b.data_mut::<i32>().is_ok());
        // The same input twice: one shared borrow, released once.
        let acc = FixedAccess::new(None, [&b, &b]).unwrap();
        assert!(acc.reads[1].is_none());
        drop(acc);
        assert!(b.data_mut::<i32>().is_ok());
        // Meta tensors hold nothing.
        let m = Tensor::zeros_on(&[2], ScalarType::Int, Device::META).unwrap();
        let acc = FixedAccess::new(Some(&m), [&m]).unwrap();
        assert!(acc.write.is_none() && acc.reads[0].is_none());
    }

    #[test]
    fn failure_releases_what_was_taken() {
        let (a, b, c) = (
            Tensor::zeros(&[2], ScalarType::Float).unwrap(),
            Tensor::zeros(&[2], ScalarType::Float).unwrap(),
            Tensor::zeros(&[2], ScalarType::Float).unwrap(),
        );
        let w = c.data_mut::<f32>().unwrap();
        assert!(FixedAccess::new(Some(&a), [&b, &c]).is_err());
        drop(w);
        for t in [&a, &b, &c] {
            assert!(t.data_mut::<f32>().is_ok());
        }
        let r = a.data::<f32>().unwrap();
        assert!(FixedAccess::new(Some(&a), [&b]).is_err());
        assert!(FixedAccess::new(None, [&a, &b]).is_ok(), "reads share");
        drop(r);
        assert!(b.data_mut::<f32>().is_ok());
    }
}

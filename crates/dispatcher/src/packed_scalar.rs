//! `PackedScalar`: the form a `Scalar` argument travels in through typed calls.

use std::mem::{size_of, MaybeUninit};

use switchboard_tensor::Scalar;

// Note [Packed scalars]
// `Scalar` is an enum of mixed integer and float payloads. Rust passes such a 16-byte value
// through memory: the caller copies it to its stack and passes a pointer, so each hop of a call
// (handle, entry point, kernel, redispatch) copies it again and needs a stack frame for the
// copy, and a kernel that only redispatches (autograd with nothing requiring grad) cannot end in
// a jump. A struct of two integer-sized fields is passed in two registers instead. So the typed
// calling convention carries a `Scalar` as a `PackedScalar`: the scalar's 16 bytes, as they are
// in memory, reinterpreted as two words. Packing and unpacking are bit copies (two loads, or two
// stores), with no branch on the variant; a kernel that declares its parameter as `Scalar`
// receives it unpacked (the entry point unpacks it), and one that only passes it on declares it
// `PackedScalar` and never unpacks it.
//
// The words are `MaybeUninit` because a `Scalar`'s bytes include padding (a `Bool` payload is one
// byte). The only way to make a `PackedScalar` is from a `Scalar`, so its bytes are always those
// of a valid `Scalar`, which is what makes unpacking sound.

/// A [`Scalar`] in the form typed calls pass it: in two registers rather than through memory
/// (see Note [Packed scalars]). Made from a `Scalar` (`PackedScalar::new`, `From`) and turned
/// back into one with [`get`](Self::get).
///
/// A kernel may declare a `Scalar` parameter as `PackedScalar` to pass it on without unpacking:
///
/// ```
/// use switchboard_dispatcher::PackedScalar;
/// use switchboard_tensor::Scalar;
///
/// let alpha = PackedScalar::new(Scalar::Float(0.5));
/// assert_eq!(alpha.get(), Scalar::Float(0.5));
/// assert_eq!(Scalar::from(PackedScalar::from(Scalar::Int(3))), Scalar::Int(3));
/// ```
#[derive(Clone, Copy)]
// The fields are read only through `get`'s transmute.
#[allow(dead_code)]
pub struct PackedScalar(MaybeUninit<u64>, MaybeUninit<u64>);

const _: () = assert!(size_of::<Scalar>() == size_of::<PackedScalar>());
const _: () = assert!(std::mem::align_of::<Scalar>() <= std::mem::align_of::<PackedScalar>());

impl PackedScalar {
    /// Packs a scalar.
    #[inline(always)]
    pub fn new(s: Scalar) -> PackedScalar {
        // SAFETY: both types have the same size (asserted above); every byte pattern, padding
        // included, is a valid `MaybeUninit<u64>`.
        unsafe { std::mem::transmute::<Scalar, PackedScalar>(s) }
    }

    /// The scalar.
    #[inline(always)]
    pub fn get(self) -> Scalar {
        // SAFETY: a `PackedScalar` is only made by `new`, from a valid `Scalar`, and copying
        // keeps its bytes, so they are those of a valid `Scalar` (Note [Packed scalars]).
        unsafe { std::mem::transmute::<PackedScalar, Scalar>(self) }
    }
}

impl From<Scalar> for PackedScalar {
    #[inline(always)]
    fn from(s: Scalar) -> PackedScalar {
        PackedScalar::new(s)
    }
}

impl From<PackedScalar> for Scalar {
    #[inline(always)]
    fn from(p: PackedScalar) -> Scalar {
        p.get()
    }
}

impl PartialEq for PackedScalar {
    fn eq(&self, other: &PackedScalar) -> bool {
        self.get() == other.get()
    }
}

impl std::fmt::Debug for PackedScalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.get(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_variant() {
        for s in [
            Scalar::Bool(true),
            Scalar::Bool(false),
            Scalar::Int(-7),
            Scalar::Int(i64::MAX),
            Scalar::Float(2.5),
            Scalar::Float(f64::NEG_INFINITY),
        ] {
            let p = PackedScalar::new(s);
            let copied = p;
            assert_eq!(copied.get(), s);
            assert_eq!(format!("{p:?}"), format!("{s:?}"));
        }
        assert_eq!(
            PackedScalar::from(Scalar::Int(2)),
            PackedScalar::new(Scalar::Int(2))
        );
        assert_ne!(
            PackedScalar::new(Scalar::Int(2)),
            PackedScalar::new(Scalar::Float(2.0))
        );
    }
}

//! The complex element types (`complex64`, `complex128`): `num_complex`'s `Complex32` and
//! `Complex64` as [`StorageElement`]s, and [`ComplexElement`] for kernels generic over them.

use num_complex::{Complex, Complex32, Complex64};

use crate::dtype::{sealed, Element, ScalarType, StorageElement};

// Note [Complex elements]
// PyTorch's `c10::complex<T>` is two `T`s, real part first, and so is `num_complex::Complex<T>`
// (`#[repr(C)]`), so a complex storage's bytes are the same on both sides (safetensors `C64`,
// `view_as_real`). Every bit pattern of two floats is a valid complex value, so reinterpreting
// initialised bytes is sound as for the real types (Note [Element bit patterns]).
// The complex types are `StorageElement`s but not `Element`s: complex numbers have no order,
// and `Element`'s conversions (`to_i64`, `from_f64`, ...) are the real ones the real kernels
// are written with. Kernels that support complex take `ComplexElement` explicitly, as ATen's
// `AT_DISPATCH_COMPLEX_TYPES`; the others fail for complex dtypes with PyTorch's
// `"<name>" not implemented for 'ComplexFloat'` from their dispatch macros.

/// `Complex32` (`torch.complex64`) or `Complex64` (`torch.complex128`).
///
/// ```
/// use switchboard_tensor::{Complex64, ComplexElement};
/// let z = <Complex64 as ComplexElement>::from_parts(3.0, 4.0);
/// assert_eq!(z.norm(), 5.0);
/// ```
pub trait ComplexElement:
    StorageElement + num_traits::NumAssign + std::ops::Neg<Output = Self>
{
    /// The type of the parts (`f32`, `f64`).
    type Real: Element + num_traits::Float;
    /// The value from its parts.
    fn from_parts(re: Self::Real, im: Self::Real) -> Self;
    /// The real part.
    fn re(self) -> Self::Real;
    /// The imaginary part.
    fn im(self) -> Self::Real;
}

macro_rules! complex_element {
    ($($t:ty => $real:ty, $dt:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl StorageElement for $t {
            const DTYPE: ScalarType = ScalarType::$dt;
            #[inline]
            fn to_complex(self) -> Complex64 {
                Complex::new(self.re as f64, self.im as f64)
            }
            #[inline]
            fn from_complex(v: Complex64) -> Self {
                Complex::new(v.re as $real, v.im as $real)
            }
        }
        impl ComplexElement for $t {
            type Real = $real;
            #[inline]
            fn from_parts(re: $real, im: $real) -> Self {
                Complex::new(re, im)
            }
            #[inline]
            fn re(self) -> $real {
                self.re
            }
            #[inline]
            fn im(self) -> $real {
                self.im
            }
        }
    )*};
}
complex_element!(Complex32 => f32, ComplexFloat, Complex64 => f64, ComplexDouble);

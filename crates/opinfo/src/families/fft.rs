//! The FFT core: `_fft_r2c` (real to one-sided or full complex), `_fft_c2r` (one-sided complex
//! to real) and `_fft_c2c`, over one or more dims, with each normalization.

use switchboard_tensor::ScalarType::{ComplexDouble, ComplexFloat, Long};

use crate::info::{Family, Grad, OpInfo};
use crate::spec::t;
use crate::{sample, Registry};

const NO_DERIVATIVE: Grad = Grad::NotImplemented(
    "fft_r2c_backward, fft_c2r_backward and the c2c formula are not written yet",
);

fn fft(name: &'static str) -> OpInfo {
    OpInfo::new(name, Family::Linalg)
        .grad(NO_DERIVATIVE)
        .meta()
        .out()
}

/// The FFT operators.
pub fn register(r: &mut Registry) {
    r.add(fft("_fft_r2c").samples(vec![
        sample![t(&[8]), [0i64], 0i64, true],
        sample![t(&[3, 5]).f64(), [1i64], 1i64, true],
        sample![t(&[3, 5]).f64(), [0i64, 1], 2i64, false],
        sample![t(&[4, 6]).transposed(), [0i64], 0i64, true],
        sample![t(&[2, 3, 4]), [2i64, 0], 1i64, true],
        sample![t(&[0, 4]), [1i64], 0i64, true],
        sample![t(&[3]).dtype(Long), [0i64], 0i64, true].error(),
        sample![t(&[3]), [0i64], 3i64, true].error(),
        sample![t(&[3, 4]), [1i64, 1], 0i64, true].error(),
    ]));
    let c = |shape: &[i64]| t(shape).dtype(ComplexFloat);
    let cd = |shape: &[i64]| t(shape).dtype(ComplexDouble);
    r.add(fft("_fft_c2r").samples(vec![
        sample![c(&[5]), [0i64], 0i64, 8i64],
        sample![cd(&[3, 3]), [1i64], 2i64, 5i64],
        sample![cd(&[3, 3]), [0i64, 1], 1i64, 4i64],
        sample![c(&[4, 3]).transposed(), [1i64], 0i64, 7i64],
        sample![c(&[3, 4]), [1i64], 0i64, 0i64],
        sample![t(&[3, 4]), [1i64], 0i64, 6i64].error(),
        sample![c(&[3, 4]), [1i64], 0i64, -1i64].error(),
    ]));
    r.add(fft("_fft_c2c").samples(vec![
        sample![c(&[6]), [0i64], 0i64, true],
        sample![cd(&[3, 5]), [1i64], 2i64, false],
        sample![cd(&[3, 5]), [0i64, 1], 1i64, true],
        sample![c(&[4, 6]).transposed(), [0i64], 0i64, false],
        sample![c(&[2, 0]), [1i64], 0i64, true],
        sample![t(&[3]), [0i64], 0i64, true].error(),
    ]));
}

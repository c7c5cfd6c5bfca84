//! The FFT core: `_fft_r2c` (real to one-sided or full complex), `_fft_c2r` (one-sided complex
//! to real) and `_fft_c2c`, over one or more dims, with each normalization.

use switchboard_tensor::ScalarType::{ComplexDouble, ComplexFloat, Long};

use crate::info::{Family, OpInfo};
use crate::spec::t;
use crate::{sample, Registry};

fn fft(name: &'static str) -> OpInfo {
    OpInfo::new(name, Family::Linalg)
        .differentiable()
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
        sample![t(&[0, 2]), [0i64], 0i64, true].error(),
    ]));
    let c = |shape: &[i64]| t(shape).dtype(ComplexFloat);
    let cd = |shape: &[i64]| t(shape).dtype(ComplexDouble);
    r.add(fft("_fft_c2r").samples(vec![
        sample![c(&[5]), [0i64], 0i64, 8i64],
        sample![cd(&[3, 3]), [1i64], 2i64, 5i64],
        sample![cd(&[3, 3]), [0i64, 1], 1i64, 4i64],
        sample![c(&[4, 3]).transposed(), [1i64], 0i64, 5i64],
        sample![c(&[3, 4]), [1i64], 0i64, 0i64]
            .no_grad("its backward is the r2c of an empty signal, which fails (in PyTorch too)"),
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

/// The `torch.fft` composites and the complex views.
pub fn register_composites(r: &mut Registry) {
    let c = |shape: &[i64]| t(shape).dtype(ComplexFloat);
    let cd = |shape: &[i64]| t(shape).dtype(ComplexDouble);
    let composite = |name| OpInfo::new(name, Family::Linalg).differentiable();
    r.add(composite("fft_fft").samples(vec![
        sample![t(&[6])],
        sample![t(&[3, 5]).f64(), 8i64, 0i64, "ortho"],
        sample![c(&[4, 3]), 2i64; norm = "forward"],
        sample![cd(&[2, 5]); dim = 0i64],
        sample![t(&[4]).long()],
        sample![t(&[4]), 0i64].error(),
        sample![t(&[4]); norm = "bad"].error(),
        sample![t(&[])].error(),
    ]));
    r.add(composite("fft_ifft").samples(vec![
        sample![t(&[6])],
        sample![t(&[3, 5]).f64(); dim = 0i64],
        sample![c(&[4, 3]), 5i64; norm = "ortho"],
        sample![cd(&[2, 5])],
    ]));
    r.add(composite("fft_rfft").samples(vec![
        sample![t(&[6])],
        sample![t(&[3, 5]).f64(), 4i64, 0i64, "forward"],
        sample![t(&[2, 7]); n = 9i64],
        sample![c(&[4])].error(),
    ]));
    r.add(composite("fft_irfft").samples(vec![
        sample![c(&[4])],
        sample![cd(&[3, 5]), 7i64, 1i64, "ortho"],
        sample![c(&[2, 3]); n = 8i64],
        sample![t(&[5]).f64()],
        sample![c(&[1])].error(),
    ]));
    r.add(composite("fft_rfftn").samples(vec![
        sample![t(&[3, 4])],
        sample![t(&[2, 3, 4]).f64(); s = [4i64, 6], dim = [0i64, 2]],
        sample![t(&[2, 5]); s = [3i64], norm = "ortho"],
        sample![t(&[2, 3]); dim = [0i64, 0]].error(),
        sample![t(&[2, 3]); s = [2i64], dim = [0i64, 1]].error(),
    ]));
    r.add(composite("fft_irfftn").samples(vec![
        sample![c(&[3, 4])],
        sample![cd(&[2, 3, 4]); s = [4i64, 6], dim = [0i64, 2]],
        sample![c(&[2, 5]); s = [-1i64, 5], norm = "forward"],
        sample![c(&[2, 1])].error(),
    ]));
    r.add(
        OpInfo::new("view_as_real", Family::Shape)
            .differentiable()
            .samples(vec![
                sample![c(&[3, 4])],
                sample![cd(&[2, 3]).transposed()],
                sample![c(&[])],
                sample![t(&[3])].error(),
            ]),
    );
    r.add(
        OpInfo::new("view_as_complex", Family::Shape)
            .differentiable()
            .samples(vec![
                sample![t(&[3, 2])],
                sample![t(&[2, 4, 2]).f64()],
                sample![t(&[3])].error(),
                sample![t(&[2, 3]).transposed()].error(),
                sample![t(&[3, 2]).long()].error(),
            ]),
    );
    r.add(
        OpInfo::new("real", Family::Shape)
            .differentiable()
            .samples(vec![sample![c(&[3, 4])], sample![t(&[3])]]),
    );
    r.add(
        OpInfo::new("imag", Family::Shape)
            .differentiable()
            .samples(vec![
                sample![cd(&[3, 4]).transposed()],
                sample![t(&[3])].error(),
            ]),
    );
    for name in ["conj_physical", "_conj_physical"] {
        let entry = OpInfo::new(name, Family::UnaryPointwise)
            .differentiable()
            .samples(vec![
                sample![c(&[3, 4])],
                sample![cd(&[2, 3]).transposed()],
                sample![t(&[3])],
            ]);
        r.add(if name == "_conj_physical" {
            entry.meta().out()
        } else {
            entry
        });
    }
}

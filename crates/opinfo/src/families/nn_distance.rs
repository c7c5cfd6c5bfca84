//! p-norm distances: `_cdist_forward` / `cdist` between two batches of row vectors,
//! `_pdist_forward` / `pdist` between the rows of a matrix, and their backwards.

use switchboard_tensor::ScalarType::{Half, Long};

use crate::info::{Family, Grad, OpInfo};
use crate::sample::NONE;
use crate::spec::t;
use crate::{sample, Registry};

/// Differentiable once: PyTorch 2.15's backwards have no formula.
fn nn(name: &'static str) -> OpInfo {
    OpInfo::new(name, Family::Nn).grad(Grad::CheckOnce(
        "PyTorch 2.15 has no formula for _cdist_backward and _pdist_backward",
    ))
}

const NO_FORMULA: Grad = Grad::NotImplemented("PyTorch 2.15 has no formula for it either");

/// The distance operators.
pub fn register(r: &mut Registry) {
    // p = 0, 1, 2, inf and a general p; broadcast batches; the Euclidean (matrix-product)
    // form through compute_mode 1 and through more than 25 rows.
    let cdist_samples = || {
        vec![
            sample![t(&[3, 4]), t(&[2, 4]), 2.0, NONE],
            sample![t(&[3, 4]), t(&[2, 4]), 1.0, NONE],
            sample![t(&[3, 4]), t(&[5, 4]), 0.0, NONE],
            sample![t(&[3, 4]), t(&[5, 4]), f64::INFINITY, NONE],
            sample![t(&[2, 3, 4]).f64(), t(&[2, 4]).f64(), 3.0, NONE],
            sample![t(&[2, 1, 3, 2]).f64(), t(&[4, 2, 2]).f64(), 1.5, NONE],
            sample![t(&[3, 4]).f64(), t(&[2, 4]).f64(), 2.0, 1i64],
            sample![t(&[3, 4]).f64(), t(&[2, 4]).f64(), 0.5, 2i64],
            sample![t(&[27, 3]), t(&[4, 3]), 2.0, NONE],
            sample![t(&[4, 3]).transposed(), t(&[2, 3]), 2.0, 2i64],
            sample![t(&[0, 4]), t(&[2, 4]), 2.0, NONE],
            sample![t(&[3, 0]), t(&[2, 0]), 2.0, NONE].no_grad("no columns"),
            sample![t(&[3, 4]), t(&[2, 4]), -1.0, NONE].error(),
            sample![t(&[3, 4]), t(&[2, 3]), 2.0, NONE].error(),
            sample![t(&[4]), t(&[2, 4]), 2.0, NONE].error(),
            sample![t(&[3, 4]), t(&[2, 4]), 2.0, 3i64].error(),
            sample![t(&[3, 4]).dtype(Long), t(&[2, 4]).dtype(Long), 2.0, NONE].error(),
            sample![t(&[3, 4]).dtype(Half), t(&[2, 4]).dtype(Half), 2.0, NONE].error(),
            sample![t(&[3, 4]), t(&[2, 4]).f64(), 2.0, NONE].error(),
        ]
    };
    r.add(nn("_cdist_forward").samples(cdist_samples()).meta().out());
    r.add(nn("cdist").samples(cdist_samples()));
    r.add(
        OpInfo::new("_cdist_backward", Family::Nn)
            .samples(vec![
                sample![
                    t(&[3, 2]),
                    t(&[3, 4]),
                    t(&[2, 4]),
                    2.0,
                    t(&[3, 2]).range(1.0, 2.0)
                ],
                sample![
                    t(&[3, 5]).f64(),
                    t(&[3, 4]).f64(),
                    t(&[5, 4]).f64(),
                    1.0,
                    t(&[3, 5]).f64()
                ],
                sample![
                    t(&[2, 3, 2]),
                    t(&[2, 3, 4]),
                    t(&[2, 4]),
                    3.0,
                    t(&[2, 3, 2]).range(1.0, 2.0)
                ],
                sample![
                    t(&[3, 2]),
                    t(&[3, 4]),
                    t(&[2, 4]),
                    f64::INFINITY,
                    t(&[3, 2])
                ],
                sample![t(&[0, 2]), t(&[0, 4]), t(&[2, 4]), 2.0, t(&[0, 2])],
            ])
            .grad(NO_FORMULA)
            .meta()
            .out(),
    );
    let pdist_samples = || {
        vec![
            sample![t(&[4, 3])],
            sample![t(&[4, 3]), 1.0],
            sample![t(&[5, 2]), 0.0],
            sample![t(&[4, 3]), f64::INFINITY],
            sample![t(&[4, 3]).f64(), 3.0],
            sample![t(&[3, 4]).f64(), 0.5],
            sample![t(&[1, 3])],
            sample![t(&[4, 0])].no_grad("no columns"),
            sample![t(&[4, 3]).dtype(Half)].error(),
        ]
    };
    r.add(
        nn("_pdist_forward")
            .samples({
                let mut s = pdist_samples();
                s.push(sample![t(&[4, 3]).transposed()].error());
                s
            })
            .meta()
            .out(),
    );
    r.add(nn("pdist").samples({
        let mut s = pdist_samples();
        s.push(sample![t(&[4, 3]).transposed()]);
        s.push(sample![t(&[4])].error());
        s.push(sample![t(&[4, 3]), -1.0].error());
        s.push(sample![t(&[4, 3]).dtype(Long)].error());
        s
    }));
    r.add(
        OpInfo::new("_pdist_backward", Family::Nn)
            .samples(vec![
                sample![t(&[6]), t(&[4, 3]), 2.0, t(&[6]).range(1.0, 2.0)],
                sample![t(&[6]).f64(), t(&[4, 3]).f64(), 1.0, t(&[6]).f64()],
                sample![t(&[3]), t(&[3, 2]), f64::INFINITY, t(&[3])],
                sample![t(&[3]), t(&[3, 2]), 0.5, t(&[3]).range(1.0, 2.0)],
                sample![t(&[3]), t(&[3, 2]).transposed(), 2.0, t(&[3])].error(),
            ])
            .grad(NO_FORMULA)
            .meta()
            .out(),
    );
}

//! Neural-network operators, continued: reflection and replication padding and their
//! backward helpers.

use switchboard_tensor::ScalarType::{Bool, Half, Long};

use crate::info::{Family, OpInfo};
use crate::spec::t;
use crate::{sample, Registry};

fn nn(name: &'static str) -> OpInfo {
    OpInfo::new(name, Family::Nn).differentiable()
}

/// Reflection and replication padding.
pub fn register(r: &mut Registry) {
    let one = [[2i64, 1], [0, 2], [-1, 1]];
    let two = [[1i64, 1, 2, 0], [0, 2, 1, 1], [-1, 1, 0, 1]];
    let three = [[1i64, 0, 1, 1, 0, 1], [0, 1, 0, 0, 1, 1]];
    let reflect = |name: &'static str, k: usize| -> Vec<crate::Sample> {
        let (batched, single): (Vec<i64>, Vec<i64>) = match k {
            1 => (vec![2, 3, 4], vec![3, 4]),
            2 => (vec![2, 2, 3, 4], vec![2, 3, 4]),
            _ => (vec![1, 2, 2, 3, 3], vec![2, 2, 3, 3]),
        };
        let pads: Vec<Vec<i64>> = match k {
            1 => one.iter().map(|p| p.to_vec()).collect(),
            2 => two.iter().map(|p| p.to_vec()).collect(),
            _ => three.iter().map(|p| p.to_vec()).collect(),
        };
        let mut s: Vec<crate::Sample> = pads.iter().map(|p| sample![t(&batched), &p[..]]).collect();
        s.push(sample![t(&single), &pads[0][..]]);
        s.push(sample![t(&single).f64(), &pads[1][..]]);
        s.push(sample![t(&single).dtype(Half), &pads[0][..]]);
        s.push(sample![t(&single).dtype(Long), &pads[0][..]].no_grad("integer"));
        let mut zero_batch = batched.clone();
        zero_batch[0] = 0;
        s.push(sample![t(&zero_batch), &pads[0][..]]);
        let mut transposed = single.clone();
        transposed.reverse();
        s.push(sample![t(&transposed).transposed(), &pads[0][..]]);
        // Errors: the padding's length, the rank, a cropped-away dim, Bool.
        let short = vec![1i64; 2 * k - 1];
        s.push(sample![t(&batched), &short[..]].error());
        s.push(sample![t(&batched[k + 1..]), &pads[0][..]].error());
        let mut crop = vec![0i64; 2 * k];
        crop[0] = -(batched[batched.len() - 1]);
        s.push(sample![t(&batched), &crop[..]].error());
        // PyTorch's Meta kernels refuse Bool for the replication pads only.
        let bool_input = sample![t(&single).dtype(Bool), &pads[0][..]];
        s.push(if name.starts_with("reflection") {
            bool_input.error_from_kernel_dtype()
        } else {
            bool_input.error()
        });
        if name.starts_with("reflection") {
            let mut wide = vec![0i64; 2 * k];
            wide[1] = batched[batched.len() - 1];
            s.push(sample![t(&batched), &wide[..]].error());
        }
        s
    };
    for (name, k) in [
        ("reflection_pad1d", 1),
        ("reflection_pad2d", 2),
        ("reflection_pad3d", 3),
        ("replication_pad2d", 2),
        ("replication_pad3d", 3),
    ] {
        r.add(nn(name).samples(reflect(name, k)).meta().out());
    }
    // Backward: (grad_output, self, padding) with grad_output of the padded shape.
    let backward = |k: usize| match k {
        1 => vec![
            sample![t(&[2, 3, 7]), t(&[2, 3, 4]), [2i64, 1]],
            sample![t(&[3, 4]).f64(), t(&[3, 4]).f64(), [-1i64, 1]],
            sample![t(&[2, 3, 6]), t(&[2, 3, 4]), [2i64, 1]].error(),
        ],
        2 => vec![
            sample![t(&[2, 2, 5, 6]), t(&[2, 2, 3, 4]), [1i64, 1, 2, 0]],
            sample![t(&[2, 4, 4]).f64(), t(&[2, 3, 4]).f64(), [-1i64, 1, 0, 1]],
            sample![t(&[2, 2, 4, 6]), t(&[2, 2, 3, 4]), [1i64, 1, 2, 0]].error(),
        ],
        _ => vec![
            sample![
                t(&[1, 2, 3, 5, 4]),
                t(&[1, 2, 2, 3, 3]),
                [1i64, 0, 1, 1, 0, 1]
            ],
            sample![
                t(&[2, 4, 3, 4]).f64(),
                t(&[2, 2, 3, 3]).f64(),
                [0i64, 1, 0, 0, 1, 1]
            ],
            sample![
                t(&[1, 2, 3, 5, 3]),
                t(&[1, 2, 2, 3, 3]),
                [1i64, 0, 1, 1, 0, 1]
            ]
            .error(),
        ],
    };
    for (name, k) in [
        ("reflection_pad1d_backward", 1),
        ("reflection_pad2d_backward", 2),
        ("reflection_pad3d_backward", 3),
        ("replication_pad2d_backward", 2),
        ("replication_pad3d_backward", 3),
    ] {
        r.add(nn(name).samples(backward(k)).meta().out());
    }
}

//! Matrix products.

use crate::info::{Family, OpInfo, Promotion};
use crate::sample::NONE;
use crate::spec::t;
use crate::{sample, Registry};

/// The matrix products.
pub fn register(r: &mut Registry) {
    let product = |name| {
        OpInfo::new(name, Family::Linalg)
            .differentiable()
            .promotion(Promotion::Default)
    };
    r.add(
        product("mm")
            .samples(vec![
                sample![t(&[2, 3]), t(&[3, 4])],
                sample![t(&[2, 3]).transposed(), t(&[3, 4]).transposed()],
                sample![t(&[2, 3]).strided(), t(&[3, 2])],
                sample![t(&[1, 3]).f64(), t(&[3, 1]).f64()],
                sample![t(&[0, 3]), t(&[3, 2])],
                sample![t(&[2, 0]), t(&[0, 2])],
                sample![t(&[2, 3]), t(&[4, 2])].error(),
                sample![t(&[3]), t(&[3, 2])].error(),
            ])
            .meta()
            .out(),
    );
    r.add(
        product("bmm")
            .samples(vec![
                sample![t(&[2, 2, 3]), t(&[2, 3, 2])],
                sample![t(&[2, 2, 3]).transposed(), t(&[2, 3, 4])],
                sample![t(&[1, 2, 2]).f64(), t(&[1, 2, 3]).f64()],
                sample![t(&[0, 2, 3]), t(&[0, 3, 1])],
                sample![t(&[2, 2, 3]), t(&[3, 3, 2])].error(),
            ])
            .meta()
            .out(),
    );
    r.add(
        product("addmm")
            .samples(vec![
                sample![t(&[4]), t(&[2, 3]), t(&[3, 4])],
                sample![t(&[2, 4]), t(&[2, 3]), t(&[3, 4]); beta = 0.5, alpha = 2i64],
                sample![t(&[2, 1]), t(&[2, 3]).transposed(), t(&[3, 1]); beta = 0i64],
                sample![t(&[]).f64(), t(&[2, 2]).f64(), t(&[2, 2]).f64()],
                sample![t(&[3]), t(&[2, 3]), t(&[3, 4])].error(),
            ])
            .meta()
            .inplace()
            .out(),
    );
    r.add(
        product("matmul")
            .samples(vec![
                sample![t(&[3]), t(&[3])],
                sample![t(&[2, 3]), t(&[3])],
                sample![t(&[3]), t(&[3, 2])],
                sample![t(&[2, 3]), t(&[3, 2])],
                sample![t(&[2, 2, 3]), t(&[3, 2])],
                sample![t(&[3]), t(&[2, 3, 2])],
                sample![t(&[2, 1, 2, 3]), t(&[3, 3, 2])],
                sample![t(&[3, 2]).transposed(), t(&[3]).f64()].error(),
                sample![t(&[2, 3]), t(&[2])].error(),
            ])
            .out(),
    );
    r.add(
        product("linear")
            .samples(vec![
                sample![t(&[2, 3]), t(&[4, 3])],
                sample![t(&[2, 3]), t(&[4, 3]), t(&[4])],
                sample![t(&[3]), t(&[2, 3]), t(&[2])],
                sample![t(&[2, 2, 3]), t(&[4, 3]); bias = NONE],
                sample![t(&[0, 3]), t(&[2, 3]), t(&[2])],
                sample![t(&[2, 3]), t(&[4, 2])].error(),
            ])
            .out(),
    );
    let x = |s: &[i64]| t(s);
    r.add(product("einsum").samples(vec![
        sample!["ij,jk->ik", vec![x(&[2, 3]), x(&[3, 4])]],
        sample!["bij,bjk->bik", vec![x(&[2, 2, 3]), x(&[2, 3, 4])]],
        sample!["bhqd,bhkd->bhqk", vec![x(&[2, 2, 3, 4]), x(&[2, 2, 5, 4])]],
        sample!["ij->ji", vec![x(&[2, 3])]],
        sample!["ii->i", vec![x(&[3, 3])]],
        sample!["ii", vec![x(&[3, 3])]],
        sample!["i,j->ij", vec![x(&[2]), x(&[3])]],
        sample!["...ij,...jk", vec![x(&[2, 2, 3]), x(&[3, 2])]],
        sample!["i...j,j->i", vec![x(&[2, 3, 4]), x(&[4])]],
        sample!["i...->...i", vec![x(&[2, 3, 4])]],
        sample!["bA,bC", vec![x(&[3, 2]), x(&[3, 4])]],
        sample!["ij,jk,kl->il", vec![x(&[2, 3]), x(&[3, 4]), x(&[4, 2])]],
        sample!["iij->j", vec![x(&[3, 3, 2])]],
        sample!["ij,jk->ik", vec![x(&[2, 1]), x(&[3, 4])]],
        sample!["ij,ij->ij", vec![x(&[2, 3]), x(&[2, 3]).f64()]],
        sample![
            " i j , j k -> i k ",
            vec![x(&[2, 3]), x(&[3, 4]).transposed()]
        ],
        sample!["ij,kl->", vec![x(&[2, 3]), x(&[3, 4])]],
        sample!["ij,jk", vec![x(&[2, 3]), x(&[2, 3])]].error(),
        sample!["ij->k", vec![x(&[2, 3])]].error(),
        sample!["ij->ii", vec![x(&[2, 3])]].error(),
        sample!["i1->i", vec![x(&[2, 3])]].error(),
        sample!["i-->i", vec![x(&[2])]].error(),
        sample!["ijk->", vec![x(&[2, 3])]].error(),
        sample!["..i->i", vec![x(&[2])]].error(),
        sample!["i.....->i", vec![x(&[2])]].error(),
        sample!["i->i..", vec![x(&[2])]].error(),
        sample!["ij,jk->ik", vec![x(&[2, 3])]].error(),
        sample!["ij->ij", vec![x(&[2, 3]), x(&[2, 3])]].error(),
        sample!["...i,...i->...", vec![x(&[2, 3]), x(&[4, 3])]].error(),
        sample!["ii->i", vec![x(&[2, 3])]].error(),
        sample!["i,i->", vec![x(&[3]), x(&[3]).f64()]].error(),
        // A contraction order (opt_einsum's path): the pairs name operands of the current list.
        sample!["ij,jk,kl->il", vec![x(&[2, 3]), x(&[3, 4]), x(&[4, 5])]; path = [1, 2, 0, 1]],
        sample!["ij,jk,kl->il", vec![x(&[2, 3]), x(&[3, 4]), x(&[4, 5])]; path = [2, 0, 1, 0]],
        sample![
            "bij,bjk,bkl,l->bi",
            vec![x(&[2, 2, 3]), x(&[1, 3, 4]), x(&[2, 4, 5]), x(&[5])];
            path = [3, 2, 0, 1, 1, 0]
        ],
        sample!["ij,jk->", vec![x(&[2, 3]), x(&[3, 4])]; path = [1, 0]],
        sample!["ij->", vec![x(&[2, 3])]; path = [0]],
        sample!["ij->", vec![x(&[2, 3])]; path = [0, 1]].error(),
        sample!["ij,jk->ik", vec![x(&[2, 3]), x(&[3, 4])]; path = [0]].error(),
        sample!["ij,jk,kl->il", vec![x(&[2, 3]), x(&[3, 4]), x(&[4, 5])]; path = [0, -1, 0, 1]]
            .error(),
        sample!["ij,jk,kl->il", vec![x(&[2, 3]), x(&[3, 4]), x(&[4, 5])]; path = [1, 1, 0, 1]]
            .error(),
        sample!["ij,jk,kl->il", vec![x(&[2, 3]), x(&[3, 4]), x(&[4, 5])]; path = [0, 1, 0, 2]]
            .error(),
    ]));
}

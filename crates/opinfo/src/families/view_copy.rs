//! The `*_copy` forms of the views: each takes its view's samples and flags (its results are
//! new contiguous tensors, its errors the view's).

use crate::sample::Sample;
use crate::spec::t;
use crate::{sample, Registry};

/// Each view and its `*_copy` form.
const VIEW_COPIES: &[(&str, &str)] = &[
    ("view", "view_copy"),
    ("view.dtype", "view_copy.dtype"),
    ("t", "t_copy"),
    ("transpose.int", "transpose_copy.int"),
    ("permute", "permute_copy"),
    ("expand", "expand_copy"),
    ("squeeze", "squeeze_copy"),
    ("squeeze.dim", "squeeze_copy.dim"),
    ("squeeze.dims", "squeeze_copy.dims"),
    ("unsqueeze", "unsqueeze_copy"),
    ("select.int", "select_copy.int"),
    ("slice.Tensor", "slice_copy.Tensor"),
    ("as_strided", "as_strided_copy"),
    ("diagonal", "diagonal_copy"),
    ("alias", "alias_copy"),
    ("split_with_sizes", "split_with_sizes_copy"),
    ("split.Tensor", "split_copy.Tensor"),
    ("unbind.int", "unbind_copy.int"),
    ("view_as_real", "view_as_real_copy"),
    ("view_as_complex", "view_as_complex_copy"),
];

/// Adds an entry per `*_copy` operator, after the views' entries.
pub fn register(r: &mut Registry) {
    for &(view, copy) in VIEW_COPIES {
        let Some(entry) = r.entries.iter().find(|e| e.name == view) else {
            continue;
        };
        let mut entry = entry.clone();
        entry.name = copy;
        if copy == "view_copy" {
            entry = entry.samples(view_copy_samples());
        }
        r.add(entry);
    }
}

/// `view`'s samples, but where the strides cannot express the shape `view_copy` reshapes (a
/// copy) instead of failing, as PyTorch's does.
fn view_copy_samples() -> Vec<Sample> {
    vec![
        sample![t(&[2, 3, 4]), [6i64, 4]],
        sample![t(&[2, 3, 4]), [-1i64]],
        sample![t(&[]), [1i64]],
        sample![t(&[0, 3]), [3i64, 0]],
        sample![t(&[2, 6]).strided(), [2i64, 3, 2]],
        sample![t(&[3, 4]).transposed(), [12i64]],
        sample![t(&[2, 3]), [4i64, -1]].error(),
    ]
}

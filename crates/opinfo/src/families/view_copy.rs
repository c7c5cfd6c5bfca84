//! The `*_copy` forms of the views: each takes its view's samples and flags (its results are
//! new contiguous tensors, its errors the view's).

use crate::Registry;

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
];

/// Adds an entry per `*_copy` operator, after the views' entries.
pub fn register(r: &mut Registry) {
    for &(view, copy) in VIEW_COPIES {
        let Some(entry) = r.entries.iter().find(|e| e.name == view) else {
            continue;
        };
        let mut entry = entry.clone();
        entry.name = copy;
        r.add(entry);
    }
}

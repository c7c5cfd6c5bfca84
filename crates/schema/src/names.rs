//! Argument names without an allocation each.
//!
//! Note [Common argument names are static]
//! A schema's argument names are mostly the same few dozen words (`self`,
//! `other`, `out`, `dim`, `dtype` ...), and a name of its own costs an
//! allocation (and a free) per argument, a good part of a small schema's
//! parse.  Names in this table, and every one-letter name, are stored as
//! `&'static str` (an [`crate::Argument`] keeps a `Cow<'static, str>`); any
//! other name is copied.  The lookup switches on the length and the first
//! byte, which leaves one or two candidates to compare.  The table is a
//! cache, not a semantic: a name found or not prints and compares the same.

use std::borrow::Cow;

/// Every one-character identifier, so that `x` and `a` borrow a slice of it.
const LETTERS: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";

/// The name as a `Cow`, borrowed from a static table when it is a common one.
pub(crate) fn intern(name: &str) -> Cow<'static, str> {
    match common(name) {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(name.to_owned()),
    }
}

/// The static copy of a common name (Note [Common argument names are static]).
pub(crate) fn common(name: &str) -> Option<&'static str> {
    let b = name.as_bytes();
    let &first = b.first()?;
    let candidates: &[&'static str] = match (b.len(), first) {
        (1, _) => {
            let i = LETTERS.bytes().position(|c| c == first)?;
            return LETTERS.get(i..i + 1);
        }
        (2, b't') => &["to"],
        (3, b'd') => &["dim"],
        (3, b'e') => &["end", "eps"],
        (3, b'l') => &["low"],
        (3, b'm') => &["min", "max"],
        (3, b'o') => &["out", "ord"],
        (3, b's') => &["src", "std"],
        (3, b't') => &["tol"],
        (3, b'v') => &["vec"],
        (4, b'a') => &["atol"],
        (4, b'b') => &["bias", "beta"],
        (4, b'c') => &["copy"],
        (4, b'd') => &["dims", "dim0", "dim1"],
        (4, b'f') => &["from"],
        (4, b'g') => &["grad"],
        (4, b'h') => &["high"],
        (4, b'm') => &["mat2", "mask", "mat1", "mean", "mode"],
        (4, b'r') => &["rtol"],
        (4, b's') => &["self", "size", "step"],
        (4, b'v') => &["vec1", "vec2"],
        (5, b'a') => &["alpha"],
        (5, b'd') => &["dtype"],
        (5, b'i') => &["input", "index"],
        (5, b'l') => &["lower"],
        (5, b'o') => &["other"],
        (5, b's') => &["start", "scale", "sizes", "shape"],
        (5, b't') => &["train"],
        (5, b'u') => &["upper"],
        (5, b'v') => &["value"],
        (6, b'b') => &["batch1", "batch2"],
        (6, b'c') => &["chunks"],
        (6, b'd') => &["device"],
        (6, b'g') => &["groups"],
        (6, b'l') => &["layout", "length"],
        (6, b'o') => &["output", "offset"],
        (6, b'r') => &["result", "reduce"],
        (6, b's') => &["stride", "source", "sorted", "sparse"],
        (6, b't') => &["target", "tensor"],
        (6, b'u') => &["unsafe"],
        (6, b'v') => &["values"],
        (6, b'w') => &["weight"],
        (7, b'e') => &["end_dim"],
        (7, b'i') => &["indices"],
        (7, b'k') => &["keepdim"],
        (7, b'p') => &["padding"],
        (7, b'r') => &["repeats"],
        (7, b't') => &["tensors"],
        (8, b'd') => &["dilation"],
        (8, b'e') => &["exponent"],
        (8, b'm') => &["momentum"],
        (8, b't') => &["training"],
        (8, b'u') => &["unbiased"],
        (9, b'c') => &["condition", "ceil_mode"],
        (9, b'e') => &["equal_nan"],
        (9, b'g') => &["generator"],
        (9, b'r') => &["reduction"],
        (9, b's') => &["start_dim"],
        (10, b'a') => &["accumulate"],
        (10, b'c') => &["correction"],
        (10, b'd') => &["descending"],
        (10, b'f') => &["fill_value"],
        (10, b'p') => &["pin_memory"],
        (10, b's') => &["split_size"],
        (10, b't') => &["transposed"],
        (11, b'a') => &["approximate"],
        (11, b'g') => &["grad_output"],
        (11, b'k') => &["kernel_size"],
        (11, b'n') => &["num_classes"],
        (11, b'o') => &["output_mask", "output_size"],
        (11, b'p') => &["padding_idx"],
        (11, b'r') => &["running_var"],
        (12, b'c') => &["cudnn_enable"],
        (12, b'i') => &["ignore_index", "include_self"],
        (12, b'n') => &["non_blocking"],
        (12, b'r') => &["running_mean"],
        (13, b'h') => &["half_to_float"],
        (13, b'm') => &["memory_format"],
        (13, b'r') => &["rounding_mode"],
        (14, b'e') => &["exclusive_scan"],
        (14, b'o') => &["output_padding"],
        (14, b'r') => &["return_indices"],
        (14, b's') => &["storage_offset"],
        (16, b'd') => &["divisor_override"],
        (16, b'n') => &["normalized_shape"],
        (17, b'c') => &["count_include_pad"],
        (18, b's') => &["scale_grad_by_freq"],
        _ => return None,
    };
    // A byte loop: these are short strings of the same length, cheaper to
    // compare inline than through a `memcmp` call.
    candidates
        .iter()
        .copied()
        .find(|c| c.bytes().zip(b).all(|(x, y)| x == *y))
}

/// The names of the table, for the tests.
#[cfg(test)]
pub(crate) const COMMON: &[&str] = &[
    "self",
    "other",
    "out",
    "dim",
    "dtype",
    "alpha",
    "device",
    "layout",
    "pin_memory",
    "weight",
    "grad_output",
    "keepdim",
    "size",
    "input",
    "stride",
    "memory_format",
    "exponent",
    "mat2",
    "bias",
    "padding",
    "dilation",
    "value",
    "target",
    "reduction",
    "mask",
    "min",
    "max",
    "index",
    "approximate",
    "condition",
    "groups",
    "output",
    "ignore_index",
    "start",
    "end",
    "non_blocking",
    "generator",
    "rounding_mode",
    "mat1",
    "beta",
    "kernel_size",
    "ceil_mode",
    "indices",
    "step",
    "tensors",
    "unbiased",
    "transposed",
    "output_padding",
    "output_mask",
    "eps",
    "mean",
    "src",
    "copy",
    "correction",
    "result",
    "grad",
    "scale",
    "std",
    "train",
    "vec",
    "values",
    "source",
    "sizes",
    "offset",
    "storage_offset",
    "tensor",
    "from",
    "to",
    "low",
    "high",
    "descending",
    "sorted",
    "dims",
    "dim0",
    "dim1",
    "start_dim",
    "end_dim",
    "split_size",
    "chunks",
    "tol",
    "atol",
    "rtol",
    "equal_nan",
    "ord",
    "upper",
    "lower",
    "shape",
    "batch1",
    "batch2",
    "vec1",
    "vec2",
    "momentum",
    "running_mean",
    "running_var",
    "training",
    "cudnn_enable",
    "half_to_float",
    "padding_idx",
    "scale_grad_by_freq",
    "sparse",
    "normalized_shape",
    "output_size",
    "count_include_pad",
    "divisor_override",
    "return_indices",
    "num_classes",
    "exclusive_scan",
    "accumulate",
    "unsafe",
    "include_self",
    "reduce",
    "fill_value",
    "length",
    "repeats",
    "mode",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_common_name_is_found() {
        for name in COMMON {
            assert_eq!(common(name), Some(*name));
            assert!(matches!(intern(name), Cow::Borrowed(n) if n == *name));
        }
        for c in LETTERS.chars() {
            let s = c.to_string();
            assert_eq!(common(&s), Some(s.as_str()));
        }
    }

    #[test]
    fn other_names_are_copied() {
        for name in ["", "selff", "sel", "Self", "é", "1", "out_", "grad_outpu"] {
            assert_eq!(common(name), None, "{name}");
            assert_eq!(intern(name), name);
        }
    }
}

//! `Tag`: the labels PyTorch attaches to operators (`at::Tag`, declared in
//! `aten/src/ATen/native/tags.yaml`).

use std::fmt;
use std::str::FromStr;

// Note [Operator tags]
// PyTorch declares the tags an operator may carry in tags.yaml and gives them to the operator
// when it is defined: `tags:` in native_functions.yaml (torchgen passes them to `m.def`), the
// `m.def(schema, {at::Tag::pointwise})` overload of torch/library.h, `torch.library.define(...,
// tags=...)`. They are fixed at def time: the only way to change them is to deregister the
// definition and define the operator again. Compilers and layers read them (`hasTag`) to learn
// what a schema cannot say: the output shape depends on the data (`dynamic_output_shape`), the
// results are random (`nondeterministic_seeded`), the operator is elementwise (`pointwise`).
// The enum lives here, beside the schema language, so that the code generator (which depends on
// this crate only) can check the names in the YAML file when it runs; the dispatcher stores the
// tags with the operator's schema record, away from the dispatch table (reading them is not on
// the call path). The variants are in PyTorch's order (`int(torch.Tag.core) == 0`, ...), which
// is the alphabetical order of the names.

/// A tag of an operator (`at::Tag`), written in `snake_case` as in PyTorch's tags.yaml.
///
/// ```
/// use switchboard_schema::Tag;
///
/// let t: Tag = "dynamic_output_shape".parse()?;
/// assert_eq!(t, Tag::DynamicOutputShape);
/// assert_eq!(t.to_string(), "dynamic_output_shape");
/// assert_eq!(Tag::ALL.len(), 20);
///
/// let err = Tag::parse_for("aten::nonzero", "dynamic_shape").unwrap_err();
/// assert!(err.to_string().starts_with("unknown tag `dynamic_shape` for operator aten::nonzero"));
/// # Ok::<(), switchboard_schema::UnknownTag>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tag {
    /// In the core ATen opset: functional operators that remain after decomposition.
    Core,
    /// Does not support CUDA graphs (Inductor splits the graph around it).
    CudagraphUnsafe,
    /// Has a non-tensor output whose value depends on the data of its tensor inputs.
    DataDependentOutput,
    /// Its output's shape depends on the data of its tensor inputs.
    DynamicOutputShape,
    /// A custom operator whose inputs' strides the compiler may change.
    FlexibleLayout,
    /// Written by the code generator from another operator's `autogen:`.
    Generated,
    /// Mutates its first argument and returns it.
    Inplace,
    /// Modifies only the metadata of a tensor in place (`transpose_`, `squeeze_`).
    InplaceView,
    /// Functional or not depending on its inputs (composite operators that may alias).
    MaybeAliasingOrMutating,
    /// Needs contiguous tensors.
    NeedsContiguousStrides,
    /// Needs tensors with the strides observed in eager mode.
    NeedsExactStrides,
    /// Needs tensors with the stride order observed in eager mode.
    NeedsFixedStrideOrder,
    /// Results may differ bitwise between runs on identical inputs.
    NondeterministicBitwise,
    /// Random: results differ between runs unless the generator is reseeded.
    NondeterministicSeeded,
    /// Has out semantics: writes its mutable arguments only and returns them.
    Out,
    /// Deprecated, does nothing (use `out`).
    OutVariant,
    /// Elementwise: each output element depends on the matching input elements only.
    Pointwise,
    /// Guaranteed to work with the PT2 compilation APIs (every `aten` operator has it).
    Pt2CompliantTag,
    /// Reduces over one or more dimensions (`sum`, `max`, ...).
    Reduction,
    /// The `_copy` variant of a view operator (`view_copy`, `transpose_copy`).
    ViewCopy,
}

impl Tag {
    /// Every tag, in PyTorch's order.
    pub const ALL: [Tag; 20] = [
        Tag::Core,
        Tag::CudagraphUnsafe,
        Tag::DataDependentOutput,
        Tag::DynamicOutputShape,
        Tag::FlexibleLayout,
        Tag::Generated,
        Tag::Inplace,
        Tag::InplaceView,
        Tag::MaybeAliasingOrMutating,
        Tag::NeedsContiguousStrides,
        Tag::NeedsExactStrides,
        Tag::NeedsFixedStrideOrder,
        Tag::NondeterministicBitwise,
        Tag::NondeterministicSeeded,
        Tag::Out,
        Tag::OutVariant,
        Tag::Pointwise,
        Tag::Pt2CompliantTag,
        Tag::Reduction,
        Tag::ViewCopy,
    ];

    /// The tag's name in tags.yaml (`dynamic_output_shape`).
    pub fn name(self) -> &'static str {
        match self {
            Tag::Core => "core",
            Tag::CudagraphUnsafe => "cudagraph_unsafe",
            Tag::DataDependentOutput => "data_dependent_output",
            Tag::DynamicOutputShape => "dynamic_output_shape",
            Tag::FlexibleLayout => "flexible_layout",
            Tag::Generated => "generated",
            Tag::Inplace => "inplace",
            Tag::InplaceView => "inplace_view",
            Tag::MaybeAliasingOrMutating => "maybe_aliasing_or_mutating",
            Tag::NeedsContiguousStrides => "needs_contiguous_strides",
            Tag::NeedsExactStrides => "needs_exact_strides",
            Tag::NeedsFixedStrideOrder => "needs_fixed_stride_order",
            Tag::NondeterministicBitwise => "nondeterministic_bitwise",
            Tag::NondeterministicSeeded => "nondeterministic_seeded",
            Tag::Out => "out",
            Tag::OutVariant => "out_variant",
            Tag::Pointwise => "pointwise",
            Tag::Pt2CompliantTag => "pt2_compliant_tag",
            Tag::Reduction => "reduction",
            Tag::ViewCopy => "view_copy",
        }
    }

    /// The tag named `name`, if tags.yaml declares it.
    pub fn from_name(name: &str) -> Option<Tag> {
        Tag::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Parses the tag `name` given to `operator`; the error names both.
    pub fn parse_for(operator: &str, name: &str) -> Result<Tag, UnknownTag> {
        Tag::from_name(name).ok_or_else(|| UnknownTag {
            tag: name.to_owned(),
            operator: Some(operator.to_owned()),
        })
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Tag {
    type Err = UnknownTag;

    fn from_str(s: &str) -> Result<Tag, UnknownTag> {
        Tag::from_name(s).ok_or_else(|| UnknownTag {
            tag: s.to_owned(),
            operator: None,
        })
    }
}

/// A tag name tags.yaml does not declare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownTag {
    /// The name given.
    pub tag: String,
    /// The operator it was given to, when known.
    pub operator: Option<String>,
}

impl fmt::Display for UnknownTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown tag `{}`", self.tag)?;
        if let Some(op) = &self.operator {
            write!(f, " for operator {op}")?;
        }
        f.write_str(" (the tags are: ")?;
        for (i, t) in Tag::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(t.name())?;
        }
        f.write_str(")")
    }
}

impl std::error::Error for UnknownTag {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_in_pytorch_order() {
        for (i, t) in Tag::ALL.into_iter().enumerate() {
            assert_eq!(t.name().parse::<Tag>(), Ok(t));
            assert_eq!(t.to_string(), t.name());
            if i > 0 {
                // PyTorch numbers the tags in the alphabetical order of their names.
                assert!(Tag::ALL[i - 1].name() < t.name());
                assert!(Tag::ALL[i - 1] < t);
            }
        }
    }

    #[test]
    fn unknown_names_are_errors_naming_tag_and_operator() {
        let e = "Pointwise".parse::<Tag>().unwrap_err();
        assert_eq!(e.tag, "Pointwise");
        assert!(e
            .to_string()
            .starts_with("unknown tag `Pointwise` (the tags are: core, "));
        let e = Tag::parse_for("myops::f", "").unwrap_err();
        assert!(e
            .to_string()
            .starts_with("unknown tag `` for operator myops::f (the tags are: "));
        assert!(e.to_string().ends_with("reduction, view_copy)"));
    }
}

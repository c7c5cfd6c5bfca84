//! Operator tags (`at::Tag`): given at def time, read through the operator handle
//! (Note [Operator tags] in switchboard-schema).

use switchboard_dispatcher::{
    library, Dispatcher, KernelFunction, Library, LibraryKind, OperatorName, Result, Tag,
};
use switchboard_keys::DispatchKey;
use switchboard_tensor::Tensor;

fn identity(x: &Tensor) -> Result<Tensor> {
    Ok(x.clone())
}

#[test]
fn tags_are_kept_in_the_order_given() -> Result<()> {
    let d = Dispatcher::new();
    let mut lib = Library::new(&d, LibraryKind::Def, "tagged", None)?;
    // torchgen sorts; m.def keeps whatever vector it gets, duplicates included.
    let tags = [Tag::Pointwise, Tag::Core, Tag::Pointwise];
    lib.def_with_tags("f(Tensor x) -> Tensor", &tags)?;
    let op = d.find_schema_or_throw("tagged::f")?;
    assert_eq!(op.tags(), tags);
    assert!(op.has_tag(Tag::Core));
    assert!(!op.has_tag(Tag::ViewCopy));
    Ok(())
}

#[test]
fn an_operator_defined_without_tags_has_none() -> Result<()> {
    let d = Dispatcher::new();
    let mut lib = Library::new(&d, LibraryKind::Def, "tagged", None)?;
    lib.def("g(Tensor x) -> Tensor")?;
    lib.def_legacy("h(Tensor x) -> Tensor")?;
    lib.def_with_kernel(
        "k",
        Some(DispatchKey::CPU),
        KernelFunction::from_fn(identity),
        None,
    )?;
    for name in ["tagged::g", "tagged::h", "tagged::k"] {
        let op = d.find_schema_or_throw(name)?;
        assert!(op.tags().is_empty(), "{name}");
        assert!(Tag::ALL.iter().all(|t| !op.has_tag(*t)), "{name}");
    }
    Ok(())
}

#[test]
fn a_second_def_is_an_error_and_keeps_the_first_tags() -> Result<()> {
    let d = Dispatcher::new();
    let mut lib = Library::new(&d, LibraryKind::Def, "tagged", None)?;
    lib.def_with_tags("f(Tensor x) -> Tensor", &[Tag::Core])?;
    let mut frag = Library::new(&d, LibraryKind::Fragment, "tagged", None)?;
    let err = frag
        .def_with_tags("f(Tensor x) -> Tensor", &[Tag::NondeterministicSeeded])
        .unwrap_err();
    assert!(err
        .to_string()
        .contains("with the same name and overload name multiple times"));
    let op = d.find_schema_or_throw("tagged::f")?;
    assert_eq!(op.tags(), [Tag::Core]);
    Ok(())
}

#[test]
fn tags_go_with_the_definition() -> Result<()> {
    let d = Dispatcher::new();
    let mut impls = Library::new(&d, LibraryKind::Impl, "tagged", Some(DispatchKey::CPU))?;
    impls.impl_("f", None, KernelFunction::from_fn(identity))?;
    // The kernel keeps the operator alive without a schema: no schema, no tags.
    let op = d
        .find_op(&OperatorName::parse("tagged::f").unwrap())
        .expect("the impl created the operator");
    assert!(op.tags().is_empty());

    let mut lib = Library::new(&d, LibraryKind::Def, "tagged", None)?;
    lib.def_with_tags("f(Tensor x) -> Tensor", &[Tag::DynamicOutputShape])?;
    assert!(op.has_tag(Tag::DynamicOutputShape));
    drop(lib);
    assert!(!op.has_tag(Tag::DynamicOutputShape));

    // Defined again (here by a fragment): the new definition's tags, and only them.
    let mut frag = Library::new(&d, LibraryKind::Fragment, "tagged", None)?;
    frag.def_with_tags("f(Tensor x) -> Tensor", &[Tag::DataDependentOutput])?;
    assert_eq!(op.tags(), [Tag::DataDependentOutput]);
    Ok(())
}

#[test]
fn unknown_tag_names_are_errors_naming_the_tag_and_the_operator() -> Result<()> {
    let d = Dispatcher::new();
    let mut lib = Library::new(&d, LibraryKind::Def, "tagged", None)?;
    let err = lib
        .def_with_tag_names(
            "f.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)",
            &["out", "outt"],
        )
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("unknown tag `outt` for operator tagged::f.out (the tags are: core, "),
        "{msg}"
    );
    assert!(
        msg.contains("(Error occurred while processing TORCH_LIBRARY block"),
        "{msg}"
    );
    assert!(d.find_schema("tagged::f.out").is_none());

    lib.def_with_tag_names("f.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)", &["out"])?;
    assert_eq!(d.find_schema_or_throw("tagged::f.out")?.tags(), [Tag::Out]);
    Ok(())
}

#[test]
fn an_impl_library_cannot_define_tagged_operators() -> Result<()> {
    let d = Dispatcher::new();
    let mut lib = Library::new(&d, LibraryKind::Impl, "tagged", Some(DispatchKey::CPU))?;
    let err = lib
        .def_with_tags("f(Tensor x) -> Tensor", &[Tag::Core])
        .unwrap_err();
    assert!(err
        .to_string()
        .contains("Cannot define an operator inside of a TORCH_LIBRARY_IMPL block"));
    Ok(())
}

library!(DEF tagged_static, |lib| {
    lib.def_with_tags("noisy(Tensor x) -> Tensor", &[Tag::NondeterministicSeeded])?;
    Ok(())
});

#[test]
fn start_up_libraries_give_tags_too() -> Result<()> {
    let op = Dispatcher::global().find_schema_or_throw("tagged_static::noisy")?;
    assert_eq!(op.tags(), [Tag::NondeterministicSeeded]);
    Ok(())
}

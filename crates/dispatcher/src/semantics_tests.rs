//! `OperatorSemantics` of PyTorch's schemas, and the functional counterpart lookup.

use switchboard_keys::DispatchKey;
use switchboard_schema::{FunctionSchema, OperatorName, Tag};

use crate::semantics::{OperatorSemantics, SchemaKind};
use crate::{Dispatcher, KernelFunction, KernelKind, Library, LibraryKind, Provenance};

fn semantics(schema: &str, tags: &[Tag]) -> OperatorSemantics {
    OperatorSemantics::of(&FunctionSchema::parse(schema).unwrap(), tags)
}

#[test]
fn functional() {
    let s = semantics(
        "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
        &[Tag::Core, Tag::Pointwise],
    );
    assert_eq!(s.kind, SchemaKind::Functional);
    assert!(s.written.is_empty() && !s.is_mutating());
    assert_eq!(&*s.return_aliases, &[None]);
    assert!(!s.is_view && !s.returns_only_views());
    assert!(s.is_pure && !s.is_random && !s.is_data_dependent);
}

#[test]
fn inplace() {
    let s = semantics(
        "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
        &[],
    );
    assert_eq!(s.kind, SchemaKind::Inplace);
    assert_eq!(&*s.written, &[0]);
    assert_eq!(&*s.return_aliases, &[Some(0)]);
    assert_eq!(&*s.return_writes, &[true]);
    assert!(!s.is_view && !s.returns_only_views() && !s.is_pure);
    let dunder = semantics(
        "aten::__iand__.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)",
        &[],
    );
    assert_eq!(dunder.kind, SchemaKind::Inplace);
}

#[test]
fn out_with_several_outputs() {
    let s = semantics(
        "aten::max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, \
         Tensor(b!) max_values) -> (Tensor(a!) values, Tensor(b!) indices)",
        &[],
    );
    assert_eq!(s.kind, SchemaKind::Out);
    assert_eq!(&*s.written, &[3, 4]);
    assert_eq!(&*s.return_aliases, &[Some(3), Some(4)]);
    assert_eq!(&*s.return_writes, &[true, true]);
    assert_eq!(&*s.return_views, &[false, false]);
    assert!(!s.is_pure);
}

#[test]
fn views() {
    let s = semantics(
        "aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)",
        &[],
    );
    assert_eq!(s.kind, SchemaKind::Functional);
    assert!(s.is_view && s.returns_only_views() && s.is_pure);
    assert_eq!(&*s.return_aliases, &[Some(0)]);
    let split = semantics(
        "aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]",
        &[],
    );
    // The list's items are views of `self`; the list itself aliases no argument.
    assert!(split.is_view);
    assert_eq!(&*split.return_views, &[true]);
    assert_eq!(&*split.return_aliases, &[None]);
    let viewed =
        |schema: &str| OperatorSemantics::viewed_argument(&FunctionSchema::parse(schema).unwrap());
    assert_eq!(
        viewed(
            "aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]"
        ),
        Some(0)
    );
    assert_eq!(
        viewed("aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)"),
        Some(0)
    );
    assert_eq!(
        viewed("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"),
        None
    );
}

#[test]
fn written_lists_and_mutable_non_self_arguments() {
    let s = semantics(
        "aten::_foreach_add_.List(Tensor(a!)[] self, Tensor[] other, *, Scalar alpha=1) -> ()",
        &[],
    );
    assert_eq!(s.kind, SchemaKind::Inplace);
    assert_eq!(&*s.written, &[0]);
    assert!(s.return_aliases.is_empty() && !s.returns_only_views());
    let bn = semantics(
        "aten::_native_batch_norm_legit(Tensor input, Tensor? weight, Tensor? bias, \
         Tensor(a!) running_mean, Tensor(b!) running_var, bool training, float momentum, \
         float eps) -> (Tensor, Tensor, Tensor)",
        &[],
    );
    assert_eq!(bn.kind, SchemaKind::Mutable);
    assert_eq!(&*bn.written, &[3, 4]);
    assert_eq!(&*bn.return_aliases, &[None, None, None]);
    assert!(!bn.is_pure);
}

#[test]
fn random_and_data_dependent() {
    let tagged = semantics(
        "aten::rand(SymInt[] size, *, ScalarType? dtype=None) -> Tensor",
        &[Tag::NondeterministicSeeded],
    );
    assert!(tagged.is_random && !tagged.is_pure);
    let generator = semantics(
        "myops::sample(Tensor self, *, Generator? generator=None) -> Tensor",
        &[],
    );
    assert!(generator.is_random && !generator.is_pure);
    let empty = semantics("aten::empty_like(Tensor self) -> Tensor", &[]);
    assert!(!empty.is_random && !empty.is_pure);
    let nonzero = semantics(
        "aten::nonzero(Tensor self) -> Tensor",
        &[Tag::DynamicOutputShape],
    );
    assert!(nonzero.is_data_dependent && nonzero.is_pure);
    let item = semantics(
        "aten::_local_scalar_dense(Tensor self) -> Scalar",
        &[Tag::DataDependentOutput],
    );
    assert!(item.is_data_dependent);
}

fn name(s: &str) -> OperatorName {
    OperatorName::parse(s).unwrap()
}

#[test]
fn functional_counterpart_by_torchgen_rules() {
    let d = Dispatcher::new();
    let mut lib = Library::new(&d, LibraryKind::Def, "myops", None).unwrap();
    // The in-place and out= overloads are defined first: the counterpart is found later.
    lib.def("add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)")
        .unwrap();
    lib.def("add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)")
        .unwrap();
    lib.def("bn(Tensor input, Tensor(a!) running_mean) -> Tensor")
        .unwrap();
    let inplace = d.find_op(&name("myops::add_.Tensor")).unwrap();
    assert!(d.functional_counterpart(&inplace).is_none());
    lib.def("add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor")
        .unwrap();
    lib.def("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
        .unwrap();
    lib.def("bn_functional(Tensor input, Tensor running_mean) -> (Tensor, Tensor)")
        .unwrap();
    let functional = d.find_op(&name("myops::add.Tensor")).unwrap();
    let found = d.functional_counterpart(&inplace).unwrap();
    assert!(found.ptr_eq(&functional), "{:?}", found.name());
    let out = d.find_op(&name("myops::add.out")).unwrap();
    assert!(d.functional_counterpart(&out).unwrap().ptr_eq(&functional));
    // The other way: the in-place form of the functional overload.
    assert!(d.inplace_form(&functional).unwrap().ptr_eq(&inplace));
    let scalar = d.find_op(&name("myops::add.Scalar")).unwrap();
    assert!(d.inplace_form(&scalar).is_none());
    assert!(d.inplace_form(&inplace).is_none());
    assert!(d.functional_counterpart(&functional).is_none());
    // A factory's out= overload has no TensorOptions (torchgen drops them from signatures).
    lib.def("full.out(SymInt[] size, Scalar fill_value, *, Tensor(a!) out) -> Tensor(a!)")
        .unwrap();
    lib.def(
        "full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, \
         Device? device=None, bool? pin_memory=None) -> Tensor",
    )
    .unwrap();
    let full_out = d.find_op(&name("myops::full.out")).unwrap();
    let full = d.find_op(&name("myops::full")).unwrap();
    assert!(d.functional_counterpart(&full_out).unwrap().ptr_eq(&full));
    let bn = d.find_op(&name("myops::bn")).unwrap();
    let bn_functional = d.find_op(&name("myops::bn_functional")).unwrap();
    assert!(d
        .functional_counterpart(&bn)
        .unwrap()
        .ptr_eq(&bn_functional));
}

#[test]
fn a_remembered_counterpart_goes_with_its_schema() {
    // Note [Functional counterparts remembered]: the answer is kept until a schema is defined
    // or removed.
    let d = Dispatcher::new();
    let mut lib = Library::new(&d, LibraryKind::Def, "myops", None).unwrap();
    lib.def("relu_(Tensor(a!) self) -> Tensor(a!)").unwrap();
    let inplace = d.find_op(&name("myops::relu_")).unwrap();
    let mut fragment = Library::new(&d, LibraryKind::Fragment, "myops", None).unwrap();
    fragment.def("relu(Tensor self) -> Tensor").unwrap();
    let functional = d.find_op(&name("myops::relu")).unwrap();
    for _ in 0..2 {
        assert!(d
            .functional_counterpart(&inplace)
            .unwrap()
            .ptr_eq(&functional));
    }
    drop(fragment);
    assert!(d.functional_counterpart(&inplace).is_none());
}

fn identity(x: &switchboard_tensor::Tensor) -> crate::Result<switchboard_tensor::Tensor> {
    Ok(x.clone())
}

#[test]
fn kernel_origin_is_an_enum() {
    let d = Dispatcher::new();
    let mut lib = Library::new(&d, LibraryKind::Def, "myops", None).unwrap();
    lib.def("f(Tensor x) -> Tensor").unwrap();
    lib.def("g(Tensor x) -> Tensor").unwrap();
    lib.impl_(
        "f",
        Some(DispatchKey::CPU),
        KernelFunction::from_fn(identity),
    )
    .unwrap();
    lib.impl_("g", None, KernelFunction::from_fn(identity))
        .unwrap();
    lib.impl_("f", Some(DispatchKey::Meta), KernelFunction::fallthrough())
        .unwrap();
    let f = d.find_op(&name("myops::f")).unwrap();
    let g = d.find_op(&name("myops::g")).unwrap();
    let cpu = d.kernel_origin(&f, DispatchKey::CPU);
    assert_eq!(cpu.provenance, Provenance::Kernel);
    assert!(cpu.is_operator_kernel());
    let meta = d.kernel_origin(&f, DispatchKey::Meta);
    assert_eq!(meta.kind, KernelKind::Fallthrough);
    assert!(!meta.is_operator_kernel());
    let lazy = d.kernel_origin(&f, DispatchKey::Lazy);
    assert_eq!(lazy.provenance, Provenance::Missing);
    assert!(!lazy.is_operator_kernel());
    let math = d.kernel_origin(&g, DispatchKey::Meta);
    assert_eq!(math.provenance, Provenance::Math);
    assert!(math.is_operator_kernel());
}

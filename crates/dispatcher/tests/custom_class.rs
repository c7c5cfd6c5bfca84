//! Objects of custom classes as boxed values (Note [Custom class objects]): typed kernels
//! taking `&Arc<T>` and returning `Arc<T>`, called typed and boxed; the inferred schema type is
//! the class's qualified name; an object of another class is a type error.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use switchboard_dispatcher::*;
use switchboard_keys::{DispatchKey as K, DispatchKeySet};
use switchboard_tensor::{ScalarType, Tensor};

/// A counter object, shared by whoever holds it.
struct Counter(AtomicI64);
impl CustomClass for Counter {
    const QUALIFIED_NAME: &'static str = "__torch__.torch.classes.objtest.Counter";
}

struct Other;
impl CustomClass for Other {
    const QUALIFIED_NAME: &'static str = "__torch__.torch.classes.objtest.Other";
}

fn dispatcher() -> Dispatcher {
    let d = Dispatcher::with_builtin_fallbacks();
    d.register_fallback(K::Autograd, KernelFunction::fallthrough(), "test")
        .unwrap()
        .leak();
    d
}

fn setup() -> (Dispatcher, Library) {
    switchboard_schema::register_custom_class("objtest", "Counter").ok();
    switchboard_schema::register_custom_class("objtest", "Other").ok();
    let d = dispatcher();
    let mut l = Library::new(&d, LibraryKind::Def, "objtest", None).unwrap();
    l.def(
        "bump(Tensor t, __torch__.torch.classes.objtest.Counter c, int by) \
         -> __torch__.torch.classes.objtest.Counter",
    )
    .unwrap();
    l.impl_(
        "bump",
        Some(K::CPU),
        KernelFunction::from_fn(|_t: &Tensor, c: &Arc<Counter>, by: i64| {
            c.0.fetch_add(by, Ordering::Relaxed);
            Ok(Arc::clone(c))
        }),
    )
    .unwrap();
    (d, l)
}

fn cpu_tensor() -> Tensor {
    Tensor::zeros(&[2], ScalarType::Float)
        .unwrap()
        .with_key_set(DispatchKeySet::from_key(K::CPU))
}

#[test]
fn an_ivalue_stays_two_words() {
    assert_eq!(std::mem::size_of::<IValue>(), 16);
}

#[test]
fn typed_and_boxed_calls_pass_and_return_the_object() {
    let (d, _l) = setup();
    let op = d.find_schema_or_throw("objtest::bump").unwrap();
    let counter = Arc::new(Counter(AtomicI64::new(0)));

    let typed: TypedOperatorHandle<(Tensor, Arc<Counter>, i64), Arc<Counter>> = op.typed().unwrap();
    let back = typed.call((&cpu_tensor(), &counter, 2)).unwrap();
    assert!(Arc::ptr_eq(&back, &counter), "the same object, shared");

    let mut stack: Stack = vec![
        cpu_tensor().into(),
        IValue::Object(Object::new(Arc::clone(&counter))),
        IValue::Int(3),
    ];
    op.call_boxed(&mut stack).unwrap();
    let [IValue::Object(o)] = &stack[..] else {
        panic!("{stack:?}")
    };
    assert_eq!(o.qualified_name(), Counter::QUALIFIED_NAME);
    assert!(Arc::ptr_eq(o.downcast::<Counter>().unwrap(), &counter));
    assert!(o.downcast::<Other>().is_none());
    assert_eq!(counter.0.load(Ordering::Relaxed), 5);
    assert_eq!(
        stack[0].to_string(),
        "<__torch__.torch.classes.objtest.Counter object>"
    );
}

#[test]
fn an_object_of_another_class_is_a_type_error() {
    let (d, _l) = setup();
    let op = d.find_schema_or_throw("objtest::bump").unwrap();
    let mut stack: Stack = vec![
        cpu_tensor().into(),
        IValue::Object(Object::new(Arc::new(Other))),
        IValue::Int(1),
    ];
    let e = op.call_boxed(&mut stack).unwrap_err().to_string();
    assert!(
        e.contains("__torch__.torch.classes.objtest.Counter")
            && e.contains("__torch__.torch.classes.objtest.Other"),
        "{e}"
    );
}

#[test]
fn the_inferred_schema_names_the_class() {
    let (d, mut l) = setup();
    // A kernel taking another class does not fit the schema.
    l.def("take(__torch__.torch.classes.objtest.Counter c) -> ()")
        .unwrap();
    let e = l
        .impl_(
            "take",
            Some(K::CPU),
            KernelFunction::from_fn(|_o: &Arc<Other>| Ok(())),
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "Type mismatch in argument 1: __torch__.torch.classes.objtest.Counter vs \
             __torch__.torch.classes.objtest.Other"
        ),
        "{e}"
    );
    drop(d);
}

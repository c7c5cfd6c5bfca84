//! The boxed calling convention: typed kernels called boxed with every argument and return kind
//! (Note [Boxed trampolines]), argument errors, boxed fallbacks that redispatch, and typed calls
//! boxing onto the reused per-thread stack, nested (Note [Reused boxing stacks]).
//!
//! Small enough to run under Miri (see the README's "Checks").

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use switchboard_dispatcher::*;
use switchboard_keys::{DispatchKey as K, DispatchKeySet};
use switchboard_tensor::{
    Device, Generator, Layout, MemoryFormat, Scalar, ScalarType, Storage, Tensor,
};

fn cpu_tensor() -> Tensor {
    Tensor::zeros(&[2], ScalarType::Float).unwrap()
}

/// A new tensor (its own handle) on `base`'s storage: `base.storage().use_count()` counts the
/// handles alive, so that tests can see that boxed arguments were dropped.
fn handle_on(base: &Tensor) -> Tensor {
    base.with_key_set(DispatchKeySet::from_key(K::CPU))
}

fn uses(s: &Storage) -> usize {
    s.use_count()
}

/// A dispatcher with PyTorch's fallthrough fallbacks, and the Autograd keys falling through
/// (no autograd layer in these tests).
fn dispatcher() -> Dispatcher {
    let d = Dispatcher::with_builtin_fallbacks();
    d.register_fallback(K::Autograd, KernelFunction::fallthrough(), "test")
        .unwrap()
        .leak();
    d
}

fn lib(d: &Dispatcher) -> Library {
    Library::new(d, LibraryKind::Def, "boxed", None).unwrap()
}

fn handle(d: &Dispatcher, name: &str) -> OperatorHandle {
    d.find_schema_or_throw(name).unwrap()
}

#[test]
fn tensor_arguments_are_replaced_by_the_return() {
    let d = dispatcher();
    let mut l = lib(&d);
    l.def("first(Tensor a, Tensor b) -> Tensor").unwrap();
    l.impl_(
        "first",
        Some(K::CPU),
        KernelFunction::from_fn(|a: &Tensor, _b: &Tensor| Ok(a.clone())),
    )
    .unwrap();
    let base = cpu_tensor();
    let storage = base.storage().clone();
    let (a, b) = (handle_on(&base), handle_on(&base));
    let before = uses(&storage);
    // A value below the arguments stays where it is.
    let mut stack: Stack = vec![IValue::Int(7), IValue::Tensor(a.clone()), IValue::Tensor(b)];
    handle(&d, "boxed::first").call_boxed(&mut stack).unwrap();
    assert_eq!(stack.len(), 2);
    assert!(matches!(stack[0], IValue::Int(7)));
    assert!(stack[1].as_tensor().unwrap().is_same(&a));
    // `b`'s handle was dropped with the arguments; `a`'s lives on as the return.
    assert_eq!(uses(&storage), before - 1);
    stack.clear();
    drop(a);
    assert_eq!(uses(&storage), before - 2);
}

#[test]
fn every_argument_kind_unboxes() {
    let d = dispatcher();
    let mut l = lib(&d);
    // No `str` return kind: the kernel reports what it received through `seen`.
    let seen = Arc::new(std::sync::Mutex::new(String::new()));
    let report = seen.clone();
    l.def(
        "scalars(Tensor a, Tensor? b, int c, float d, bool e, str f, Scalar g, ScalarType h, \
         Layout i, Device j, MemoryFormat k, int? m) -> ()",
    )
    .unwrap();
    l.impl_(
        "scalars",
        Some(K::CPU),
        KernelFunction::from_fn(
            move |a: &Tensor,
                  b: Option<&Tensor>,
                  c: i64,
                  d: f64,
                  e: bool,
                  f: &str,
                  g: Scalar,
                  h: ScalarType,
                  i: Layout,
                  j: Device,
                  k: MemoryFormat,
                  m: Option<i64>| {
                *report.lock().unwrap() = format!(
                    "{:?} {} {c} {d} {e} {f} {g:?} {h} {i} {j} {k:?} {m:?}",
                    a.sizes(),
                    b.is_some()
                );
                Ok(())
            },
        ),
    )
    .unwrap();
    l.def(
        "lists(Tensor a, int[] b, float[] c, bool[] d, Tensor[] e, Tensor?[] f, Generator? g, \
         float? h, Scalar? i, ScalarType? j, str? k) -> int",
    )
    .unwrap();
    l.impl_(
        "lists",
        Some(K::CPU),
        KernelFunction::from_fn(
            |_a: &Tensor,
             b: &[i64],
             c: &[f64],
             d: &[bool],
             e: &[Tensor],
             f: &[Option<Tensor>],
             g: Option<&Generator>,
             h: Option<f64>,
             i: Option<Scalar>,
             j: Option<ScalarType>,
             k: Option<&str>| {
                Ok(b.len() as i64
                    + c.len() as i64
                    + d.len() as i64
                    + e.len() as i64
                    + f.len() as i64
                    + i64::from(g.is_some())
                    + i64::from(h.is_some())
                    + i64::from(i.is_some())
                    + i64::from(j.is_some())
                    + i64::from(k.is_some()))
            },
        ),
    )
    .unwrap();

    let t = cpu_tensor();
    let mut stack: Stack = vec![
        IValue::Tensor(t.clone()),
        IValue::None,
        IValue::Int(3),
        // An int is a valid float argument, as in Python.
        IValue::Int(2),
        IValue::Bool(true),
        IValue::from("s"),
        IValue::Double(0.5),
        // PyTorch boxes dtypes as ints.
        IValue::Int(ScalarType::Float as i64),
        IValue::Layout(Layout::Strided),
        IValue::Device(Device::CPU),
        IValue::MemoryFormat(MemoryFormat::Contiguous),
        IValue::Int(9),
    ];
    handle(&d, "boxed::scalars").call_boxed(&mut stack).unwrap();
    assert!(stack.is_empty());
    assert_eq!(
        *seen.lock().unwrap(),
        "[2] false 3 2 true s Float(0.5) torch.float32 torch.strided cpu Contiguous Some(9)"
    );

    let mut stack: Stack = vec![
        IValue::Tensor(t.clone()),
        IValue::IntList(vec![1, 2].into()),
        IValue::DoubleList(vec![1.0].into()),
        IValue::BoolList(vec![true, false, true].into()),
        IValue::TensorList(vec![t.clone(), t.clone()].into()),
        IValue::OptionalTensorList(vec![None, Some(t.clone())].into()),
        IValue::Generator(Generator::new(1)),
        IValue::None,
        IValue::Bool(false),
        IValue::None,
        IValue::from("k"),
    ];
    handle(&d, "boxed::lists").call_boxed(&mut stack).unwrap();
    assert_eq!(stack.len(), 1);
    assert!(matches!(stack[0], IValue::Int(13)), "{:?}", stack[0]);
}

#[test]
fn every_return_kind_boxes() {
    let d = dispatcher();
    let mut l = lib(&d);
    l.def("nothing(Tensor a, int b) -> ()").unwrap();
    l.impl_(
        "nothing",
        Some(K::CPU),
        KernelFunction::from_fn(|_a: &Tensor, _b: i64| Ok(())),
    )
    .unwrap();
    // More returns than arguments: the returns are pushed past the arguments' slots.
    l.def("many(Tensor a) -> (Tensor, int, float, bool)")
        .unwrap();
    l.impl_(
        "many",
        Some(K::CPU),
        KernelFunction::from_fn(|a: &Tensor| Ok((a.clone(), 1i64, 2.5f64, true))),
    )
    .unwrap();
    l.def("lists(Tensor a, Tensor b, Tensor c) -> (Tensor[], int[], ScalarType)")
        .unwrap();
    l.impl_(
        "lists",
        Some(K::CPU),
        KernelFunction::from_fn(|a: &Tensor, b: &Tensor, _c: &Tensor| {
            Ok((vec![a.clone(), b.clone()], vec![4i64, 5], ScalarType::Long))
        }),
    )
    .unwrap();
    l.def("scalar(Tensor a) -> Scalar").unwrap();
    l.impl_(
        "scalar",
        Some(K::CPU),
        KernelFunction::from_fn(|_a: &Tensor| Ok(Scalar::Float(1.5))),
    )
    .unwrap();

    let t = cpu_tensor();
    let mut stack: Stack = vec![IValue::Tensor(t.clone()), IValue::Int(1)];
    handle(&d, "boxed::nothing").call_boxed(&mut stack).unwrap();
    assert!(stack.is_empty());

    let mut stack: Stack = vec![IValue::Tensor(t.clone())];
    handle(&d, "boxed::many").call_boxed(&mut stack).unwrap();
    assert_eq!(stack.len(), 4);
    assert!(stack[0].as_tensor().unwrap().is_same(&t));
    assert!(
        matches!(stack[1..], [IValue::Int(1), IValue::Double(x), IValue::Bool(true)] if x == 2.5)
    );

    let mut stack: Stack = (0..3).map(|_| IValue::Tensor(t.clone())).collect();
    handle(&d, "boxed::lists").call_boxed(&mut stack).unwrap();
    assert_eq!(stack.len(), 3);
    assert!(matches!(&stack[0], IValue::TensorList(ts) if ts.len() == 2));
    assert!(matches!(&stack[1], IValue::IntList(xs) if xs == &[4, 5]));
    assert!(matches!(stack[2], IValue::ScalarType(ScalarType::Long)));

    let mut stack: Stack = vec![IValue::Tensor(t)];
    handle(&d, "boxed::scalar").call_boxed(&mut stack).unwrap();
    assert!(matches!(stack[..], [IValue::Double(x)] if x == 1.5));
}

#[test]
fn argument_errors_name_the_operator_and_argument() {
    let d = dispatcher();
    let mut l = lib(&d);
    l.def("f(Tensor self, int dim, str mode) -> Tensor")
        .unwrap();
    l.impl_(
        "f",
        Some(K::CPU),
        KernelFunction::from_fn(|a: &Tensor, _d: i64, _m: &str| Ok(a.clone())),
    )
    .unwrap();
    let h = handle(&d, "boxed::f");
    let t = cpu_tensor();

    let mut stack: Stack = vec![IValue::Tensor(t.clone()), IValue::Int(0), IValue::Int(1)];
    let err = h.call_boxed(&mut stack).unwrap_err();
    assert_eq!(
        err.to_string(),
        "boxed::f() Expected a value of type 'str' for argument 'mode' but instead found type \
         'int'."
    );
    assert_eq!(stack.len(), 3, "a failed call leaves the stack as it was");

    let mut stack: Stack = vec![IValue::Tensor(t.clone()), IValue::Int(0)];
    let err = h
        .redispatch_boxed(DispatchKeySet::from_key(K::CPU), &mut stack)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "boxed::f() expected at most 3 argument(s) but received 2 argument(s)."
    );
    assert_eq!(stack.len(), 2);
}

/// A fallback on Python that counts its calls and redispatches below Python.
fn python_fallback(d: &Dispatcher, seen: Arc<AtomicUsize>) -> Library {
    let mut fb = Library::new(d, LibraryKind::Impl, "_", Some(K::Python)).unwrap();
    fb.fallback(
        None,
        KernelFunction::from_boxed(move |op, ks, stack| {
            seen.fetch_add(1, Ordering::SeqCst);
            op.redispatch_boxed(ks & DispatchKeySet::full_after(K::Python), stack)
        }),
    )
    .unwrap();
    fb
}

#[test]
fn typed_calls_box_into_a_fallback_that_redispatches() {
    let d = dispatcher();
    let mut l = lib(&d);
    l.def("pair(Tensor a, int n) -> (Tensor, int)").unwrap();
    l.impl_(
        "pair",
        Some(K::CPU),
        KernelFunction::from_fn(|a: &Tensor, n: i64| Ok((a.clone(), n + 1))),
    )
    .unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let _fb = python_fallback(&d, seen.clone());
    let op: TypedOperatorHandle<(Tensor, i64), (Tensor, i64)> =
        handle(&d, "boxed::pair").typed().unwrap();
    let base = cpu_tensor();
    let storage = base.storage().clone();
    let p = base.with_key_set(DispatchKeySet::from_keys(&[K::CPU, K::Python]));
    let before = uses(&storage);
    for n in 0..3 {
        let (out, m) = op.call((&p, n)).unwrap();
        assert!(out.is_same(&p));
        assert_eq!(m, n + 1);
    }
    assert_eq!(seen.load(Ordering::SeqCst), 3);
    // Nothing of the boxed calls is left behind on the reused stack.
    assert_eq!(uses(&storage), before);
}

/// Typed calls of every slow-path form reach a boxed fallback: arguments in at most three
/// registers (the kernel handed to the slow path), and more (the handle's own entry point, which
/// looks the kernel up again); see Note [Typed calls end in one jump].
#[test]
fn typed_calls_of_wide_signatures_box_into_a_fallback() {
    let d = dispatcher();
    let mut l = lib(&d);
    l.def("wide(Tensor a, int[] x, int[] y) -> int").unwrap();
    l.impl_(
        "wide",
        Some(K::CPU),
        KernelFunction::from_fn(|_a: &Tensor, x: &[i64], y: &[i64]| {
            Ok(x.iter().sum::<i64>() * 10 + y.len() as i64)
        }),
    )
    .unwrap();
    l.def("four(Tensor a, Tensor b, Tensor c, int n) -> int")
        .unwrap();
    l.impl_(
        "four",
        Some(K::CPU),
        KernelFunction::from_fn(|_a: &Tensor, _b: &Tensor, _c: &Tensor, n: i64| Ok(n * 2)),
    )
    .unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let _fb = python_fallback(&d, seen.clone());
    assert_eq!(<(Tensor, Vec<i64>, Vec<i64>) as ArgList>::WORDS, 5);
    assert_eq!(<(Tensor, Tensor, Tensor, i64) as ArgList>::WORDS, 4);
    assert_eq!(<(Tensor, i64) as ArgList>::WORDS, 2);
    let wide: TypedOperatorHandle<(Tensor, Vec<i64>, Vec<i64>), i64> =
        handle(&d, "boxed::wide").typed().unwrap();
    let four: TypedOperatorHandle<(Tensor, Tensor, Tensor, i64), i64> =
        handle(&d, "boxed::four").typed().unwrap();
    let p = cpu_tensor().with_key_set(DispatchKeySet::from_keys(&[K::CPU, K::Python]));
    assert_eq!(wide.call((&p, &[1, 2], &[7, 7, 7])).unwrap(), 33);
    assert_eq!(four.call((&p, &p, &p, 21)).unwrap(), 42);
    assert_eq!(seen.load(Ordering::SeqCst), 2);
}

#[test]
fn boxed_kernel_with_wrong_returns_is_an_error() {
    let d = dispatcher();
    let mut l = lib(&d);
    l.def("g(Tensor a) -> Tensor").unwrap();
    l.impl_(
        "g",
        Some(K::CPU),
        KernelFunction::from_boxed(|_op, _ks, stack| {
            stack.pop();
            stack.push(IValue::Int(1));
            Ok(())
        }),
    )
    .unwrap();
    let op: TypedOperatorHandle<(Tensor,), Tensor> = handle(&d, "boxed::g").typed().unwrap();
    let err = op.call((&cpu_tensor(),)).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("boxed::g: the kernel for CPU returned"),
        "{msg}"
    );
    assert!(msg.contains("expected Tensor"), "{msg}");
}

#[test]
fn nested_boxed_calls_use_their_own_stacks() {
    let d = dispatcher();
    let mut l = lib(&d);
    l.def("inner(Tensor a) -> Tensor").unwrap();
    l.impl_(
        "inner",
        Some(K::CPU),
        KernelFunction::from_fn(|a: &Tensor| Ok(a.clone())),
    )
    .unwrap();
    // `outer`'s CPU kernel is boxed: a typed call of it boxes onto the thread's stack, and while
    // that stack is in use the kernel makes a typed call of `inner` through the Python fallback,
    // which boxes too.
    l.def("outer(Tensor a, int n) -> int").unwrap();
    let inner: TypedOperatorHandle<(Tensor,), Tensor> = handle(&d, "boxed::inner").typed().unwrap();
    l.impl_(
        "outer",
        Some(K::CPU),
        KernelFunction::from_boxed(move |_op, _ks, stack| {
            let before: Vec<String> = stack.iter().map(ToString::to_string).collect();
            let t = stack[stack.len() - 2].as_tensor().unwrap().clone();
            let out = inner.call((&t,))?;
            assert!(out.is_same(&t));
            let after: Vec<String> = stack.iter().map(ToString::to_string).collect();
            assert_eq!(before, after, "the nested call left the outer stack alone");
            let n = match stack.pop() {
                Some(IValue::Int(n)) => n,
                other => panic!("expected an int, got {other:?}"),
            };
            stack.pop();
            stack.push(IValue::Int(n * 10));
            Ok(())
        }),
    )
    .unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let _fb = python_fallback(&d, seen.clone());
    let outer: TypedOperatorHandle<(Tensor, i64), i64> =
        handle(&d, "boxed::outer").typed().unwrap();
    let p = cpu_tensor().with_key_set(DispatchKeySet::from_keys(&[K::CPU, K::Python]));
    assert_eq!(outer.call((&p, 4)).unwrap(), 40);
    // Once through the fallback for `outer`, once for `inner`.
    assert_eq!(seen.load(Ordering::SeqCst), 2);
    // And again, now that the cached stack has been used.
    assert_eq!(outer.call((&p, 5)).unwrap(), 50);
}

/// Scalars travel packed (Note [Packed scalars]): a typed call reaches a kernel taking `Scalar`,
/// one taking `PackedScalar` and a boxed-only kernel (through the handle's slow-path entry
/// point, Note [Typed calls end in one jump]) with every variant intact.
#[test]
fn scalars_reach_typed_packed_and_boxed_kernels() {
    let d = dispatcher();
    let mut l = lib(&d);
    l.def("unpacked(Tensor a, Scalar s) -> Scalar").unwrap();
    l.def("packed(Tensor a, Scalar s) -> Scalar").unwrap();
    l.def("boxed_only(Tensor a, Scalar s) -> Scalar").unwrap();
    l.impl_(
        "unpacked",
        Some(K::CPU),
        KernelFunction::from_fn(|_a: &Tensor, s: Scalar| Ok(s)),
    )
    .unwrap();
    l.impl_(
        "packed",
        Some(K::CPU),
        KernelFunction::from_fn(|_a: &Tensor, s: PackedScalar| Ok(s.get())),
    )
    .unwrap();
    l.impl_(
        "boxed_only",
        Some(K::CPU),
        KernelFunction::from_boxed(|_op, _ks, stack| {
            let s = stack.pop().unwrap();
            stack.pop();
            stack.push(s);
            Ok(())
        }),
    )
    .unwrap();
    let t = cpu_tensor();
    for name in ["boxed::unpacked", "boxed::packed", "boxed::boxed_only"] {
        let op = handle(&d, name)
            .typed::<(Tensor, Scalar), Scalar>()
            .unwrap();
        for s in [Scalar::Bool(true), Scalar::Int(-3), Scalar::Float(0.25)] {
            assert_eq!(op.call((&t, PackedScalar::new(s))).unwrap(), s, "{name}");
        }
        // Boxed, the scalar is an ordinary value.
        let mut stack: Stack = vec![IValue::Tensor(t.clone()), IValue::Int(9)];
        handle(&d, name).call_boxed(&mut stack).unwrap();
        assert_eq!(
            stack.pop().and_then(|v| v.as_scalar()),
            Some(Scalar::Int(9))
        );
    }
}

/// The trampolines test types with `Arg::accepts` and then convert unchecked
/// (`Arg::from_accepted`), so each family must accept exactly the values `from_ivalue` converts.
#[test]
fn families_accept_exactly_what_they_convert() {
    let t = cpu_tensor();
    let values = [
        IValue::None,
        IValue::Tensor(t.clone()),
        IValue::Int(1),
        IValue::Double(1.5),
        IValue::Bool(true),
        IValue::from("s"),
        IValue::ScalarType(ScalarType::Float),
        IValue::Layout(Layout::Strided),
        IValue::Device(Device::CPU),
        IValue::MemoryFormat(MemoryFormat::Contiguous),
        IValue::Generator(Generator::new(1)),
        IValue::from(vec![1_i64, 2]),
        IValue::from(vec![0.5_f64]),
        IValue::from(vec![true]),
        IValue::from(vec![t.clone()]),
        IValue::from(vec![None, Some(t.clone())]),
        IValue::Tuple(ThinVec::new()),
        IValue::GenericList(thin_vec![IValue::Int(1)]),
    ];
    fn check<A: Arg>(values: &[IValue]) -> usize {
        let mut accepted = 0;
        for v in values {
            let converts = A::from_ivalue(v).is_some();
            assert_eq!(A::accepts(v), converts, "{} and {v:?}", A::SCHEMA_TYPE);
            accepted += usize::from(converts);
        }
        accepted
    }
    macro_rules! check_all {
        ($($family:ty => $n:literal),* $(,)?) => {
            $(assert_eq!(check::<$family>(&values), $n, "{}", <$family as Arg>::SCHEMA_TYPE);)*
        };
    }
    check_all!(
        Tensor => 1,
        Option<Tensor> => 2,
        i64 => 1,
        f64 => 2,
        bool => 1,
        Scalar => 3,
        Option<Scalar> => 4,
        ScalarType => 2,
        Layout => 1,
        Device => 1,
        MemoryFormat => 1,
        Generator => 1,
        Option<Generator> => 2,
        Vec<Tensor> => 1,
        Vec<Option<Tensor>> => 1,
        Vec<i64> => 1,
        Option<Vec<f64>> => 2,
        Vec<bool> => 1,
        String => 1,
        Option<String> => 2,
    );
}

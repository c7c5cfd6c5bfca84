//! Registrations commute and are invertible (PyTorch's test_dispatch.py `commute`): for every
//! order of registering a set of kernels, and every order of dropping them, each intermediate
//! state equals the state of registering just the remaining ones.

use switchboard_dispatcher::*;
use switchboard_keys::DispatchKey as K;
use switchboard_tensor::Tensor;

fn t_t(x: &Tensor) -> Result<Tensor> {
    Ok(x.clone())
}

#[derive(Clone, Copy, Debug)]
enum Reg {
    Def,
    Impl(Option<K>, &'static str),
    Fallthrough(K),
    Fallback(K),
}

fn apply(d: &Dispatcher, r: Reg) -> Library {
    let kind = if matches!(r, Reg::Fallback(_)) {
        LibraryKind::Impl
    } else {
        LibraryKind::Fragment
    };
    let ns = if matches!(r, Reg::Fallback(_)) {
        "_"
    } else {
        "test"
    };
    let mut lib = Library::with_location(d, kind, ns, None, "commute.rs", 1).unwrap();
    match r {
        Reg::Def => {
            lib.def("foo(Tensor x) -> Tensor").unwrap();
        }
        Reg::Impl(key, debug) => lib
            .impl_with_debug("foo", key, KernelFunction::from_fn(t_t), Some(debug))
            .unwrap(),
        Reg::Fallthrough(key) => lib.fallthrough("foo", key).unwrap(),
        Reg::Fallback(key) => lib
            .fallback(Some(key), KernelFunction::from_boxed(|_, _, _| Ok(())))
            .unwrap(),
    }
    lib
}

fn state(d: &Dispatcher) -> (String, String) {
    (d.dump_state("test::foo"), d.dump_table("test::foo"))
}

/// The state after registering `regs` in the given order on a fresh dispatcher.
fn state_of(regs: &[Reg]) -> (String, String) {
    let d = Dispatcher::new();
    let _libs: Vec<Library> = regs.iter().map(|r| apply(&d, *r)).collect();
    state(&d)
}

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}

fn commute(regs: &[Reg]) {
    let expected_full = state_of(regs);
    for order in permutations(regs.len()) {
        let d = Dispatcher::new();
        let mut libs: Vec<Option<Library>> = regs.iter().map(|_| None).collect();
        for &i in &order {
            libs[i] = Some(apply(&d, regs[i]));
        }
        assert_eq!(
            state(&d),
            expected_full,
            "registration order {order:?} of {regs:?}"
        );
        for removal in permutations(regs.len()) {
            // Re-register in `order`, then remove in `removal`.
            let d = Dispatcher::new();
            let mut libs: Vec<Option<Library>> = regs.iter().map(|_| None).collect();
            for &i in &order {
                libs[i] = Some(apply(&d, regs[i]));
            }
            for (n, &i) in removal.iter().enumerate() {
                libs[i] = None;
                let remaining: Vec<Reg> = (0..regs.len())
                    .filter(|j| !removal[..=n].contains(j))
                    .map(|j| regs[j])
                    .collect();
                let expected = if remaining.is_empty() {
                    (String::new(), String::new())
                } else {
                    state_of(&remaining)
                };
                assert_eq!(
                    state(&d),
                    expected,
                    "order {order:?}, removal {removal:?} step {n} of {regs:?}"
                );
            }
        }
        drop(libs);
    }
}

#[test]
fn def_and_backend_kernels_commute() {
    commute(&[
        Reg::Def,
        Reg::Impl(Some(K::CPU), "fn_cpu"),
        Reg::Impl(Some(K::AutogradCPU), "fn_autogradcpu"),
    ]);
}

#[test]
fn alias_kernels_commute() {
    commute(&[
        Reg::Def,
        Reg::Impl(None, "fn_math"),
        Reg::Impl(Some(K::CompositeExplicitAutograd), "fn_cea"),
        Reg::Impl(Some(K::Autograd), "fn_autograd"),
    ]);
}

#[test]
fn fallthroughs_and_fallbacks_commute() {
    commute(&[
        Reg::Impl(Some(K::CPU), "fn_cpu"),
        Reg::Fallthrough(K::AutogradCPU),
        Reg::Fallback(K::XLA),
        Reg::Impl(Some(K::SparseCPU), "fn_sparse"),
    ]);
}

#[test]
fn ambiguity_commutes() {
    commute(&[
        Reg::Def,
        Reg::Impl(None, "fn_math"),
        Reg::Impl(Some(K::QuantizedCPU), "fn_q"),
        Reg::Impl(Some(K::Lazy), "fn_lazy"),
    ]);
}

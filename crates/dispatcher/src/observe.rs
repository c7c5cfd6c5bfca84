//! Observing calls: the dispatch trace (`SWITCHBOARD_SHOW_DISPATCH_TRACE=1`) and observer hooks
//! (like PyTorch's RecordFunction).

use std::cell::Cell;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, RwLock};

use switchboard_keys::DispatchKeySet;

use crate::call::OperatorHandle;
use crate::ivalue::IValue;
use crate::operator::AnnotatedKernel;

// Note [Observing calls for free]
// One global byte says whether anything observes calls: 0 = not decided yet, 1 = nothing,
// 2 = the trace or an observer is on. The hot path loads it and branches once; everything else
// (reading the environment variable, boxing arguments for printing, calling observers) happens
// on the cold path. The environment variable is read on the first call.

const UNKNOWN: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
static OBSERVERS: RwLock<Vec<(u64, Arc<Observer>)>> = RwLock::new(Vec::new());
static TRACE_FORCED: AtomicU8 = AtomicU8::new(UNKNOWN);

thread_local! {
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// What an observer is told about a call.
#[derive(Debug)]
pub struct CallEvent<'a> {
    /// The operator.
    pub op: &'a OperatorHandle,
    /// The call's key set.
    pub key_set: DispatchKeySet,
    /// The key whose kernel runs.
    pub key: switchboard_keys::DispatchKey,
    /// The kernel's debug name.
    pub kernel: &'a str,
    /// Nesting depth: 0 for a top-level call, 1 for a call made by a kernel, ...
    pub depth: usize,
    /// True before the kernel runs, false after.
    pub before: bool,
}

/// An observer: called before and after every operator call while registered.
pub type Observer = dyn Fn(&CallEvent<'_>) + Send + Sync;

/// Removes its observer when dropped.
#[must_use = "the observer is removed when the guard is dropped"]
pub struct ObserverGuard(u64);

impl Drop for ObserverGuard {
    fn drop(&mut self) {
        let mut obs = OBSERVERS.write().unwrap_or_else(|e| e.into_inner());
        obs.retain(|(id, _)| *id != self.0);
        recompute(&obs);
    }
}

/// Registers an observer of every operator call (all dispatchers, all threads).
pub fn add_observer(f: impl Fn(&CallEvent<'_>) + Send + Sync + 'static) -> ObserverGuard {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut obs = OBSERVERS.write().unwrap_or_else(|e| e.into_inner());
    obs.push((id, Arc::new(f)));
    recompute(&obs);
    ObserverGuard(id)
}

/// Turns the dispatch trace on or off, overriding `SWITCHBOARD_SHOW_DISPATCH_TRACE`.
pub fn set_dispatch_trace(on: bool) {
    TRACE_FORCED.store(if on { ON } else { OFF }, Ordering::Relaxed);
    recompute(&OBSERVERS.read().unwrap_or_else(|e| e.into_inner()));
}

fn trace_enabled() -> bool {
    match TRACE_FORCED.load(Ordering::Relaxed) {
        UNKNOWN => std::env::var_os("SWITCHBOARD_SHOW_DISPATCH_TRACE")
            .is_some_and(|v| v != "0" && !v.is_empty()),
        v => v == ON,
    }
}

fn recompute(obs: &[(u64, Arc<Observer>)]) {
    let on = trace_enabled() || !obs.is_empty();
    STATE.store(if on { ON } else { OFF }, Ordering::Relaxed);
}

/// True when calls must be observed. One load and one branch once decided.
#[inline(always)]
pub(crate) fn active() -> bool {
    maybe_active() && decide(STATE.load(Ordering::Relaxed))
}

/// False when calls are certainly not observed: one load, no call, so the hot path can test it
/// without keeping its registers alive across a function call.
#[inline(always)]
pub(crate) fn maybe_active() -> bool {
    STATE.load(Ordering::Relaxed) != OFF
}

#[cold]
fn decide(s: u8) -> bool {
    if s == UNKNOWN {
        recompute(&OBSERVERS.read().unwrap_or_else(|e| e.into_inner()));
    }
    STATE.load(Ordering::Relaxed) == ON
}

/// One observed call: reports "before" on entry and "after" on drop.
pub(crate) struct Scope<'a> {
    op: &'a OperatorHandle,
    ks: DispatchKeySet,
    kernel: &'a AnnotatedKernel,
    depth: usize,
}

impl<'a> Scope<'a> {
    pub(crate) fn enter(
        op: &'a OperatorHandle,
        ks: DispatchKeySet,
        kernel: &'a AnnotatedKernel,
        args: Option<&[IValue]>,
    ) -> Self {
        let depth = DEPTH.with(|d| {
            let v = d.get();
            d.set(v + 1);
            v
        });
        if trace_enabled() {
            let indent = "  ".repeat(depth);
            eprintln!(
                "{indent}[call] op=[{}], key=[{}]",
                op.name(),
                ks.highest_priority_type_id()
            );
            for (i, v) in args.unwrap_or_default().iter().enumerate() {
                if let IValue::Tensor(t) = v {
                    eprintln!("{indent}  arg {i}: {}", t.key_set());
                }
            }
            eprintln!("{indent}  kernel: {}", kernel.debug);
        }
        let scope = Scope {
            op,
            ks,
            kernel,
            depth,
        };
        scope.notify(true);
        scope
    }

    fn notify(&self, before: bool) {
        let obs = OBSERVERS.read().unwrap_or_else(|e| e.into_inner()).clone();
        if obs.is_empty() {
            return;
        }
        let event = CallEvent {
            op: self.op,
            key_set: self.ks,
            key: self.ks.highest_priority_type_id(),
            kernel: &self.kernel.debug,
            depth: self.depth,
            before,
        };
        for (_, f) in &obs {
            f(&event);
        }
    }
}

impl Drop for Scope<'_> {
    fn drop(&mut self) {
        self.notify(false);
        DEPTH.with(|d| d.set(self.depth));
    }
}

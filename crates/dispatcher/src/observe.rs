//! Observing calls: the dispatch trace (`SWITCHBOARD_SHOW_DISPATCH_TRACE=1`, or `true`, `yes`,
//! `on`) and observer hooks
//! (like PyTorch's RecordFunction).

use std::cell::Cell;
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use switchboard_keys::DispatchKeySet;

use crate::call::OperatorHandle;
use crate::dispatcher::DispatcherInner;
use crate::ivalue::IValue;
use crate::operator::AnnotatedKernel;

// Note [Observing calls for free]
// One global byte says whether anything observes calls: 0 = not decided yet, 1 = nothing,
// 2 = the trace or an observer is on. The environment variable is read when the first
// dispatcher is made. The hot path does not read the global byte (a static of this crate is
// reached through the GOT from other crates: two loads); it reads a copy of it in the operator
// entry it has already loaded: `OperatorEntry::observed`, one load and one branch. Every
// change of the global byte is written to every entry of every live dispatcher, under the
// observer list's write lock (which orders the changes) and each dispatcher's registry lock
// (which orders them with entry creation: a new entry copies the global byte under that lock).
// Everything else (boxing arguments for printing, calling observers) happens on the cold path,
// which checks the global byte again. Entries of a dropped dispatcher are not updated: they have
// no kernels left to observe.

const UNKNOWN: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
static OBSERVERS: RwLock<Vec<(u64, Arc<Observer>)>> = RwLock::new(Vec::new());
static TRACE_FORCED: AtomicU8 = AtomicU8::new(UNKNOWN);
/// The live dispatchers, whose entries' `observed` flags follow `STATE`.
static DISPATCHERS: Mutex<Vec<Weak<DispatcherInner>>> = Mutex::new(Vec::new());

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
    let obs = OBSERVERS.write().unwrap_or_else(|e| e.into_inner());
    TRACE_FORCED.store(if on { ON } else { OFF }, Ordering::Relaxed);
    recompute(&obs);
}

/// The environment variable that turns the dispatch trace on (read when the first dispatcher
/// is made; see [`env_flag`] for the values it takes).
pub const DISPATCH_TRACE_ENV: &str = "SWITCHBOARD_SHOW_DISPATCH_TRACE";

/// Reads a boolean environment flag: `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off`
/// (in any case, blanks around ignored); `Ok(None)` when it is unset or empty, an error naming
/// the variable and the accepted words for anything else.
///
/// ```
/// use switchboard_dispatcher::parse_env_flag;
/// assert_eq!(parse_env_flag("V", "Yes".as_ref()), Ok(Some(true)));
/// assert_eq!(parse_env_flag("V", "0".as_ref()), Ok(Some(false)));
/// assert_eq!(parse_env_flag("V", "".as_ref()), Ok(None));
/// assert!(parse_env_flag("V", "maybe".as_ref()).unwrap_err().contains("V=maybe"));
/// ```
pub fn env_flag(name: &str) -> Result<Option<bool>, String> {
    match std::env::var_os(name) {
        Some(v) => parse_env_flag(name, &v),
        None => Ok(None),
    }
}

/// The value of a boolean environment flag (see [`env_flag`]).
pub fn parse_env_flag(name: &str, value: &std::ffi::OsStr) -> Result<Option<bool>, String> {
    let text = value.to_string_lossy();
    match text.trim().to_ascii_lowercase().as_str() {
        "" => Ok(None),
        "1" | "true" | "yes" | "on" => Ok(Some(true)),
        "0" | "false" | "no" | "off" => Ok(Some(false)),
        _ => Err(format!(
            "{name}={text} is not a boolean: use 1, true, yes, on (or 0, false, no, off)"
        )),
    }
}

fn trace_enabled() -> bool {
    static FROM_ENV: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    match TRACE_FORCED.load(Ordering::Relaxed) {
        // Read once per process; a program that wants to refuse a bad value (the CLI) checks
        // `env_flag` itself first.
        UNKNOWN => *FROM_ENV.get_or_init(|| match env_flag(DISPATCH_TRACE_ENV) {
            Ok(on) => on.unwrap_or(false),
            Err(message) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "warning: {message}; the dispatch trace stays off"
                );
                false
            }
        }),
        v => v == ON,
    }
}

/// Sets the global state and every live entry's copy of it (Note [Observing calls for free]).
/// The caller holds `OBSERVERS` for writing, so that changes apply in order.
fn recompute(obs: &[(u64, Arc<Observer>)]) {
    let on = trace_enabled() || !obs.is_empty();
    STATE.store(if on { ON } else { OFF }, Ordering::Relaxed);
    let live: Vec<Arc<DispatcherInner>> = DISPATCHERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    for d in &live {
        d.set_observed(on);
    }
}

/// Lists a new dispatcher so that its entries follow the global state, deciding that state
/// first if nothing has (Note [Observing calls for free]). Called before the dispatcher has
/// entries, with no lock held.
pub(crate) fn register_dispatcher(inner: &Arc<DispatcherInner>) {
    if STATE.load(Ordering::Relaxed) == UNKNOWN {
        let obs = OBSERVERS.write().unwrap_or_else(|e| e.into_inner());
        if STATE.load(Ordering::Relaxed) == UNKNOWN {
            recompute(&obs);
        }
    }
    let mut list = DISPATCHERS.lock().unwrap_or_else(|e| e.into_inner());
    list.retain(|d| d.strong_count() > 0);
    list.push(Arc::downgrade(inner));
}

/// The value a new entry's `observed` flag starts with; read under its dispatcher's lock.
pub(crate) fn observing() -> bool {
    STATE.load(Ordering::Relaxed) != OFF
}

/// True when calls must be observed; the cold path's check (the hot path reads the entry's
/// copy, see Note [Observing calls for free]).
#[inline]
pub(crate) fn active() -> bool {
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
            // Written, not `eprintln!`ed: a closed stderr must not turn a traced call into a
            // panic; the trace is then lost, the call is not.
            let indent = "  ".repeat(depth);
            let mut err = std::io::stderr().lock();
            let _ = writeln!(
                err,
                "{indent}[call] op=[{}], key=[{}]",
                op.name(),
                ks.highest_priority_type_id()
            );
            for (i, v) in args.unwrap_or_default().iter().enumerate() {
                if let IValue::Tensor(t) = v {
                    let _ = writeln!(err, "{indent}  arg {i}: {}", t.key_set());
                }
            }
            let _ = writeln!(err, "{indent}  kernel: {}", kernel.debug);
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
            kernel: self.kernel.debug.as_str(),
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

//! The lazy backend's log: one line per intercepted call, in Genie's format, and Genie's info
//! lines (lazy mode changes), on stderr when `SWITCHBOARD_LOG_INTERCEPTS=1`.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use switchboard_dispatcher::{env_flag, stack_tensors, IValue};

const UNKNOWN: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

/// The environment variable that turns the intercept log on, read on first use as every
/// boolean flag of the project is (`switchboard_dispatcher::env_flag`: `1`, `true`, `yes`,
/// `on` / `0`, `false`, `no`, `off`).
pub const LOG_INTERCEPTS_ENV: &str = "SWITCHBOARD_LOG_INTERCEPTS";

/// Read from [`LOG_INTERCEPTS_ENV`] on first use, or set by [`set_log_intercepts`].
static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);

/// How many [`capture_intercept_log`] calls are running, on any thread: while none is, no
/// thread needs to look at its own buffer to know that no line is wanted.
static CAPTURING: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Lines kept by [`capture_intercept_log`] on this thread, when it runs.
    static BUFFER: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Whether intercepted calls are logged to stderr.
#[inline]
pub fn log_intercepts() -> bool {
    match STATE.load(Ordering::Relaxed) {
        ON => true,
        OFF => false,
        _ => {
            // A program that wants to refuse a bad value (the CLI) checks `env_flag` itself
            // first; here a bad value is reported once and the log stays off.
            static FROM_ENV: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
            let on = *FROM_ENV.get_or_init(|| match env_flag(LOG_INTERCEPTS_ENV) {
                Ok(on) => on.unwrap_or(false),
                Err(message) => {
                    eprintln!("warning: {message}; the intercept log stays off");
                    false
                }
            });
            STATE.store(if on { ON } else { OFF }, Ordering::Relaxed);
            on
        }
    }
}

/// Turns the intercept log on or off (overriding `SWITCHBOARD_LOG_INTERCEPTS`).
pub fn set_log_intercepts(on: bool) {
    STATE.store(if on { ON } else { OFF }, Ordering::Relaxed);
}

/// Runs `f` and returns, with its result, the log lines of what it did on this thread: one per
/// intercepted call, and the info lines (Genie's `Dispatcher lazy mode enabled`), whether or
/// not the log is on; nothing goes to stderr for them.
///
/// ```
/// use switchboard_lazy as lazy;
/// use switchboard_ops as ops;
/// use switchboard_tensor::{Device, ScalarType};
/// let x = ops::ones_with(&[4, 4], ops::OnesOptions::default().device(lazy::DEVICE)).unwrap();
/// let (y, lines) = lazy::capture_intercept_log(|| ops::mm(&x, &x).unwrap());
/// assert!(lines[0].starts_with("[switchboard] Intercepted aten::mm -> id=lt_"));
/// assert!(lines[0].ends_with(", in_shapes=[(4, 4), (4, 4)], out_shape=(4, 4)"));
/// # drop(y);
/// ```
pub fn capture_intercept_log<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
    /// Puts back the buffer `f`'s capture replaced, and the count, even if `f` panics.
    struct Restore(Option<Vec<String>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            BUFFER.with(|b| *b.borrow_mut() = previous);
            CAPTURING.fetch_sub(1, Ordering::Relaxed);
        }
    }
    CAPTURING.fetch_add(1, Ordering::Relaxed);
    let restore = Restore(BUFFER.with(|b| b.borrow_mut().replace(Vec::new())));
    let r = f();
    let lines = BUFFER.with(|b| b.borrow_mut().take());
    drop(restore);
    (r, lines.unwrap_or_default())
}

/// Whether a line must be produced for this call (the log is on, or a capture runs).
#[inline]
pub(crate) fn wanted() -> bool {
    log_intercepts()
        || (CAPTURING.load(Ordering::Relaxed) > 0 && BUFFER.with(|b| b.borrow().is_some()))
}

/// `(4, 4)`, `(4,)`, `()`: a shape as Python prints a tuple.
pub(crate) fn shape(s: &[i64]) -> String {
    match s {
        [] => "()".into(),
        [x] => format!("({x},)"),
        _ => format!(
            "({})",
            s.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The shapes of the tensors among `values`, in order (lists flattened).
pub(crate) fn shapes(values: &[IValue]) -> Vec<String> {
    stack_tensors(values).map(|t| shape(t.sizes())).collect()
}

/// Writes the line of one intercepted call.
pub(crate) fn emit(op: &str, id: Option<u64>, in_shapes: &[String], returns: &[IValue]) {
    let outs = shapes(returns);
    let out = match outs.len() {
        0 => "None".to_string(),
        1 => outs[0].clone(),
        _ => format!("[{}]", outs.join(", ")),
    };
    let id = id.map_or("none".to_string(), |i| format!("lt_{i}"));
    let line = format!(
        "[switchboard] Intercepted {op} -> id={id}, in_shapes=[{}], out_shape={out}",
        in_shapes.join(", ")
    );
    write(line);
}

/// Writes an info line of the backend (Genie's `logger.info`): `[switchboard] {message}`.
pub(crate) fn info(message: &str) {
    write(format!("[switchboard] {message}"));
}

/// Keeps `line` for the running capture of this thread, or prints it when the log is on.
fn write(line: String) {
    let line = match BUFFER.with(|b| match b.borrow_mut().as_mut() {
        Some(buf) => {
            buf.push(line);
            None
        }
        None => Some(line),
    }) {
        Some(line) => line,
        None => return,
    };
    if log_intercepts() {
        eprintln!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_tuples() {
        assert_eq!(shape(&[]), "()");
        assert_eq!(shape(&[3]), "(3,)");
        assert_eq!(shape(&[4, 4]), "(4, 4)");
    }

    #[test]
    fn a_panicking_capture_restores_the_buffer() {
        let (_, outer) = capture_intercept_log(|| {
            let r = std::panic::catch_unwind(|| capture_intercept_log(|| panic!("in f")));
            assert!(r.is_err());
            // Back to the outer capture's buffer, which is still wanted.
            assert!(wanted());
            BUFFER.with(|b| b.borrow_mut().as_mut().unwrap().push("outer".into()));
        });
        assert_eq!(outer, ["outer"]);
        assert!(BUFFER.with(|b| b.borrow().is_none()));
    }
}

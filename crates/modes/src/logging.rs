//! [`LoggingMode`]: records every operator call with its arguments' and outputs' shapes.

use std::cell::RefCell;
use std::fmt::Write;

use switchboard_dispatcher::{DispatchKeySet, IValue, OperatorHandle, Result, Stack};
use switchboard_tensor::{ScalarType, Tensor};

use crate::DispatchMode;

/// Logs each call it sees, one line per call, in the form of PyTorch's `LoggingTensorMode`
/// with shapes for values: `aten::mm(f32[2, 3], f32[3, 4]) -> f32[2, 4]` (the operator with
/// its overload, the arguments in schema order with tensors as dtype and shape, the outputs).
///
/// ```
/// use std::rc::Rc;
/// use switchboard_cpu as _; // links the CPU kernels
/// use switchboard_modes::{push_mode, LoggingMode};
/// use switchboard_ops as ops;
///
/// let x = ops::ones(&[2, 3])?;
/// let log = Rc::new(LoggingMode::new());
/// {
///     let _mode = push_mode(log.clone());
///     ops::mm(&x, &ops::t(&x)?)?;
/// }
/// assert_eq!(log.lines(), [
///     "aten::t(f32[2, 3]) -> f32[3, 2]",
///     "aten::mm(f32[2, 3], f32[3, 2]) -> f32[2, 2]",
/// ]);
/// # Ok::<(), switchboard_dispatcher::DispatchError>(())
/// ```
#[derive(Default)]
pub struct LoggingMode {
    lines: RefCell<Vec<String>>,
}

impl LoggingMode {
    /// An empty log.
    pub fn new() -> LoggingMode {
        LoggingMode::default()
    }

    /// The lines logged so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.borrow().clone()
    }

    /// Empties the log.
    pub fn clear(&self) {
        self.lines.borrow_mut().clear();
    }
}

/// The short dtype name PyTorch's logs use (`f32`, `bf16`, `i64`, `b8`).
pub fn short_dtype(dtype: ScalarType) -> &'static str {
    dtype.abbreviation()
}

fn write_tensor(out: &mut String, t: &Tensor) {
    let sizes: Vec<String> = t.sizes().iter().map(i64::to_string).collect();
    let _ = write!(out, "{}[{}]", short_dtype(t.dtype()), sizes.join(", "));
}

/// A value as the log shows it: tensors as dtype and shape, lists in brackets.
pub(crate) fn write_value(out: &mut String, v: &IValue) {
    let list = |out: &mut String, items: &mut dyn Iterator<Item = String>| {
        let items: Vec<String> = items.collect();
        let _ = write!(out, "[{}]", items.join(", "));
    };
    let one = |f: &dyn Fn(&mut String)| {
        let mut s = String::new();
        f(&mut s);
        s
    };
    match v {
        IValue::None => out.push_str("None"),
        IValue::Tensor(t) => write_tensor(out, t),
        IValue::Int(i) => {
            let _ = write!(out, "{i}");
        }
        IValue::Double(d) => {
            let _ = write!(out, "{d:?}");
        }
        IValue::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
        IValue::Str(s) => {
            let _ = write!(out, "{s:?}");
        }
        IValue::ScalarType(s) => {
            let _ = write!(out, "{s}");
        }
        IValue::IntList(v) => list(out, &mut v.iter().map(i64::to_string)),
        IValue::DoubleList(v) => list(out, &mut v.iter().map(|d| format!("{d:?}"))),
        IValue::BoolList(v) => list(
            out,
            &mut v
                .iter()
                .map(|b| one(&|s| write_value(s, &IValue::Bool(*b)))),
        ),
        IValue::TensorList(v) => list(out, &mut v.iter().map(|t| one(&|s| write_tensor(s, t)))),
        IValue::OptionalTensorList(v) => list(
            out,
            &mut v.iter().map(|t| match t {
                Some(t) => one(&|s| write_tensor(s, t)),
                None => "None".into(),
            }),
        ),
        IValue::Tuple(v) | IValue::GenericList(v) => {
            list(out, &mut v.iter().map(|x| one(&|s| write_value(s, x))))
        }
        IValue::Device(d) => {
            let _ = write!(out, "{d}");
        }
        IValue::Layout(l) => {
            let _ = write!(out, "{l:?}");
        }
        IValue::MemoryFormat(m) => {
            let _ = write!(out, "{m:?}");
        }
        IValue::Generator(_) => out.push_str("Generator"),
        IValue::Object(o) => {
            let _ = write!(out, "{o:?}");
        }
    }
}

fn write_values(out: &mut String, values: &[IValue]) {
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_value(out, v);
    }
}

impl DispatchMode for LoggingMode {
    fn dispatch(
        &self,
        op: &OperatorHandle,
        _keys: DispatchKeySet,
        stack: &mut Stack,
    ) -> Result<()> {
        let n_args = op
            .schema()
            .map_or(0, |r| r.schema.arguments().len())
            .min(stack.len());
        let mut line = op.name().to_string();
        line.push('(');
        write_values(&mut line, &stack[stack.len() - n_args..]);
        line.push_str(") -> ");
        let base = stack.len() - n_args;
        op.call_boxed(stack)?;
        let outputs = stack.get(base..).unwrap_or_default();
        match outputs {
            [one] => write_value(&mut line, one),
            many => {
                line.push('(');
                write_values(&mut line, many);
                line.push(')');
            }
        }
        self.lines.borrow_mut().push(line);
        Ok(())
    }
}

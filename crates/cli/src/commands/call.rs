//! `switchboard call`: runs one registered operator through the dispatcher's boxed path, with
//! tensors read from a safetensors file and the other arguments written as literals.
//!
//! `switchboard call OPERATOR [--in INPUT.safetensors] [--out OUTPUT.safetensors] [--backward]
//! [--device DEVICE] [NAME=VALUE ...]`
//!
//! Note [switchboard call]
//! The operator is looked up by name (`aten::add.Tensor`; the namespace defaults to `aten`, a
//! bare `add` is the overload-less `aten::add`). Each argument is given by its schema name and
//! read according to its schema type (see [`AFTER_HELP`]); omitted arguments take their schema
//! default. The stack is built in schema order and run with `call_boxed`, below autograd (the
//! inputs never require grad; PyTorch's inference mode does the same), unless `--backward` is
//! given (see Note [switchboard call --backward] in `backward.rs`: the call then runs with
//! autograd and the inputs' gradients `grad.NAME` are output after the returns, in the file
//! or printed like them). Return `i` is `outI`:
//! tensors go to the `--out` file (a `Tensor[]` return as `outI.0`, `outI.1`, ..., with
//! `outI = Tensor[N]` in the file's metadata, next to `operator`), or are printed as
//! `outI = tensor(...)` without `--out`; every other return goes into one JSON object printed
//! as the last line of stdout (printed whenever there is such a return, and always with
//! `--out` so that scripts can parse it). Every failure is a [`CallError`], printed by
//! [`main`] as one line `error: ...` with exit status 2.

use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Mutex;

use switchboard::dispatcher::{
    AutoDispatchBelowADInplaceOrView, Dispatcher, OperatorHandle, Stack,
};
use switchboard::schema::FunctionSchema;
use switchboard::tensor::load_safetensors_file;

use arguments::{build_stack, check_missing, named_values, resolve};
pub(crate) use arguments::{parse_error_reason, unknown_operator, MAX_LISTED_NAMES};

mod arguments;
mod backward;
#[cfg(test)]
mod backward_tests;
mod device;
mod functionalized;
mod jvp;
mod output;
#[cfg(test)]
mod tests;
mod value;
mod vmapped;

use output::write_outputs;
use value::Inputs;

/// How values are written, for `switchboard call --help`.
pub const AFTER_HELP: &str = "\
VALUE is read by the argument's schema type:
  Tensor            @KEY, the tensor KEY of the --in file
  Tensor?           @KEY or None (every T? takes None)
  Tensor[]          [@a, @b]       (Tensor?[]: [@a, None])
  int, SymInt       3, -1
  float             0.5, 1e-5, inf, nan
  bool              true, false
  Scalar            an int, float or bool literal
  str               text, or \"quoted text\"
  int[], float[]    [1, 2]; a sized int[N] also takes one int (stride=2 is [2, 2])
  ScalarType        float32, float, int64, long, bool, float16, half, bfloat16, ...
  MemoryFormat      contiguous_format, channels_last, channels_last_3d, preserve_format
  Layout            strided
  Device            cpu, meta
  Generator         a seed: a fresh CPU generator, as torch.Generator().manual_seed(SEED)
Omitted arguments take their schema default.
Outputs: return I is outI; tensors go to the --out file (a Tensor[] as outI.0, outI.1, ...) or
are printed without --out; other returns are printed as one JSON object, e.g. {\"out1\":3}.
--backward: floating-point tensor inputs require grad, the floating-point tensor outputs are
reduced to sum(outI * grad_outI) (grad_outI from the --in file, else ones), backward runs and
each input's gradient is output as grad.NAME (NAME: the argument; an input that gets no gradient
is left out, with a note on stderr).
--vmap: the call runs under vmap, every tensor argument (each element of a Tensor[] too) mapped
over its first dimension (all the same batch size), other arguments shared, tensor outputs batch
first; with --backward, each sample's gradients (vmap(grad(...))), grad.NAME batch first, with
grad_outI from the --in file batched too.
--jvp: forward mode: every floating-point tensor argument is made dual with the tangent
tangent.NAME from the --in file (tangent.NAME.J in lists), else ones, and each floating-point
output's tangent is output as tangent_outI (forward_ad.unpack_dual), as torch.func.jvp gives it
(on the CPU: not with --device).
--device DEVICE: the tensor arguments (and --backward's grad_outI) are moved to DEVICE first
(lazy: the call is captured by the lazy backend and runs when its outputs are read), the outputs
and gradients back to the CPU; cpu:0 is the CPU. --autocast opens the region of DEVICE's type
(lazy and meta have no autocast: an error).
--functionalize[=REMOVE]: the call runs inside torch.func.functionalize(f, remove=REMOVE)
(mutations, the default, or mutations_and_views): the same outputs, written inputs written back.
Errors are one line on stderr, `error: ...`, with exit status 2.";

/// The arguments of `switchboard call`.
#[derive(clap::Args, Debug, Clone, Default)]
#[command(after_help = AFTER_HELP)]
pub struct CallArgs {
    /// The operator: `aten::add.Tensor`, `add.Tensor` (namespace aten) or `add` (no overload).
    #[arg(value_name = "OPERATOR")]
    pub operator: String,
    /// The safetensors file that `@KEY` values refer to.
    #[arg(long = "in", value_name = "INPUT.safetensors")]
    pub input: Option<PathBuf>,
    /// Writes the tensor outputs to this safetensors file instead of printing them.
    #[arg(long = "out", value_name = "OUTPUT.safetensors")]
    pub output: Option<PathBuf>,
    /// Runs the call with autograd and outputs the gradients of the floating-point tensor
    /// inputs as `grad.NAME`, for the outputs weighted by `@grad_outI` (else ones).
    #[arg(long)]
    pub backward: bool,
    /// Runs the call under vmap: every tensor argument is mapped over its first dimension
    /// (`in_dims=0`), the tensor outputs carry the batch first; with --backward, per-sample
    /// gradients (`vmap(grad(...))`).
    #[arg(long, conflicts_with = "functionalize")]
    pub vmap: bool,
    /// Runs the call in forward mode: the floating-point tensor arguments are dual tensors
    /// with the tangents `@tangent.NAME` (else ones), and each floating-point output's tangent
    /// is output as `tangent_outI` (`torch.func.jvp`).
    #[arg(long, conflicts_with_all = ["backward", "vmap", "functionalize", "device"])]
    pub jvp: bool,
    /// Runs the call on DEVICE (`lazy`, `meta`, ...): the tensor arguments are moved there
    /// first and the tensor outputs (and gradients) moved back to the CPU to be written.
    #[arg(long, value_name = "DEVICE")]
    pub device: Option<String>,
    /// Runs the call in an autocast region of this dtype for the --device
    /// (`torch.autocast(device_type, dtype=...)`; lazy and meta have none: an error);
    /// with --backward, the reduction and backward run after the region, as PyTorch recommends.
    #[arg(long, value_enum, value_name = "DTYPE")]
    pub autocast: Option<switchboard_cli::layers::AutocastDtype>,
    /// Runs the call inside a functionalized function (`torch.func.functionalize(f,
    /// remove=REMOVE)`, REMOVE `mutations` (the default) or `mutations_and_views`): in-place and
    /// out= forms run as their functional forms, written inputs are written back.
    #[arg(
        long,
        value_name = "REMOVE",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "mutations"
    )]
    pub functionalize: Option<String>,
    /// The operator's arguments by schema name, NAME=VALUE.
    #[arg(value_name = "NAME=VALUE")]
    pub args: Vec<String>,
}

/// Why `switchboard call` failed. Every message is one line.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The operator name does not parse.
    #[error("invalid operator name {name:?}: {reason}")]
    InvalidOperatorName {
        /// What was given.
        name: String,
        /// The parser's message.
        reason: String,
    },
    /// No operator of that name has a schema.
    #[error("unknown operator '{name}'{hint}")]
    UnknownOperator {
        /// The full name looked up.
        name: String,
        /// Suggestions (overloads of the name, close names), possibly empty.
        hint: String,
    },
    /// An argument without `=`.
    #[error("expected NAME=VALUE, got {0:?}")]
    MalformedArgument(String),
    /// A name the schema does not have.
    #[error("{op} has no argument '{name}'; its arguments are: {known}")]
    UnknownArgument {
        /// The operator.
        op: String,
        /// The name given.
        name: String,
        /// The schema's argument names.
        known: String,
    },
    /// The same name twice.
    #[error("argument '{0}' is given more than once")]
    DuplicateArgument(String),
    /// Arguments without default that were not given.
    #[error("missing argument {missing} of {schema}")]
    MissingArgument {
        /// `'name' (type)`, comma-separated.
        missing: String,
        /// The operator's schema.
        schema: String,
    },
    /// A value that does not read as the argument's type.
    #[error("argument '{name}' ({expected}): cannot read {value:?}: {reason}")]
    BadValue {
        /// The argument.
        name: String,
        /// Its schema type.
        expected: String,
        /// The text given.
        value: String,
        /// Why it does not read.
        reason: String,
    },
    /// `@KEY` without `--in`.
    #[error("argument '{name}' refers to tensor '@{key}' but no input file was given (--in)")]
    NoInputFile {
        /// The argument.
        name: String,
        /// The tensor key.
        key: String,
    },
    /// `@KEY` that the input file does not hold.
    #[error("argument '{name}': {path} holds no tensor '{key}' (it holds: {available})")]
    UnknownTensor {
        /// The argument.
        name: String,
        /// The tensor key.
        key: String,
        /// The input file.
        path: String,
        /// Its tensor names.
        available: String,
    },
    /// An argument type that cannot be written on the command line (Generator, Dict, ...).
    #[error("argument '{name}' has type {ty}, which cannot be given on the command line")]
    UnsupportedType {
        /// The argument.
        name: String,
        /// Its schema type.
        ty: String,
    },
    /// A schema default this tool cannot box (a complex number, ...).
    #[error("the default of argument '{name}' ({default}) is not supported; give a value")]
    UnsupportedDefault {
        /// The argument.
        name: String,
        /// The default as the schema prints it.
        default: String,
    },
    /// The input file cannot be read.
    #[error("input file {path}: {message}")]
    Input {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The output file cannot be written.
    #[error("output file {path}: {message}")]
    Output {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The call failed: no kernel for the inputs' keys, or the kernel's error.
    #[error("{op}: {message}")]
    Kernel {
        /// The operator.
        op: String,
        /// The dispatcher's or kernel's message.
        message: String,
    },
    /// A bad `--device`, or moving tensors to it or back failed.
    #[error("{0}")]
    Device(String),
    /// `--backward` cannot differentiate this call.
    #[error("--backward: {0}")]
    Backward(String),
    /// `--functionalize` was given an unknown REMOVE.
    #[error("--functionalize: {0}")]
    Functionalize(String),
    /// Something panicked (a kernel bug); reported instead of unwinding out of the CLI.
    #[error("{op} panicked: {message}")]
    Panic {
        /// The operator as given.
        op: String,
        /// The panic message and, when known, its location.
        message: String,
    },
    /// Writing to stdout failed.
    #[error("cannot write the output: {0}")]
    Stdout(#[from] std::io::Error),
}

/// Joins the lines of a (possibly multi-line) message into one.
pub(crate) fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `switchboard call` on the global dispatcher, printing to stdout. Returns the exit status:
/// 0, or 2 after printing one line `error: ...` on stderr.
pub fn main(args: &CallArgs) -> i32 {
    record_panics_quietly();
    let result = {
        let mut out = std::io::stdout().lock();
        let mut err = std::io::stderr().lock();
        run(Dispatcher::global(), args, &mut out, &mut err).and_then(|()| Ok(out.flush()?))
    };
    match result {
        Ok(()) => 0,
        // `switchboard call ... | head` closing the pipe early is not an error.
        Err(CallError::Stdout(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            super::report_error(&one_line(&e.to_string()));
            2
        }
    }
}

/// Where the last panic happened, recorded by the hook of [`record_panics_quietly`].
static LAST_PANIC_LOCATION: Mutex<Option<String>> = Mutex::new(None);

/// Replaces the panic hook by one that only records the location, so that a panicking kernel
/// ends as one `error:` line (see [`run`]) rather than the default multi-line report.
fn record_panics_quietly() {
    std::panic::set_hook(Box::new(|info| {
        if let Some(loc) = info.location() {
            *LAST_PANIC_LOCATION
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(loc.to_string());
        }
    }));
}

/// Calls `args.operator` of `d` with `args` (see Note [switchboard call]); writes printed
/// tensors and the JSON object of non-tensor outputs to `stdout`, tensors to `args.output`,
/// notes to `stderr`. With `--backward`, the reduction and backward run through the global
/// dispatcher (the operators' API). Never panics: a panic inside (a kernel's) becomes
/// [`CallError::Panic`].
pub fn run(
    d: &Dispatcher,
    args: &CallArgs,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<(), CallError> {
    match catch_unwind(AssertUnwindSafe(|| run_unguarded(d, args, stdout, stderr))) {
        Ok(result) => result,
        Err(payload) => {
            let mut message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic payload".into());
            let location = LAST_PANIC_LOCATION
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(loc) = location {
                message = format!("{message} (at {loc})");
            }
            Err(CallError::Panic {
                op: args.operator.clone(),
                message: one_line(&message),
            })
        }
    }
}

fn run_unguarded(
    d: &Dispatcher,
    args: &CallArgs,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<(), CallError> {
    let (op, record) = resolve(d, &args.operator)?;
    let schema = &record.schema;
    let op_name = schema.operator_name().to_string();
    let given = named_values(schema, &op_name, &args.args)?;
    check_missing(schema, &given)?;
    let mut inputs: Inputs = match &args.input {
        Some(path) => Some(load_safetensors_file(path).map_err(|e| CallError::Input {
            path: path.display().to_string(),
            message: one_line(&e.to_string()),
        })?),
        None => None,
    };
    let mut stack = build_stack(schema, &given, &inputs, args.input.as_deref())?;
    let on_device = device::OnDevice::new(args.device.as_deref(), &op_name)?;
    switchboard_cli::layers::check_autocast_device(args.autocast, on_device.device())
        .map_err(CallError::Device)?;
    on_device.inputs(&mut stack)?;
    if args.backward {
        on_device.grad_outputs(&mut inputs)?;
    }
    let region = switchboard_cli::layers::autocast_region(args.autocast, on_device.device())
        .map_err(|e| CallError::Kernel {
            op: op_name.clone(),
            message: one_line(&e.to_string()),
        })?;
    if args.vmap {
        let _grad_mode = args.backward.then(switchboard::autograd::enable_grad);
        let _below_autograd =
            (!args.backward).then(switchboard::dispatcher::AutoDispatchBelowADInplaceOrView::new);
        let (mut returns, mut grads) =
            vmapped::call_vmapped(&op, schema, &op_name, stack, inputs.as_ref(), args.backward)?;
        drop(region);
        on_device.outputs(&mut returns, &mut grads)?;
        return write_outputs(
            &op_name,
            returns,
            grads,
            args.output.as_deref(),
            stdout,
            stderr,
        );
    }
    if args.jvp {
        // Note [switchboard call --jvp].
        let level = switchboard::autograd::dual_level().map_err(|e| CallError::Kernel {
            op: op_name.clone(),
            message: one_line(&e.to_string()),
        })?;
        jvp::make_duals(schema, &op_name, &mut stack, &inputs, &level)?;
        let mut returns = call(&op, schema, &op_name, stack, true)?;
        drop(region);
        let mut tangents = jvp::tangents(&mut returns, &level, &op_name)?;
        drop(level);
        on_device.outputs(&mut returns, &mut tangents)?;
        return write_outputs(
            &op_name,
            returns,
            tangents,
            args.output.as_deref(),
            stdout,
            stderr,
        );
    }
    let remove = functionalized::remove(args.functionalize.as_deref())?;
    let call =
        |op: &OperatorHandle, schema: &FunctionSchema, name: &str, stack, autograd| match remove {
            Some(remove) => functionalized::call(op, schema, name, stack, autograd, remove),
            None => call(op, schema, name, stack, autograd),
        };
    if !args.backward {
        let mut returns = call(&op, schema, &op_name, stack, false)?;
        on_device.outputs(&mut returns, &mut [])?;
        return write_outputs(
            &op_name,
            returns,
            Vec::new(),
            args.output.as_deref(),
            stdout,
            stderr,
        );
    }
    // Autograd records the call, the reduction and runs backward with grad mode on.
    let _grad_mode = switchboard::autograd::enable_grad();
    let leaves = backward::make_leaves(schema, &op_name, &mut stack)?;
    let mut returns = call(&op, schema, &op_name, stack, true)?;
    drop(region);
    let mut grads = backward::gradients(&op_name, &returns, &leaves, inputs.as_ref(), stderr)?;
    on_device.outputs(&mut returns, &mut grads)?;
    write_outputs(
        &op_name,
        returns,
        grads,
        args.output.as_deref(),
        stdout,
        stderr,
    )
}

/// Runs the boxed call, below autograd unless `with_autograd`, and returns the returns.
pub(crate) fn call(
    op: &OperatorHandle,
    schema: &FunctionSchema,
    op_name: &str,
    mut stack: Stack,
    with_autograd: bool,
) -> Result<Stack, CallError> {
    let _below_autograd = (!with_autograd).then(AutoDispatchBelowADInplaceOrView::new);
    op.call_boxed(&mut stack).map_err(|e| CallError::Kernel {
        op: op_name.to_owned(),
        message: one_line(&e.to_string()),
    })?;
    let expected = schema.returns().len();
    if stack.len() != expected && !schema.is_varret() {
        return Err(CallError::Kernel {
            op: op_name.to_owned(),
            message: format!(
                "the kernel left {} value(s) on the stack, the schema declares {expected} \
                 return(s)",
                stack.len()
            ),
        });
    }
    Ok(stack)
}

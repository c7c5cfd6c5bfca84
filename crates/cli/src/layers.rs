//! The command-line options of the dispatch layers, shared by `switchboard call` and
//! `switchboard train`: `--autocast DTYPE` (an autocast region of the `--device`) and, for training,
//! `--count-flops` (a FLOP-counting dispatch mode over one step) and `--trace-graph FILE` (the
//! traced graph of one step).

use std::path::{Path, PathBuf};
use std::rc::Rc;

use switchboard::autocast::{autocast_device_types, is_autocast_available, AutocastGuard};
use switchboard::autograd::AutogradTensor;
use switchboard::dispatcher::DispatchError;
use switchboard::functionalize::{
    from_functionalized, DisableFunctionalizationGuard, FunctionalizeGuard, Remove,
};
use switchboard::modes::{push_mode, FlopCounterMode, ModeGuard};
use switchboard::tensor::{write_output_file, Device, ScalarType, Tensor};
use switchboard::trace::Tracer;

use crate::train::TrainError;

/// `--autocast` values: the lower-precision dtype of an autocast region.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutocastDtype {
    /// `torch.autocast(device_type, dtype=torch.bfloat16)`, CPU's default.
    Bfloat16,
    /// `torch.autocast(device_type, dtype=torch.float16)`.
    Float16,
}

impl AutocastDtype {
    /// The dtype.
    pub fn scalar_type(self) -> ScalarType {
        match self {
            AutocastDtype::Bfloat16 => ScalarType::BFloat16,
            AutocastDtype::Float16 => ScalarType::Half,
        }
    }

    /// The option's spelling, `bfloat16` or `float16`.
    pub fn name(self) -> &'static str {
        match self {
            AutocastDtype::Bfloat16 => "bfloat16",
            AutocastDtype::Float16 => "float16",
        }
    }
}

// Note [--autocast on every device]
// `--autocast DTYPE` is `torch.autocast(device.type, dtype=DTYPE)` around the call or the
// forward pass: the region is the one of the `--device`'s type, since an autocast key only
// casts tensors of its own backend (a CPU region leaves lazy tensors alone, which silently
// ran `--device lazy --autocast float16` in float32). A device type without an autocast policy
// (PyTorch defines no autocast key for lazy or meta: `getAutocastRelatedKeySetFromBackend`) is
// refused before anything runs, with `torch.autocast`'s error and the devices that have one.

/// Fails, naming both options, when `--autocast` is given for a device whose type has no
/// autocast policy (Note [--autocast on every device]).
pub fn check_autocast_device(dtype: Option<AutocastDtype>, device: Device) -> Result<(), String> {
    let Some(dtype) = dtype else { return Ok(()) };
    if is_autocast_available(device.ty) {
        return Ok(());
    }
    let available: Vec<&str> = autocast_device_types().iter().map(|t| t.name()).collect();
    Err(format!(
        "--autocast {} --device {device}: User specified an unsupported autocast device_type \
         '{}' (autocast runs on {} in this build)",
        dtype.name(),
        device.ty,
        available.join(", ")
    ))
}

/// An autocast region of `dtype` for `device`'s type until dropped, or nothing for `None`
/// (Note [--autocast on every device]).
pub fn autocast_region(
    dtype: Option<AutocastDtype>,
    device: Device,
) -> Result<Option<AutocastGuard>, DispatchError> {
    dtype
        .map(|d| AutocastGuard::new(device, d.scalar_type()))
        .transpose()
}

/// The layer options of `switchboard train` (flattened into its arguments).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct LayerOptions {
    /// Trains in mixed precision: each forward pass (model and loss) runs in an autocast
    /// region of this dtype for the --device (cpu, or a linked backend with an autocast policy); backward and the optimizer run after it, as PyTorch recommends.
    #[arg(long, value_enum, value_name = "DTYPE")]
    pub autocast: Option<AutocastDtype>,
    /// Counts the FLOPs of the first training step (forward, backward, optimizer) with a
    /// FLOP-counting dispatch mode and prints them per operator.
    #[arg(long)]
    pub count_flops: bool,
    /// Traces the first training step (forward, loss, backward, optimizer update) and writes
    /// its graph, every operator call in execution order: JSON for a .json file, Graphviz DOT
    /// for .dot.
    #[arg(long, value_name = "FILE.json|FILE.dot")]
    pub trace_graph: Option<PathBuf>,
    /// Every training step runs functionalized (`functionalize(step)`): the forward and the
    /// optimizer call no in-place or out= operator, views become their `*_copy` operators, and
    /// each parameter and optimizer buffer the step updates is written back (`copy_`) at the
    /// end; so in the graph `--trace-graph` writes (`make_fx(functionalize(step))`) and in
    /// the graphs the lazy device captures.
    #[arg(long)]
    pub functionalize: bool,
}

/// The functionalization of a training step (`--functionalize`): captured parameters and
/// buffers lifted on their first write, written back by [`FunctionalStep::finish`] (Note
/// [Captured state] in switchboard-functionalize).
pub struct FunctionalStep(FunctionalizeGuard);

impl FunctionalStep {
    /// Starts functionalizing the step if `options.functionalize`.
    pub fn start(options: &LayerOptions) -> Option<FunctionalStep> {
        options
            .functionalize
            .then(|| FunctionalStep(FunctionalizeGuard::lifting(Remove::MutationsAndViews)))
    }

    /// Runs `backward` of `loss` on its value, outside functionalization: autograd records the
    /// values (Note [Functionalization above autograd]); a persistent functional loss (a lazy
    /// device's) is its own value (Note [Functionalization over functional tensors]).
    pub fn backward(loss: &Tensor) -> Result<(), DispatchError> {
        let value = from_functionalized(loss)?;
        let _values = DisableFunctionalizationGuard::new();
        value.backward()
    }

    /// Ends the step's functionalization, writing back what it updated (without autograd).
    pub fn finish(self) -> Result<(), DispatchError> {
        let _no_grad = switchboard::autograd::no_grad();
        self.0.finish()
    }
}

/// The formats every graph the CLI writes comes in (`--trace-graph`, `train --graph-out`):
/// the graph IR's one JSON form (`Graph::to_json`, pretty-printed) and its DOT form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphFormat {
    /// `Graph::to_json`.
    Json,
    /// `Graph::to_dot`.
    Dot,
}

impl GraphFormat {
    /// The format a file name's extension asks for (`.json`, `.dot`, any case).
    pub fn of_path(path: &Path) -> Option<GraphFormat> {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("json") => Some(GraphFormat::Json),
            Some(e) if e.eq_ignore_ascii_case("dot") => Some(GraphFormat::Dot),
            _ => None,
        }
    }

    /// A graph's text in this format, given its JSON and DOT forms.
    pub fn render(
        self,
        json: impl FnOnce() -> serde_json::Value,
        dot: impl FnOnce() -> String,
    ) -> String {
        match self {
            GraphFormat::Json => {
                serde_json::to_string_pretty(&json()).expect("a JSON value serializes")
            }
            GraphFormat::Dot => dot(),
        }
    }
}

/// The format of a `--trace-graph` file, from its extension, or the error naming the option.
pub fn trace_graph_format(path: &Path) -> Result<GraphFormat, String> {
    GraphFormat::of_path(path).ok_or_else(|| {
        format!(
            "--trace-graph {}: the file name must end in .json or .dot (Graphviz)",
            path.display()
        )
    })
}

/// A trace of one training step, when asked for: its inputs are the parameters and the
/// batch, its outputs the loss and the updated parameters.
pub struct StepTrace {
    tracer: Tracer,
    path: PathBuf,
    format: GraphFormat,
    /// The run's input files, which the graph must not overwrite.
    inputs: Vec<PathBuf>,
}

impl StepTrace {
    /// Starts tracing if `options.trace_graph` and this is the first step; the graph will not
    /// be written over any of `inputs`.
    pub fn start(
        options: &LayerOptions,
        step: usize,
        parameters: &[Tensor],
        batch: &[&Tensor],
        inputs: &[&Path],
    ) -> Result<Option<StepTrace>, TrainError> {
        let Some(path) = options.trace_graph.as_ref().filter(|_| step == 0) else {
            return Ok(None);
        };
        let format = trace_graph_format(path).map_err(TrainError::Config)?;
        let tracer = Tracer::start();
        for t in parameters.iter().chain(batch.iter().copied()) {
            tracer.input(t)?;
        }
        Ok(Some(StepTrace {
            tracer,
            path: path.clone(),
            format,
            inputs: inputs.iter().map(|p| p.to_path_buf()).collect(),
        }))
    }

    /// Stops tracing and writes the graph; a line saying what was written.
    pub fn finish(self, loss: &Tensor, parameters: &[Tensor]) -> Result<String, TrainError> {
        let mut outputs = vec![loss.clone()];
        outputs.extend(parameters.iter().cloned());
        let traced = self.tracer.finish(&outputs)?;
        let text = self.format.render(|| traced.to_json(), || traced.to_dot());
        let inputs: Vec<&Path> = self.inputs.iter().map(PathBuf::as_path).collect();
        let written = write_output_file(&self.path, text.as_bytes(), &inputs).map_err(|e| {
            TrainError::Config(format!("--trace-graph {}: {e}", self.path.display()))
        })?;
        Ok(format!(
            "graph of one training step ({} operator calls) written to {}\n{}",
            traced.op_names().len(),
            self.path.display(),
            written.note()
        ))
    }
}

/// A FLOP counter pushed as a dispatch mode over one training step, when asked for.
pub struct StepFlops {
    counter: Rc<FlopCounterMode>,
    _mode: ModeGuard,
}

impl StepFlops {
    /// Starts counting if `options.count_flops` and this is the first step.
    pub fn start(options: &LayerOptions, step: usize) -> Option<StepFlops> {
        (options.count_flops && step == 0).then(|| {
            let counter = FlopCounterMode::new();
            StepFlops {
                _mode: push_mode(counter.clone()),
                counter,
            }
        })
    }

    /// Stops counting; the per-operator table.
    pub fn finish(self) -> String {
        let StepFlops { counter, _mode } = self;
        drop(_mode);
        format!("FLOPs of one training step:\n{}", counter.table())
    }
}

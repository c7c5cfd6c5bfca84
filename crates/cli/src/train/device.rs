//! `switchboard train --device DEVICE`: the training job on another device, and what the lazy
//! backend adds to it (the graph of one step, `--graph-out`, and the metrics report).
//!
//! The model's parameters are moved to the device once (`Module::to_device`: leaves of their
//! own there, as `model.to(device)` makes them), the test set once, each minibatch when it is
//! drawn (Note [The --device option] in [`crate::device`]). On `lazy`, a step's forward,
//! backward and optimizer update are captured and run when the step's accuracy and loss are
//! read (`item`), with the prepared plan of the step's graph taken from the cache from the
//! second step on; the per-epoch numbers are eager's, because the graph runs the same CPU
//! kernels in the same order.

use std::io::Write;
use std::path::{Path, PathBuf};

use switchboard::lazy;
use switchboard_tensor::{write_output_file, Device, Tensor};

use super::TrainError;
use crate::device::{is_lazy, to_device};
use crate::layers::GraphFormat;

/// Where the training runs, and what it writes about the lazy backend.
pub(super) struct Placement {
    device: Device,
    graph_out: Option<(PathBuf, GraphFormat)>,
    /// The run's input files, which the graph must not overwrite.
    inputs: Vec<PathBuf>,
}

impl Placement {
    /// Checks `--device` and `--graph-out` together: a graph is written only on `lazy`, as
    /// `.dot` or `.json`.
    pub fn new(
        device: Device,
        graph_out: Option<&Path>,
        inputs: &[&Path],
    ) -> Result<Placement, TrainError> {
        let graph_out = match graph_out {
            None => None,
            Some(_) if !is_lazy(device) => {
                return Err(TrainError::Config(format!(
                    "--graph-out needs --device lazy (the graph of a step is the lazy \
                     backend's; the device is {device})"
                )))
            }
            Some(p) => {
                let Some(format) = GraphFormat::of_path(p) else {
                    return Err(TrainError::Config(format!(
                        "--graph-out {}: the file name must end in .dot (Graphviz) or .json",
                        p.display()
                    )));
                };
                Some((p.to_path_buf(), format))
            }
        };
        if is_lazy(device) {
            // The report covers this run only.
            lazy::backend(device)?.reset_stats();
        }
        // The device the model's tensors are on: `cpu` for `--device cpu:0`.
        let device = device.tensor_device();
        Ok(Placement {
            device,
            graph_out,
            inputs: inputs.iter().map(|p| p.to_path_buf()).collect(),
        })
    }

    /// The device the model and the data are on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// `t` on the device.
    pub fn to_device(&self, t: &Tensor) -> Result<Tensor, TrainError> {
        Ok(to_device(t, self.device)?)
    }

    /// Called once a step's forward, backward and update are captured, before anything of
    /// the step is read: writes the first step's graph (`--graph-out`). Returns a note to
    /// print, if any ([`Written::note`](switchboard_tensor::Written::note)).
    pub fn step_captured(&self, step: usize) -> Result<String, TrainError> {
        let Some((path, format)) = &self.graph_out else {
            return Ok(String::new());
        };
        if step != 0 {
            return Ok(String::new());
        }
        let graph = lazy::backend(self.device)?.pending_graph();
        let text = format.render(|| graph.to_json(), || graph.to_dot());
        let inputs: Vec<&Path> = self.inputs.iter().map(PathBuf::as_path).collect();
        let written = write_output_file(path, text.as_bytes(), &inputs)
            .map_err(|e| TrainError::Config(format!("--graph-out {}: {e}", path.display())))?;
        Ok(written.note())
    }

    /// The lazy backend's metrics report (on `lazy`), after the run.
    pub fn report(&self, out: &mut dyn Write) -> Result<Option<lazy::LazyStats>, TrainError> {
        if !is_lazy(self.device) {
            return Ok(None);
        }
        let backend = lazy::backend(self.device)?;
        writeln!(out)?;
        write!(out, "{}", backend.metrics_report())?;
        Ok(Some(backend.stats()))
    }
}

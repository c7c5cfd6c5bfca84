//! The two ways to trace: [`trace`] (a function of some inputs) and [`Tracer`] (a guard over
//! any code).

use std::cell::RefCell;
use std::rc::Rc;

use switchboard_dispatcher::Result;
use switchboard_modes::{push_mode, ModeGuard};
use switchboard_tensor::Tensor;

use crate::mode::{State, TraceMode};
use crate::traced::Traced;

/// Records every operator call made on this thread, below autograd, while it lives (Note
/// \[Tracing\]); [`finish`](Tracer::finish) returns the graph. The guard form of [`trace`], for
/// code that is not one function of its inputs (a training step over a model and an
/// optimizer).
///
/// ```
/// use switchboard_cpu as _; // links the CPU kernels
/// use switchboard_ops::{self as ops, TensorOps};
/// use switchboard_trace::Tracer;
///
/// let x = ops::ones(&[2, 3])?;
/// let tracer = Tracer::start();
/// tracer.input(&x)?;
/// let y = x.relu()?.sum()?;
/// let traced = tracer.finish(&[y])?;
/// assert_eq!(traced.op_names(), ["aten::relu", "aten::sum"]);
/// # Ok::<(), switchboard_dispatcher::DispatchError>(())
/// ```
#[must_use = "the trace records only while the tracer lives"]
pub struct Tracer {
    state: Rc<RefCell<State>>,
    mode: Option<ModeGuard>,
}

impl Tracer {
    /// Starts recording: pushes the tracing mode on this thread's mode stack.
    pub fn start() -> Tracer {
        let state = Rc::new(RefCell::new(State::default()));
        let mode = push_mode(Rc::new(TraceMode {
            state: state.clone(),
        }));
        Tracer {
            state,
            mode: Some(mode),
        }
    }

    /// Declares `t` the next input of the graph ([`Traced::run`] takes a tensor in its
    /// place). An error when the trace has already seen `t`.
    pub fn input(&self, t: &Tensor) -> Result<()> {
        self.state.borrow_mut().add_input(t).map(|_| ())
    }

    /// Stops recording; the graph, whose outputs are `outputs` (tensors the trace produced,
    /// inputs, or constants).
    pub fn finish(mut self, outputs: &[Tensor]) -> Result<Traced> {
        drop(self.mode.take());
        let mut state = self.state.borrow_mut();
        let values = outputs
            .iter()
            .map(|t| state.value_of(t))
            .collect::<Result<Vec<_>>>()?;
        state.graph.set_outputs(values)?;
        let graph = std::mem::take(&mut state.graph);
        let inputs = std::mem::take(&mut state.inputs);
        Ok(Traced::new(graph, inputs))
    }
}

/// Traces `f` on `inputs` (PyTorch's `make_fx(f)(*inputs)`): runs it eagerly with every
/// operator call below autograd recorded, and returns the graph of the calls, whose inputs
/// are `inputs` and whose outputs are what `f` returns.
///
/// `f` gets the inputs themselves: it computes what eager code computes (and writes what it
/// writes). Tensors it reads that are neither inputs nor results of traced calls are
/// constants of the graph. When `f` runs backward, the backward calls are in the graph too.
///
/// ```
/// use switchboard_cpu as _; // links the CPU kernels
/// use switchboard_ops::{self as ops, TensorOps};
/// use switchboard_tensor::Tensor;
///
/// let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0], &[3])?;
/// let traced = switchboard_trace::trace(&[x.clone()], |xs| {
///     Ok(vec![ops::mul(&xs[0].relu()?, &xs[0])?])
/// })?;
/// assert_eq!(traced.op_names(), ["aten::relu", "aten::mul.Tensor"]);
/// let y = traced.run(&[Tensor::from_vec(vec![2.0f32, 3.0, -1.0], &[3])?])?;
/// assert_eq!(y[0].to_vec::<f32>()?, [4.0, 9.0, 0.0]);
/// # Ok::<(), switchboard_dispatcher::DispatchError>(())
/// ```
pub fn trace<F>(inputs: &[Tensor], f: F) -> Result<Traced>
where
    F: FnOnce(&[Tensor]) -> Result<Vec<Tensor>>,
{
    let tracer = Tracer::start();
    for t in inputs {
        tracer.input(t)?;
    }
    let outputs = f(inputs)?;
    tracer.finish(&outputs)
}

//! Running a sample: its tensors made on a device, its arguments boxed in schema order
//! (defaults for the ones it leaves out), the operator or one of its variants called through
//! the dispatcher.

use switchboard_dispatcher::{
    stack_tensors, DispatchError, Dispatcher, IValue, OperatorHandle, Result, Stack,
};
use switchboard_ops as ops;
use switchboard_schema::FunctionSchema;
use switchboard_tensor::{Device, ScalarType, Tensor};

use crate::sample::{Arg, Sample};
use crate::spec::TensorSpec;

/// An error of the harness itself (a sample that does not fit its schema), as a dispatch error.
pub fn harness_error(msg: impl Into<String>) -> DispatchError {
    DispatchError::from(switchboard_dispatcher::DispatchErrorKind::Schema(
        msg.into(),
    ))
}

/// The operator `aten::name` and its schema.
pub fn operator(name: &str) -> Result<(OperatorHandle, FunctionSchema)> {
    let op = Dispatcher::global().find_schema_or_throw(&format!("aten::{name}"))?;
    let schema = op
        .schema()
        .ok_or_else(|| harness_error(format!("{name}: no schema")))?
        .schema
        .clone();
    Ok((op, schema))
}

/// One tensor of a prepared sample: where it goes and the base it is a view of.
#[derive(Clone, Debug)]
pub struct TensorSlot {
    /// How it is made.
    pub spec: TensorSpec,
    /// The schema argument it is (or is an item of).
    pub arg: String,
    /// Its base, made once (see [`TensorSpec::base`]).
    pub base: Tensor,
}

#[derive(Clone, Debug)]
enum Slot {
    Tensor(usize),
    Tensors(Vec<usize>),
    OptionalTensors(Vec<Option<usize>>),
    Value(IValue),
}

/// A sample made on a device: its tensors' bases and its boxed arguments, ready to call the
/// functional operator or a variant any number of times.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The functional operator.
    pub op: OperatorHandle,
    /// Its schema.
    pub schema: FunctionSchema,
    /// The sample's tensors, in argument order.
    pub tensors: Vec<TensorSlot>,
    slots: Vec<Slot>,
}

impl Prepared {
    /// Prepares `sample` of operator `name` on `device`; floating tensors take `float_dtype`
    /// when given (float64 for gradcheck). A `device` argument the sample gives as the CPU
    /// becomes `device`, and off the CPU (Meta, `lazy`) so does one it leaves out: a factory
    /// makes its result on the device of the run, as OpInfo's device-generic tests pass
    /// `device=`.
    pub fn new(
        name: &str,
        sample: &Sample,
        device: Device,
        float_dtype: Option<ScalarType>,
    ) -> Result<Prepared> {
        let (op, schema) = operator(name)?;
        let mut tensors = Vec::new();
        let mut make = |spec: &TensorSpec, arg: &str| -> Result<usize> {
            let base = spec.base(device, float_dtype, 0)?;
            tensors.push(TensorSlot {
                spec: spec.clone(),
                arg: arg.to_owned(),
                base,
            });
            Ok(tensors.len() - 1)
        };
        let mut slots = Vec::new();
        let inputs: Vec<_> = schema.arguments().iter().filter(|a| !a.is_out()).collect();
        if sample.args.len() > inputs.len() {
            return Err(harness_error(format!(
                "{name}: {} positional arguments for {} inputs",
                sample.args.len(),
                inputs.len()
            )));
        }
        for (i, a) in inputs.iter().enumerate() {
            let given = sample.args.get(i).or_else(|| sample.kwarg(a.name()));
            let slot =
                match given {
                    Some(Arg::Tensor(t)) => Slot::Tensor(make(t, a.name())?),
                    Some(Arg::Tensors(ts)) => Slot::Tensors(
                        ts.iter()
                            .map(|t| make(t, a.name()))
                            .collect::<Result<_>>()?,
                    ),
                    Some(Arg::OptionalTensors(ts)) => Slot::OptionalTensors(
                        ts.iter()
                            .map(|t| t.as_ref().map(|t| make(t, a.name())).transpose())
                            .collect::<Result<_>>()?,
                    ),
                    // A sample written for the CPU runs on the device of the run.
                    Some(Arg::Value(IValue::Device(d))) if d.is_cpu() => Slot::Value(device.into()),
                    Some(Arg::Value(v)) => Slot::Value(v.clone()),
                    None if a.name() == "device" && !device.is_cpu() => Slot::Value(device.into()),
                    None => {
                        let d = a.default_value().ok_or_else(|| {
                            harness_error(format!("{name}: the sample gives no `{}`", a.name()))
                        })?;
                        Slot::Value(IValue::from_schema_default(d, a.ty(), a.n()).ok_or_else(
                            || harness_error(format!("{name}: `{}`'s default", a.name())),
                        )?)
                    }
                };
            slots.push(slot);
        }
        for (k, _) in &sample.kwargs {
            if !inputs.iter().any(|a| a.name() == *k) {
                return Err(harness_error(format!("{name}: no argument `{k}`")));
            }
        }
        Ok(Prepared {
            op,
            schema,
            tensors,
            slots,
        })
    }

    /// The sample's tensors as the operator sees them: views of the bases (which a call
    /// writing its arguments would change: see [`Prepared::fresh_inputs`]).
    pub fn inputs(&self) -> Result<Vec<Tensor>> {
        self.tensors.iter().map(|s| s.spec.view(&s.base)).collect()
    }

    /// The sample's tensors as views of copies of the bases, for a call that writes them.
    pub fn fresh_inputs(&self) -> Result<Vec<Tensor>> {
        self.tensors
            .iter()
            .map(|s| s.spec.view(&ops::clone(&s.base)?))
            .collect()
    }

    /// The boxed arguments (without `out=` ones), with `tensors` in the sample's tensor order.
    pub fn stack(&self, tensors: &[Tensor]) -> Stack {
        self.slots
            .iter()
            .map(|s| match s {
                Slot::Tensor(i) => IValue::Tensor(tensors[*i].clone()),
                Slot::Tensors(is) => {
                    IValue::TensorList(is.iter().map(|i| tensors[*i].clone()).collect())
                }
                Slot::OptionalTensors(is) => IValue::OptionalTensorList(
                    is.iter().map(|i| i.map(|i| tensors[i].clone())).collect(),
                ),
                Slot::Value(v) => v.clone(),
            })
            .collect()
    }

    /// Calls the functional operator on `tensors`; its returns.
    pub fn call(&self, tensors: &[Tensor]) -> Result<Vec<IValue>> {
        let mut stack = self.stack(tensors);
        self.op.call_boxed(&mut stack)?;
        Ok(stack)
    }

    /// Calls `variant` (an in-place or `out=` form with the same arguments) on `tensors`,
    /// with `outs` as its `out=` arguments; its returns.
    pub fn call_variant(
        &self,
        variant: &OperatorHandle,
        tensors: &[Tensor],
        outs: &[Tensor],
    ) -> Result<Vec<IValue>> {
        let schema = variant
            .schema()
            .ok_or_else(|| harness_error("variant without schema"))?;
        let mut stack = self.stack(tensors);
        // A factory's out= form has no dtype/layout/device/pin_memory arguments.
        let kept: Vec<&str> = schema
            .schema
            .arguments()
            .iter()
            .filter(|a| !a.is_out())
            .map(|a| a.name())
            .collect();
        if kept.len() != stack.len() {
            let names: Vec<&str> = self.schema.arguments().iter().map(|a| a.name()).collect();
            stack = stack
                .into_iter()
                .zip(names)
                .filter(|(_, n)| kept.contains(n))
                .map(|(v, _)| v)
                .collect();
        }
        stack.extend(outs.iter().cloned().map(IValue::Tensor));
        variant.call_boxed(&mut stack)?;
        Ok(stack)
    }

    /// The sample tensors gradcheck differentiates with respect to: floating, not marked
    /// `no_grad`, and arguments named in `differentiable` (any argument when `None`, for an
    /// operator differentiated through its decomposition).
    pub fn grad_inputs(&self, differentiable: Option<&[&str]>) -> Vec<usize> {
        (0..self.tensors.len())
            .filter(|&i| {
                let s = &self.tensors[i];
                s.spec.grad
                    && (s.spec.dtype.is_floating_point() || s.spec.dtype.is_complex())
                    && differentiable.is_none_or(|names| names.contains(&s.arg.as_str()))
            })
            .collect()
    }

    /// Reseeds the sample's own generators (`generator=` arguments) and the default one, so
    /// that two calls of a random operator draw the same values.
    pub fn reseed(&self, seed: u64) {
        switchboard_tensor::manual_seed(seed);
        for s in &self.slots {
            if let Slot::Value(IValue::Generator(g)) = s {
                g.manual_seed(seed);
            }
        }
    }

    /// The index of the sample tensor that is argument `name` (its first, for a list).
    pub fn tensor_of(&self, name: &str) -> Option<usize> {
        self.tensors.iter().position(|t| t.arg == name)
    }
}

/// The tensors among an operator's returns (lists flattened), in order.
pub fn returned_tensors(returns: &[IValue]) -> Vec<Tensor> {
    stack_tensors(returns).cloned().collect()
}

//! `switchboard call --device DEVICE`: the call's tensors on another device (Note [The
//! --device option] in `switchboard_cli::device`).

use switchboard::dispatcher::{DispatchError, Stack};
use switchboard::tensor::{Device, Tensor};
use switchboard_cli::device::{parse_device, stack_to_cpu, stack_to_device, to_cpu, to_device};

use super::value::Inputs;

use super::{one_line, CallError};

/// Where the call runs: the CPU (no `--device`, or `--device cpu`) or another device.
pub(super) struct OnDevice<'a> {
    device: Option<Device>,
    op_name: &'a str,
}

impl<'a> OnDevice<'a> {
    /// Reads `--device` (a bad device string is [`CallError::Device`]).
    pub fn new(text: Option<&str>, op_name: &'a str) -> Result<OnDevice<'a>, CallError> {
        let device = text
            .map(parse_device)
            .transpose()
            .map_err(CallError::Device)?
            // `cpu:0` too: CPU tensors are on `cpu` (Note [The devices of CPU and meta tensors]).
            .filter(|d| !d.is_cpu());
        if let Some(d) = device {
            // `remote_accelerator`: the worker SWITCHBOARD_WORKER names.
            switchboard_cli::device::connect_remote(d, None).map_err(CallError::Device)?;
        }
        Ok(OnDevice { device, op_name })
    }

    /// The device the call runs on (`cpu` without `--device`).
    pub fn device(&self) -> Device {
        self.device.unwrap_or(Device::CPU)
    }

    fn fail(&self, what: &str, e: DispatchError) -> CallError {
        CallError::Device(format!(
            "{}: {what}: {}",
            self.op_name,
            one_line(&e.to_string())
        ))
    }

    /// Moves the tensor arguments of `stack` to the device.
    pub fn inputs(&self, stack: &mut Stack) -> Result<(), CallError> {
        match self.device {
            Some(d) => stack_to_device(stack, d)
                .map_err(|e| self.fail(&format!("moving the inputs to {d}"), e)),
            None => Ok(()),
        }
    }

    /// Moves the input file's gradient weights (`grad_outI`, read by `--backward` besides the
    /// arguments) to the device: every tensor the call reads is there, as the outputs they
    /// weight are.
    pub fn grad_outputs(&self, inputs: &mut Inputs) -> Result<(), CallError> {
        let (Some(d), Some(map)) = (self.device, inputs.as_mut()) else {
            return Ok(());
        };
        for (name, t) in map.iter_mut().filter(|(k, _)| k.starts_with("grad_out")) {
            *t = to_device(t, d).map_err(|e| self.fail(&format!("moving {name} to {d}"), e))?;
        }
        Ok(())
    }

    /// Moves the tensor outputs and the gradients back to the CPU (on `lazy`, this runs the
    /// captured graph: a failure of the call shows here).
    pub fn outputs(
        &self,
        returns: &mut Stack,
        grads: &mut [(String, Tensor)],
    ) -> Result<(), CallError> {
        let Some(d) = self.device else { return Ok(()) };
        let what = format!("moving the outputs from {d} to cpu");
        stack_to_cpu(returns).map_err(|e| self.fail(&what, e))?;
        for (_, g) in grads.iter_mut() {
            *g = to_cpu(g).map_err(|e| self.fail(&what, e))?;
        }
        Ok(())
    }
}

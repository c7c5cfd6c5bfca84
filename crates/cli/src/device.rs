//! `--device DEVICE`: where `switchboard call` and `switchboard train` run their operators.
//!
//! Note [The --device option]
//! Inputs are created on the CPU (read from a file, or built from the data set) and moved to
//! the device with `_to_copy` through the dispatcher, as `tensor.to(device)` does in PyTorch;
//! results are moved back to the CPU the same way before they are written. So on `lazy` every
//! call is captured by the lazy backend (switchboard-lazy) and runs when a result is read, on
//! `meta` only shapes are computed (reading a result is then the meta backend's error), and a
//! device without a backend in this build (`cuda`) fails at the first move with the
//! dispatcher's "no kernel" error. Non-tensor arguments are left as they are: a `Device`
//! argument of a factory still says where the factory allocates. `cpu:0` is the CPU and
//! `meta:0` is meta (Note [The devices of CPU and meta tensors]), and `--autocast` opens the
//! region of the device's type (Note [--autocast on every device]).
//!
//! Out-of-tree backends linked into this build behind cargo features (`--features npu`: the
//! `npu` backend of `extensions/npu`, PrivateUse1 renamed) are installed when their device is
//! named, so a build that links one behaves as one without until then. `train` runs only where
//! a whole training step can: the CPU, `lazy` and the linked backends
//! ([`parse_train_device`]).

use std::str::FromStr;

use switchboard::autograd::no_grad;
use switchboard::dispatcher::{IValue, Result, Stack};
use switchboard::lazy;
use switchboard::ops;
use switchboard::tensor::{Device, Tensor};

/// Parses a `--device` value as `torch.device` does; `lazy` is the default lazy device,
/// `lazy:0`, and `lazy:N` another one (Note [Lazy devices] in switchboard-lazy).
///
/// ```
/// use switchboard_cli::device::parse_device;
/// assert_eq!(parse_device("lazy").unwrap().to_string(), "lazy:0");
/// assert_eq!(parse_device("lazy:2").unwrap().to_string(), "lazy:2");
/// assert_eq!(parse_device("cpu").unwrap().to_string(), "cpu");
/// assert!(parse_device("gpu").unwrap_err().contains("gpu"));
/// ```
pub fn parse_device(text: &str) -> std::result::Result<Device, String> {
    let ty = text.trim().split(':').next().unwrap_or_default();
    install_linked(ty)?;
    let d = Device::from_str(text.trim()).map_err(|e| format!("--device {text:?}: {e}"))?;
    Ok(match d.ty {
        ty if lazy::is_lazy_device_type(ty) => lazy::backend(d)
            .map_err(|e| format!("--device {text:?}: {e}"))?
            .device(),
        _ => d,
    })
}

/// The out-of-tree backends this build links, by device name.
pub const LINKED_BACKENDS: &[&str] = &[
    #[cfg(feature = "npu")]
    "npu",
];

/// Installs the linked backend of device type name `ty`, if there is one (and the
/// `remote_accelerator` device type, which every build has).
fn install_linked(ty: &str) -> std::result::Result<(), String> {
    if ty == switchboard_remote::DEVICE_NAME {
        switchboard_remote::install().map_err(|e| e.to_string())?;
    }
    #[cfg(feature = "npu")]
    if ty == switchboard_npu::NAME {
        switchboard_npu::init().map_err(|e| e.to_string())?;
    }
    let _ = ty;
    Ok(())
}

/// Parses `train`'s `--device`: [`parse_device`], limited to the devices a whole training
/// step runs on (the CPU, `lazy`, and the linked out-of-tree backends); the error names them.
pub fn parse_train_device(text: &str) -> std::result::Result<Device, String> {
    let device = parse_device(text)?;
    if device.is_cpu() || is_lazy(device) || LINKED_BACKENDS.contains(&device.ty.name()) {
        return Ok(device);
    }
    let mut available = vec!["cpu", "lazy", switchboard_remote::DEVICE_NAME];
    available.extend(LINKED_BACKENDS);
    Err(format!(
        "this build cannot train on {device}: available devices are {} (out-of-tree backends \
         are linked with cargo features, e.g. --features npu)",
        available.join(", ")
    ))
}

/// Whether `device` is the lazy backend's (`lazy`, or a lazy device type such as
/// `remote_accelerator`).
pub fn is_lazy(device: Device) -> bool {
    lazy::is_lazy_device_type(device.ty)
}

/// Connects a `remote_accelerator` device to its worker: `worker` (`--worker ADDR`), else the
/// one `SWITCHBOARD_WORKER` names, with the token of `SWITCHBOARD_WORKER_TOKEN` and, when
/// `SWITCHBOARD_WORKER_CA` names a certificate, TLS. Other devices need no worker (and
/// refuse one).
pub fn connect_remote(device: Device, worker: Option<&str>) -> std::result::Result<(), String> {
    use switchboard_remote::WORKER_ENV;
    if !switchboard_remote::is_remote(device) {
        return match worker {
            Some(w) => Err(format!(
                "--worker {w}: a worker runs the graphs of --device {} only (the device is \
                 {device})",
                switchboard_remote::DEVICE_NAME
            )),
            None => Ok(()),
        };
    }
    let addr = match worker {
        Some(w) => w.to_string(),
        None => std::env::var(WORKER_ENV).map_err(|_| {
            format!(
                "--device {device} needs a worker: --worker HOST:PORT or {WORKER_ENV}=HOST:PORT \
                 (start one with `switchboard worker --listen HOST:PORT`)"
            )
        })?,
    };
    let config = switchboard_remote::client_config_from_env(&addr);
    switchboard_remote::connect(device.index.unwrap_or(0), &addr, config)
        .map(|_| ())
        .map_err(|e| format!("--device {device}: {e}"))
}

/// `t` on `device`: `t` itself when it is there, else a copy (`_to_copy`, not recorded by
/// autograd: the copy is a new tensor of its own).
pub fn to_device(t: &Tensor, device: Device) -> Result<Tensor> {
    // A tensor created on `device` reports `device.tensor_device()` (`cpu` for `cpu:0`).
    if t.device() == device.tensor_device() {
        return Ok(t.clone());
    }
    let _no_grad = no_grad();
    ops::_to_copy_with(t, ops::ToCopyOptions::default().device(device))
}

/// `to_device(t, Device::CPU)`: a result read back for writing (on `lazy`, this runs the
/// pending graph).
pub fn to_cpu(t: &Tensor) -> Result<Tensor> {
    to_device(t, Device::CPU)
}

/// Moves every tensor in `v` (also inside lists and tuples) with `f`.
pub fn map_tensors(v: &mut IValue, f: &mut dyn FnMut(&Tensor) -> Result<Tensor>) -> Result<()> {
    match v {
        IValue::Tuple(vs) | IValue::GenericList(vs) => {
            for v in vs.iter_mut() {
                map_tensors(v, f)?;
            }
        }
        v => v.try_map_tensors(f)?,
    }
    Ok(())
}

/// Moves every tensor argument of `stack` to `device` (Note [The --device option]).
pub fn stack_to_device(stack: &mut Stack, device: Device) -> Result<()> {
    stack
        .iter_mut()
        .try_for_each(|v| map_tensors(v, &mut |t| to_device(t, device)))
}

/// Moves every tensor of `stack` back to the CPU.
pub fn stack_to_cpu(stack: &mut Stack) -> Result<()> {
    stack
        .iter_mut()
        .try_for_each(|v| map_tensors(v, &mut to_cpu))
}

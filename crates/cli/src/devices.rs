//! The devices `switchboard train --device` accepts: `cpu`, and the out-of-tree backends linked
//! into this build behind cargo features (`--features npu`: the `npu` backend of
//! `extensions/npu`, PrivateUse1 renamed). A backend is installed when its device is asked for,
//! so a build that links it behaves as one without until then.

use switchboard_tensor::Device;

/// The backends this build links, by device name.
pub const LINKED_BACKENDS: &[&str] = &[
    #[cfg(feature = "npu")]
    "npu",
];

/// Parses a `--device` value: a device string (`cpu`, `npu`, `npu:1`) whose backend is linked,
/// installing that backend first. Errors name the devices this build can train on.
pub fn parse_device(text: &str) -> Result<Device, String> {
    let ty = text.split(':').next().unwrap_or(text);
    install_linked(ty)?;
    let device: Device = text.parse().map_err(|e| format!("{e}"))?;
    if device.is_cpu() || LINKED_BACKENDS.contains(&device.ty.name()) {
        return Ok(device);
    }
    let mut available = vec!["cpu"];
    available.extend(LINKED_BACKENDS);
    Err(format!(
        "this build cannot train on {device}: available devices are {} (out-of-tree backends \
         are linked with cargo features, e.g. --features npu)",
        available.join(", ")
    ))
}

/// Installs the linked backend of device type name `ty`, if there is one.
fn install_linked(ty: &str) -> Result<(), String> {
    #[cfg(feature = "npu")]
    if ty == switchboard_npu::NAME {
        switchboard_npu::init().map_err(|e| e.to_string())?;
    }
    let _ = ty;
    Ok(())
}

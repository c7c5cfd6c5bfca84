//! State dicts: a module's parameters and buffers by PyTorch's dotted names
//! ([`state_dict`]), loaded back with `load_state_dict(strict=True)`'s checks and errors
//! ([`load_state_dict`]), and saved to / loaded from safetensors files as
//! `safetensors.torch.save_file(model.state_dict(), path)` writes them.

use std::collections::BTreeMap;
use std::path::Path;

use switchboard_autograd::{no_grad, AutogradTensor};
use switchboard_dispatcher::{DispatchError, DispatchErrorKind, Result};
use switchboard_ops as ops;
use switchboard_tensor::{load_safetensors_file, save_safetensors_file, Device, Tensor};

use crate::module::Module;

/// `module.state_dict()`: the parameters, then the buffers, each by its dotted name, detached
/// (handles to the module's own tensors, not copies).
pub fn state_dict(module: &dyn Module) -> Vec<(String, Tensor)> {
    module
        .named_parameters()
        .into_iter()
        .chain(module.named_buffers())
        .map(|(name, t)| (name, t.detach()))
        .collect()
}

/// A shape as PyTorch prints it: `torch.Size([3, 4])`.
fn torch_size(sizes: &[i64]) -> String {
    let dims: Vec<String> = sizes.iter().map(i64::to_string).collect();
    format!("torch.Size([{}])", dims.join(", "))
}

/// The module's class name, as PyTorch names it in errors: its description up to the
/// arguments (`Sequential`, `ResNet`).
fn class_name(module: &dyn Module) -> String {
    let describe = module.describe();
    describe
        .split(['(', '\n'])
        .next()
        .unwrap_or_default()
        .to_string()
}

/// `module.load_state_dict(state, strict=True)`: copies each entry of `state` into the
/// parameter or buffer of the same name (converting the dtype, as `copy_` does).
///
/// Note [All-or-nothing state dict loading]
/// PyTorch lists every missing key, every unexpected key and every size mismatch in one
/// error, in that order ("Error(s) in loading state_dict for Sequential:\n\tMissing key(s) in
/// state_dict: \"0.bias\". ..."), with its wording; it has copied the entries that matched by
/// then. Here every check runs before any copy, so a failed load leaves the module as it was.
pub fn load_state_dict(module: &dyn Module, state: &BTreeMap<String, Tensor>) -> Result<()> {
    let own = state_dict(module);
    let mut missing = Vec::new();
    let mut mismatched = Vec::new();
    for (name, t) in &own {
        match state.get(name) {
            None => missing.push(format!("\"{name}\"")),
            Some(src) if src.sizes() != t.sizes() => mismatched.push(format!(
                "size mismatch for {name}: copying a param with shape {} from checkpoint, the \
                 shape in current model is {}.",
                torch_size(src.sizes()),
                torch_size(t.sizes())
            )),
            Some(_) => {}
        }
    }
    let unexpected: Vec<String> = state
        .keys()
        .filter(|k| !own.iter().any(|(name, _)| name == *k))
        .map(|k| format!("\"{k}\""))
        .collect();
    let mut errors = Vec::new();
    if !missing.is_empty() {
        errors.push(format!(
            "Missing key(s) in state_dict: {}. ",
            missing.join(", ")
        ));
    }
    if !unexpected.is_empty() {
        errors.push(format!(
            "Unexpected key(s) in state_dict: {}. ",
            unexpected.join(", ")
        ));
    }
    errors.extend(mismatched);
    if !errors.is_empty() {
        return Err(DispatchErrorKind::Kernel(format!(
            "Error(s) in loading state_dict for {}:\n\t{}",
            class_name(module),
            errors.join("\n\t")
        ))
        .into());
    }
    let _guard = no_grad();
    for (name, t) in &own {
        let src = &state[name];
        ops::copy_(t, src).map_err(|e| {
            DispatchError::from(DispatchErrorKind::Kernel(format!(
                "While copying the parameter named \"{name}\", whose dimensions in the model \
                 are {} and whose dimensions in the checkpoint are {}, an exception occurred : \
                 {e}.",
                torch_size(t.sizes()),
                torch_size(src.sizes())
            )))
        })?;
    }
    Ok(())
}

/// Writes `module`'s state dict to a safetensors file (atomically; tensors on another device
/// are copied to the CPU first), as `safetensors.torch.save_file(module.state_dict(), path)`.
pub fn save_state_dict(module: &dyn Module, path: impl AsRef<Path>) -> Result<()> {
    let state = state_dict(module)
        .into_iter()
        .map(|(name, t)| {
            let t = if t.device() == Device::CPU {
                t
            } else {
                let _guard = no_grad();
                ops::_to_copy_with(&t, ops::ToCopyOptions::default().device(Device::CPU))?
            };
            Ok((name, t))
        })
        .collect::<Result<Vec<_>>>()?;
    let named: Vec<(&str, &Tensor)> = state.iter().map(|(n, t)| (n.as_str(), t)).collect();
    Ok(save_safetensors_file(path, &named, None)?)
}

/// Loads a safetensors file into `module` ([`load_state_dict`], strict).
pub fn load_state_dict_file(module: &dyn Module, path: impl AsRef<Path>) -> Result<()> {
    let state = load_safetensors_file(path)?;
    load_state_dict(module, &state)
}

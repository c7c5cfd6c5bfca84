//! The custom classes schemas may name (`__torch__.torch.classes.<ns>.<Name>`): PyTorch's
//! `torch::class_` registry, as far as the schema language needs it.

use std::collections::HashSet;
use std::fmt;
use std::sync::{OnceLock, RwLock};

/// Prefix of every custom class's qualified name.
pub(crate) const CUSTOM_CLASS_PREFIX: &str = "__torch__.torch.classes.";

// Note [Custom class registry]
// A schema may name a custom class only once it is registered: PyTorch's parser looks the
// qualified name up in its class registry and fails with "Unknown custom class type ns.Name.
// Please ensure it is registered." The registry here starts with the classes PyTorch 2.15
// registers when `torch` is imported (quantized and sparse packed parameters, the XNNPACK and
// oneDNN op contexts, RNN cell parameters, c10d's process groups and works, the profilers'
// records, NNAPI compilations, RPC worker infos), so PyTorch's own schemas parse;
// [`register_custom_class`] adds others, once each and for the life of the process, as
// `torch::class_` does. Only names are kept: schemas need nothing else of a class.

/// The classes registered when PyTorch is imported, as (namespace, class name).
const BUILTIN_CLASSES: &[(&str, &str)] = &[
    ("quantized", "LinearPackedParamsBase"),
    ("quantized", "Conv2dPackedParamsBase"),
    ("quantized", "Conv3dPackedParamsBase"),
    ("quantized", "EmbeddingPackedParamsBase"),
    ("sparse", "LinearPackedParamsBase"),
    ("xnnpack", "LinearOpContext"),
    ("xnnpack", "Conv2dOpContext"),
    ("xnnpack", "TransposeConv2dOpContext"),
    ("mkldnn", "ConvOpContext"),
    ("rnn", "CellParamsBase"),
    ("c10d", "ProcessGroup"),
    ("c10d", "Backend"),
    ("c10d", "Work"),
    ("c10d", "ReduceOp"),
    ("c10d", "SymmetricMemory"),
    ("dist_rpc", "WorkerInfo"),
    ("profiling", "SourceRef"),
    ("profiling", "InstructionStats"),
    ("profiling", "SourceStats"),
    ("profiling", "_ScriptProfile"),
    ("profiler", "_RecordFunction"),
    ("_nnapi", "Compilation"),
];

fn registry() -> &'static RwLock<HashSet<String>> {
    static REGISTRY: OnceLock<RwLock<HashSet<String>>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        RwLock::new(
            BUILTIN_CLASSES
                .iter()
                .map(|(ns, name)| qualified_name(ns, name))
                .collect(),
        )
    })
}

/// `__torch__.torch.classes.<ns>.<name>`.
pub(crate) fn qualified_name(namespace: &str, name: &str) -> String {
    let mut q = String::with_capacity(CUSTOM_CLASS_PREFIX.len() + namespace.len() + name.len() + 1);
    q.push_str(CUSTOM_CLASS_PREFIX);
    q.push_str(namespace);
    q.push('.');
    q.push_str(name);
    q
}

/// Whether the custom class with this qualified name (`__torch__.torch.classes.ns.Name`) is
/// registered (Note [Custom class registry]).
pub fn is_custom_class_registered(qualified_name: &str) -> bool {
    // A poisoned lock only means a registering thread panicked; the set itself is whole.
    let set = registry().read().unwrap_or_else(|e| e.into_inner());
    set.contains(qualified_name)
}

/// Why a custom class could not be registered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CustomClassError {
    message: String,
}

impl CustomClassError {
    /// The message, in PyTorch's words.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for CustomClassError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CustomClassError {}

/// PyTorch's `checkValidIdent`: letters, digits and underscores, not starting with a digit.
fn check_identifier(text: &str, what: &str) -> Result<(), CustomClassError> {
    if text.is_empty() {
        return Err(CustomClassError {
            message: format!("{what} must be a valid Python/C++ identifier, not empty."),
        });
    }
    for (i, c) in text.chars().enumerate() {
        let ok = c.is_ascii_alphabetic() || c == '_' || (i > 0 && c.is_ascii_digit());
        if !ok {
            return Err(CustomClassError {
                message: format!(
                    "{what} must be a valid Python/C++ identifier. Character '{c}' at index {i} \
                     is illegal."
                ),
            });
        }
    }
    Ok(())
}

/// Registers the custom class `namespace.name` (PyTorch's `torch::class_<T>(namespace, name)`),
/// so schemas may name `__torch__.torch.classes.<namespace>.<name>`. A class is registered once,
/// for the life of the process (Note [Custom class registry]).
///
/// ```
/// use switchboard_schema::{register_custom_class, FunctionSchema};
/// let schema = "myops::step(__torch__.torch.classes.myops.State s) -> Tensor";
/// assert!(FunctionSchema::parse(schema).is_err());
/// register_custom_class("myops", "State").unwrap();
/// assert!(FunctionSchema::parse(schema).is_ok());
/// assert!(register_custom_class("myops", "State").is_err()); // only once
/// ```
pub fn register_custom_class(namespace: &str, name: &str) -> Result<(), CustomClassError> {
    check_identifier(namespace, "Namespace name")?;
    check_identifier(name, "Class name")?;
    let qualified = qualified_name(namespace, name);
    let mut set = registry().write().unwrap_or_else(|e| e.into_inner());
    if set.contains(&qualified) {
        return Err(CustomClassError {
            message: format!(
                "Custom class with name {qualified} is already registered. Ensure that \
                 registration with torch::class_ is only called once."
            ),
        });
    }
    set.insert(qualified);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_classes_are_registered() {
        for (ns, name) in BUILTIN_CLASSES {
            assert!(is_custom_class_registered(&qualified_name(ns, name)));
        }
        assert!(!is_custom_class_registered(
            "__torch__.torch.classes.quantized.Nope"
        ));
        let err = register_custom_class("quantized", "LinearPackedParamsBase").unwrap_err();
        assert!(err.message().contains("is already registered"), "{err}");
    }

    #[test]
    fn names_must_be_identifiers() {
        let err = register_custom_class("my ns", "A").unwrap_err();
        assert_eq!(
            err.message(),
            "Namespace name must be a valid Python/C++ identifier. Character ' ' at index 2 is \
             illegal."
        );
        assert!(register_custom_class("ns", "1A").is_err());
        assert!(register_custom_class("", "A").is_err());
        assert!(register_custom_class("ns", "").is_err());
        assert!(!is_custom_class_registered("__torch__.torch.classes.ns.1A"));
        register_custom_class("unit_test_ns", "A1_b").unwrap();
        assert!(is_custom_class_registered(
            "__torch__.torch.classes.unit_test_ns.A1_b"
        ));
    }
}

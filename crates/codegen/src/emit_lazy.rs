//! [`lazy_registrations`]: the list of operators a lazy backend registers kernels for, from
//! a backend YAML file in the format of torch_xla's `xla_native_functions.yaml` (which drives
//! torchgen's lazy codegen): `backend: NAME` and `supported:`, a list of `name.overload`.

use std::collections::HashSet;

use yaml_rust2::{Yaml, YamlLoader};

use crate::model::NativeFunction;

/// The Rust source of `pub const REGISTERED_OPS: &[&str]`, the operators `backend_yaml`
/// lists under `supported:`, in file order. Every name must be an operator of `funcs` (as
/// torchgen checks a backend's list against native_functions.yaml), and none may repeat.
pub fn lazy_registrations(backend_yaml: &str, funcs: &[NativeFunction]) -> Result<String, String> {
    let docs = YamlLoader::load_from_str(backend_yaml).map_err(|e| format!("YAML: {e}"))?;
    let doc = docs
        .into_iter()
        .next()
        .ok_or("backend YAML: the file is empty")?;
    let backend = doc["backend"]
        .as_str()
        .ok_or("backend YAML: missing `backend:`")?
        .to_owned();
    let Yaml::Array(supported) = &doc["supported"] else {
        return Err("backend YAML: missing `supported:` (a list of operator names)".into());
    };
    let known: HashSet<String> = funcs.iter().map(qualified_name).collect();
    let mut seen = HashSet::new();
    let mut names = Vec::with_capacity(supported.len());
    for (i, entry) in supported.iter().enumerate() {
        let name = entry
            .as_str()
            .ok_or_else(|| format!("backend YAML: `supported:` entry {i} is not a name"))?;
        if !known.contains(name) {
            return Err(format!(
                "backend YAML: {name} is not an operator of native_functions.yaml (write \
                 `name.overload`, or `name` for the default overload)"
            ));
        }
        if !seen.insert(name) {
            return Err(format!("backend YAML: {name} is listed twice"));
        }
        names.push(format!("    {name:?},\n"));
    }
    Ok(format!(
        "/// The operators with a dedicated kernel on `{backend}` (generated from the backend's \
         YAML list).\npub const REGISTERED_OPS: &[&str] = &[\n{}];\n",
        names.concat()
    ))
}

/// `add.Tensor`, `relu`: an operator as a backend's list names it (no namespace for aten).
fn qualified_name(f: &NativeFunction) -> String {
    let name = f.schema.base_name();
    let name = name.strip_prefix("aten::").unwrap_or(name);
    match f.schema.overload_name() {
        "" => name.to_owned(),
        overload => format!("{name}.{overload}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_yaml;

    fn funcs() -> Vec<NativeFunction> {
        parse_yaml(
            "- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor\n\
             - func: relu(Tensor self) -> Tensor\n",
        )
        .unwrap()
    }

    #[test]
    fn lists_the_supported_operators() {
        let code = lazy_registrations(
            "backend: Lazy\nsupported:\n  - add.Tensor\n  - relu\n",
            &funcs(),
        )
        .unwrap();
        assert!(
            code.contains(
                "pub const REGISTERED_OPS: &[&str] = &[\n    \"add.Tensor\",\n    \"relu\",\n];"
            ),
            "{code}"
        );
    }

    #[test]
    fn refuses_unknown_repeated_and_malformed_entries() {
        let err = |yaml: &str| lazy_registrations(yaml, &funcs()).unwrap_err();
        assert!(err("backend: Lazy\nsupported:\n  - add.Scalar\n")
            .contains("add.Scalar is not an operator"));
        assert!(
            err("backend: Lazy\nsupported:\n  - relu\n  - relu\n").contains("relu is listed twice")
        );
        assert!(err("supported:\n  - relu\n").contains("missing `backend:`"));
        assert!(err("backend: Lazy\n").contains("missing `supported:`"));
        assert!(err("backend: Lazy\nsupported:\n  - [relu]\n").contains("entry 0 is not a name"));
    }
}

//! Generates the Meta registrations from switchboard-ops' native_functions.yaml.
use std::path::PathBuf;

fn main() {
    let yaml =
        std::env::var("DEP_SWITCHBOARD_OPS_YAML").expect("switchboard-ops exports its YAML path");
    println!("cargo:rerun-if-changed={yaml}");
    let text = std::fs::read_to_string(&yaml).expect("read native_functions.yaml");
    let funcs = switchboard_codegen::parse_yaml(&text).unwrap_or_else(|e| panic!("{e}"));
    let code = switchboard_codegen::backend(&funcs, "Meta", "switchboard_cpu", "switchboard_cpu")
        .unwrap_or_else(|e| panic!("{e}"));
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("register_meta.rs");
    std::fs::write(out, code).expect("write register_meta.rs");
}

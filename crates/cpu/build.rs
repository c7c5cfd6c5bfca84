//! Generates this crate's CPU kernel registrations from the ops crate's
//! native_functions.yaml (its path arrives as DEP_SWITCHBOARD_OPS_YAML).
use std::path::PathBuf;

fn main() {
    let yaml =
        std::env::var("DEP_SWITCHBOARD_OPS_YAML").expect("switchboard-ops exports its YAML path");
    println!("cargo:rerun-if-changed={yaml}");
    let text = std::fs::read_to_string(&yaml).expect("read native_functions.yaml");
    let funcs = switchboard_codegen::parse_yaml(&text).unwrap_or_else(|e| panic!("{e}"));
    let code = switchboard_codegen::backend(&funcs, "CPU", "crate", "switchboard_cpu")
        .unwrap_or_else(|e| panic!("{e}"));
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("register_cpu.rs");
    std::fs::write(out, code).expect("write register_cpu.rs");
}

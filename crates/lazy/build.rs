//! Generates `REGISTERED_OPS` from lazy_native_functions.yaml (see switchboard-codegen's
//! `lazy_registrations`), checked against the ops crate's native_functions.yaml (its path
//! arrives as DEP_SWITCHBOARD_OPS_YAML).
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let list = dir.join("lazy_native_functions.yaml");
    println!("cargo:rerun-if-changed={}", list.display());
    let yaml =
        std::env::var("DEP_SWITCHBOARD_OPS_YAML").expect("switchboard-ops exports its YAML path");
    println!("cargo:rerun-if-changed={yaml}");
    let text = std::fs::read_to_string(&yaml).expect("read native_functions.yaml");
    let funcs = switchboard_codegen::parse_yaml(&text).unwrap_or_else(|e| panic!("{e}"));
    let backend = std::fs::read_to_string(&list).expect("read lazy_native_functions.yaml");
    let code = switchboard_codegen::lazy_registrations(&backend, &funcs)
        .unwrap_or_else(|e| panic!("lazy_native_functions.yaml: {e}"));
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("registered_ops.rs");
    std::fs::write(out, code).expect("write registered_ops.rs");
}

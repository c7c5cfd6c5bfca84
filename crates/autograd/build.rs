//! Generates the backward nodes and the Autograd and ADInplaceOrView kernels from
//! switchboard-ops' native_functions.yaml and derivatives.yaml (see switchboard-codegen).
use std::path::PathBuf;

fn main() {
    let yaml =
        std::env::var("DEP_SWITCHBOARD_OPS_YAML").expect("switchboard-ops exports its YAML path");
    let derivatives = std::env::var("DEP_SWITCHBOARD_OPS_DERIVATIVES")
        .expect("switchboard-ops exports its derivatives.yaml path");
    println!("cargo:rerun-if-changed={yaml}");
    println!("cargo:rerun-if-changed={derivatives}");
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {p}: {e}"));
    let funcs = switchboard_codegen::parse_yaml(&read(&yaml)).unwrap_or_else(|e| panic!("{e}"));
    let derivs = switchboard_codegen::parse_derivatives(&read(&derivatives))
        .unwrap_or_else(|e| panic!("{e}"));
    let code = switchboard_codegen::autograd(&funcs, &derivs).unwrap_or_else(|e| panic!("{e}"));
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("autograd_generated.rs");
    std::fs::write(out, code).expect("write autograd_generated.rs");
}

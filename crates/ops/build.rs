//! Generates the typed operator API from native_functions.yaml (see switchboard-codegen).
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let yaml = dir.join("native_functions.yaml");
    println!("cargo:rerun-if-changed={}", yaml.display());
    // Backend crates read the same file to generate their registrations; the autograd crate
    // reads it with derivatives.yaml.
    println!("cargo:yaml={}", yaml.display());
    println!(
        "cargo:derivatives={}",
        dir.join("derivatives.yaml").display()
    );
    let text = std::fs::read_to_string(&yaml).expect("read native_functions.yaml");
    let funcs = switchboard_codegen::parse_yaml(&text).unwrap_or_else(|e| panic!("{e}"));
    let api = switchboard_codegen::api(&funcs).unwrap_or_else(|e| panic!("{e}"));
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("api.rs");
    std::fs::write(out, api).expect("write api.rs");
}

//! Instruction counting for the schema parser (run it under callgrind).
//!
//! `parse_count small N` parses `opN(Tensor a, Tensor b) -> Tensor` N times;
//! `parse_count native N` parses every `func:` schema of
//! `crates/ops/native_functions.yaml` (with the `aten::` namespace the ops
//! crate adds) N times.  Run it for two values of N and divide the
//! difference in instructions by the difference in parses, so that start-up
//! and file reading cancel out:
//!
//! ```text
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/x.100 target/release/examples/parse_count small 100
//! ```

use std::hint::black_box;
use std::path::Path;

use switchboard_schema::FunctionSchema;

/// The `func:` schemas of native_functions.yaml, namespaced like the ops crate does.
fn native_schemas() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ops/native_functions.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix("- func:"))
        .map(|f| {
            let f = f.trim();
            if f.contains("::") {
                f.to_owned()
            } else {
                format!("aten::{f}")
            }
        })
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "small".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let schemas = match mode.as_str() {
        "small" => vec!["opN(Tensor a, Tensor b) -> Tensor".to_owned()],
        "native" => native_schemas(),
        other => panic!("unknown mode {other:?}: use `small` or `native`"),
    };
    let mut ok = 0usize;
    for _ in 0..n {
        for s in &schemas {
            ok += usize::from(FunctionSchema::parse(black_box(s)).is_ok());
        }
    }
    println!("{} schemas x {n}: {ok} parsed", schemas.len());
}

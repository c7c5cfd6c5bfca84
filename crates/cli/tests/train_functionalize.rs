//! `switchboard train --functionalize`: every training step is functional, so the graph
//! `--trace-graph FILE` writes (`make_fx(functionalize(step))`) and the graph the lazy backend
//! captures have no in-place or out= operator but the final `copy_` of each parameter the
//! step updates; training goes on as without it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One epoch of `switchboard train` with `extra` arguments; (exit code, stdout, stderr).
fn train(extra: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["train", "--epochs", "1", "--no-progress", "--no-summary"])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Trains with `extra` and `--functionalize`, then without it, writing the graph to a fresh
/// file with `graph_flag`; the graph of the functionalized run, and the graph of the plain
/// one. Both runs must succeed with the same final accuracy: the functional program computes
/// what the eager one does.
fn functionalized_and_plain(
    graph_flag: &str,
    extra: &[&str],
) -> (Vec<serde_json::Value>, Vec<serde_json::Value>) {
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "switchboard-train-func-{}{graph_flag}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("step.json");
    let path_s = path.display().to_string();
    let args = [extra, &[graph_flag, &path_s]].concat();
    let (code, functional, stderr) = train(&[&args[..], &["--functionalize"]].concat());
    assert_eq!(code, Some(0), "{stderr}");
    let functional_graph = graph_nodes(&path);
    let (code, plain, stderr) = train(&args);
    assert_eq!(code, Some(0), "{stderr}");
    let plain_graph = graph_nodes(&path);
    let accuracy = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("final test accuracy"))
            .map(|l| l.split(", ").next().unwrap().to_owned())
    };
    assert!(accuracy(&plain).is_some(), "{plain}");
    assert_eq!(accuracy(&functional), accuracy(&plain));
    let _ = std::fs::remove_dir_all(&dir);
    (functional_graph, plain_graph)
}

/// The nodes of a graph JSON file, in order.
fn graph_nodes(path: &Path) -> Vec<serde_json::Value> {
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    json["nodes"].as_array().unwrap().clone()
}

/// A node's operator.
fn op(node: &serde_json::Value) -> String {
    node["op"].as_str().unwrap().to_owned()
}

/// Whether `op` writes an argument (an overload name with `_` or `out`).
fn writes(op: &str) -> bool {
    let name = op.trim_start_matches("aten::");
    let (base, overload) = name.split_once('.').unwrap_or((name, ""));
    base.ends_with('_') || overload.contains("out")
}

#[test]
fn the_functionalized_training_step_writes_only_its_parameters_at_the_end() {
    let (graph, _) = functionalized_and_plain("--trace-graph", &[]);
    let ops: Vec<String> = graph.iter().map(op).collect();
    let first_copy = ops.iter().position(|o| o == "aten::copy_").unwrap();
    let (body, tail) = ops.split_at(first_copy);
    // No operator of the body writes an argument.
    let written: Vec<&String> = body.iter().filter(|o| writes(o)).collect();
    assert!(written.is_empty(), "{written:?} in {ops:?}");
    // The forward and backward read the parameters, which nothing has written yet: they run
    // as they are, as PyTorch's functionalization runs calls without functional inputs.
    assert_eq!(
        body[..3],
        ["aten::t", "aten::addmm", "aten::relu"],
        "{ops:?}"
    );
    // SGD per parameter: g + wd * p, the momentum buffer, p - lr * buf; then each parameter
    // written back.
    assert_eq!(
        body[body.len() - 12..],
        ["aten::add.Tensor", "aten::clone", "aten::add.Tensor"].repeat(4)
    );
    assert_eq!(tail, ["aten::copy_"; 4]);
}

#[test]
fn the_lazy_backend_captures_functionalized_training_steps() {
    let (nodes, plain) = functionalized_and_plain("--graph-out", &["--device", "lazy"]);
    let ops: Vec<String> = nodes.iter().map(op).collect();
    let made_in = |nodes: &[serde_json::Value], name: &serde_json::Value| {
        nodes
            .iter()
            .any(|n| &n["name"] == name && op(n) == "aten::empty_strided")
    };
    // Lazy tensors are functional (Note [Lazy tensors are functional]): the graph, with or
    // without --functionalize, holds no write but backward's seed, a `fill_` of a tensor the
    // step made, and the parameters' updates are new values of their functional tensors, not
    // `copy_` nodes (Note [Functionalization over functional tensors]).
    let written: Vec<&String> = ops
        .iter()
        .zip(&nodes)
        .filter(|(o, n)| writes(o) && !made_in(&nodes, &n["inputs"][0]["value"]))
        .map(|(o, _)| o)
        .collect();
    assert!(written.is_empty(), "{written:?} in {ops:?}");
    assert!(ops.iter().any(|o| o == "aten::addmm"), "{ops:?}");
    assert_eq!(ops, plain.iter().map(op).collect::<Vec<_>>());
}

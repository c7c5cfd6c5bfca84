//! `switchboard train --functionalize`: every training step is functional, so the graph
//! `--trace-graph FILE` writes (`make_fx(functionalize(step))`) and the graph the lazy backend
//! captures have no in-place or out= operator but the final `copy_` of each parameter the
//! step updates; training goes on as without it.

use std::process::Command;

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn the_functionalized_training_step_writes_only_its_parameters_at_the_end() {
    let dir = std::env::temp_dir().join(format!("switchboard-train-func-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("step.json");
    let path_s = path.display().to_string();
    let common = [
        "train",
        "--epochs",
        "1",
        "--no-progress",
        "--no-summary",
        "--trace-graph",
    ];
    let (code, stdout, stderr) = run(&[&common[..], &[&path_s, "--functionalize"]].concat());
    assert_eq!(code, Some(0), "{stderr}");
    let ops = graph_ops(&path);
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
    // Training itself is unchanged: the same accuracy as without --functionalize.
    let accuracy = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("final test accuracy"))
            .map(str::to_owned)
    };
    let (code, plain, stderr) = run(&[&common[..], &[&path_s]].concat());
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        accuracy(&stdout).map(|l| l.split(", ").next().unwrap().to_owned()),
        accuracy(&plain).map(|l| l.split(", ").next().unwrap().to_owned())
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The nodes of a graph JSON file, in order.
fn graph_nodes(path: &std::path::Path) -> Vec<serde_json::Value> {
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    json["nodes"].as_array().unwrap().clone()
}

/// The operators of a graph JSON file, in order.
fn graph_ops(path: &std::path::Path) -> Vec<String> {
    graph_nodes(path)
        .iter()
        .map(|n| n["op"].as_str().unwrap().to_owned())
        .collect()
}

/// Whether `op` writes an argument (an overload name with `_` or `out`).
fn writes(op: &str) -> bool {
    let name = op.trim_start_matches("aten::");
    let (base, overload) = name.split_once('.').unwrap_or((name, ""));
    base.ends_with('_') || overload.contains("out")
}

#[test]
fn the_lazy_backend_captures_functionalized_training_steps() {
    let dir = std::env::temp_dir().join(format!("switchboard-lazy-func-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("step.json");
    let path_s = path.display().to_string();
    let common = [
        "train",
        "--epochs",
        "1",
        "--no-progress",
        "--no-summary",
        "--device",
        "lazy",
        "--graph-out",
        &path_s,
    ];
    let (code, stdout, stderr) = run(&[&common[..], &["--functionalize"]].concat());
    assert_eq!(code, Some(0), "{stderr}");
    let nodes = graph_nodes(&path);
    let op = |n: &serde_json::Value| n["op"].as_str().unwrap().to_owned();
    // The graph starts with the copies that put the data and the model on the device
    // (`empty_strided` + `copy_`), and ends with the write-back of each parameter the step
    // updated.
    let setup = nodes
        .iter()
        .position(|n| !["aten::empty_strided", "aten::copy_"].contains(&op(n).as_str()))
        .unwrap();
    let first_copy = setup
        + nodes[setup..]
            .iter()
            .position(|n| op(n) == "aten::copy_")
            .unwrap();
    let (body, tail) = nodes[setup..].split_at(first_copy - setup);
    let tail: Vec<String> = tail.iter().map(op).collect();
    assert_eq!(
        tail,
        ["aten::copy_"; 4],
        "{:?}",
        nodes.iter().map(op).collect::<Vec<_>>()
    );
    // In between, the optimizer's updates are functional: the only write left is backward's
    // seed, a `fill_` of a tensor the step itself made (autograd runs on the values, below
    // functionalization: Note [Functionalization above autograd]).
    let written: Vec<(String, String)> = body
        .iter()
        .filter(|n| writes(&op(n)))
        .map(|n| (op(n), n["inputs"][0]["value"].as_str().unwrap().to_owned()))
        .collect();
    let made_here = |name: &str| {
        body.iter()
            .any(|n| n["name"] == name && op(n) == "aten::empty_strided")
    };
    assert!(
        written.iter().all(|(_, target)| made_here(target)),
        "{written:?} in {:?}",
        body.iter().map(op).collect::<Vec<_>>()
    );
    assert!(body.iter().any(|n| op(n) == "aten::addmm"));
    // Without --functionalize the lazy graph keeps the optimizer's writes as they are.
    let (code, plain, stderr) = run(&common);
    assert_eq!(code, Some(0), "{stderr}");
    let eager_writes = graph_ops(&path).into_iter().filter(|o| writes(o)).count();
    assert!(eager_writes > 4, "{:?}", graph_ops(&path));
    // Training is the same: the functional program computes what the eager one does.
    let accuracy = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("final test accuracy"))
            .map(|l| l.split(", ").next().unwrap().to_owned())
    };
    assert_eq!(accuracy(&stdout), accuracy(&plain));
    assert!(accuracy(&plain).is_some(), "{plain}");
    let _ = std::fs::remove_dir_all(&dir);
}

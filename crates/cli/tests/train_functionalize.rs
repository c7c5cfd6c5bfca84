//! `switchboard train --trace-graph FILE --functionalize`: the traced training step is
//! functional (`make_fx(functionalize(step))`): no in-place or out= operator but the final
//! `copy_` of each parameter the step updates; training goes on as without it.

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
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let ops: Vec<String> = json["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["op"].as_str().unwrap().to_owned())
        .collect();
    let first_copy = ops.iter().position(|o| o == "aten::copy_").unwrap();
    let (body, tail) = ops.split_at(first_copy);
    // No operator of the body writes an argument (an overload name with `_` or `out`).
    let writes: Vec<&String> = body
        .iter()
        .filter(|o| {
            let name = o.trim_start_matches("aten::");
            let (base, overload) = name.split_once('.').unwrap_or((name, ""));
            base.ends_with('_') || overload.contains("out")
        })
        .collect();
    assert!(writes.is_empty(), "{writes:?} in {ops:?}");
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

#[test]
fn functionalize_needs_a_traced_graph() {
    let (code, _, stderr) = run(&["train", "--epochs", "1", "--functionalize"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--trace-graph"), "{stderr}");
}

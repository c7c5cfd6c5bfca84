//! `switchboard train --device lazy`: the eager run's numbers, the metrics report, the graph
//! of a step (`--graph-out`), and the options' errors.

use switchboard::tensor::Device;
use switchboard_cli::device::parse_device;
use switchboard_cli::train::{train, TrainConfig};

fn config(device: Device) -> TrainConfig {
    TrainConfig {
        epochs: 2,
        hidden: 32,
        progress: false,
        summary: false,
        device,
        ..TrainConfig::default()
    }
}

/// The lazy device `lazy:index`: the tests that train on the lazy backend each use their own
/// (a lazy run resets its device's statistics), so they run in parallel.
fn lazy(index: u8) -> Device {
    parse_device(&format!("lazy:{index}")).unwrap()
}

#[test]
fn lazy_training_gives_the_eager_numbers_and_a_metrics_report() {
    let eager = train(&config(Device::CPU), &mut Vec::new()).unwrap();
    let mut out = Vec::new();
    let lazy_run = train(&config(lazy(1)), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(eager.epochs.len(), lazy_run.epochs.len());
    for (e, l) in eager.epochs.iter().zip(&lazy_run.epochs) {
        assert!((e.train_loss - l.train_loss).abs() <= 1e-4, "{e:?} {l:?}");
        assert_eq!(e.train_accuracy, l.train_accuracy, "{e:?} {l:?}");
        assert_eq!(e.test_accuracy, l.test_accuracy, "{e:?} {l:?}");
    }
    assert_eq!(eager.test_accuracy, lazy_run.test_accuracy);
    assert!(eager.lazy.is_none());

    assert!(text.contains("parameters on lazy:1;"), "{text}");
    assert!(
        text.contains("Lazy backend metrics (executor: cpu, lazy mode: on)"),
        "{text}"
    );
    assert!(text.contains("Counter: GraphCache"), "{text}");
    let stats = lazy_run.lazy.expect("the lazy run reports its statistics");
    // Nothing ran on the default device: the run's captures, syncs and report are lazy:1's.
    assert_eq!(switchboard::lazy::stats().operation_count, 0);
    // Every step's graph after the first is a cache hit.
    assert!(stats.cache_hits >= lazy_run.steps as u64 - 2, "{stats:?}");
    assert!(
        stats.nodes_executed > 0 && stats.registered_captures > 0,
        "{stats:?}"
    );
}

#[test]
fn graph_out_writes_the_graph_of_one_step() {
    let dir = std::env::temp_dir().join(format!("switchboard-train-lazy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let one_epoch = |graph_out: &str| TrainConfig {
        epochs: 1,
        graph_out: Some(dir.join(graph_out)),
        ..config(lazy(2))
    };
    train(&one_epoch("step.dot"), &mut Vec::new()).unwrap();
    let dot = std::fs::read_to_string(dir.join("step.dot")).unwrap();
    assert!(dot.starts_with("digraph"), "{dot}");
    // The optimizer's update: its functional form (Note [Lazy tensors are functional]).
    for op in [
        "aten::addmm",
        "aten::relu",
        "aten::threshold_backward",
        "aten::add.Tensor",
    ] {
        assert!(dot.contains(op), "{op}: {dot}");
    }
    train(&one_epoch("step.json"), &mut Vec::new()).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("step.json")).unwrap()).unwrap();
    assert!(json["nodes"].as_array().unwrap().len() > 20, "{json}");
    // The one JSON form of graphs, as `--trace-graph` writes it: arguments under `inputs`,
    // sizes as `shape`, the captured inputs listed.
    let addmm = json["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["op"] == "aten::addmm")
        .unwrap();
    assert_eq!(addmm["inputs"][0]["name"], "self");
    assert!(addmm["outputs"][0]["shape"].is_array(), "{addmm}");
    assert!(json["inputs"][0]["shape"].is_array(), "{json}");
    assert!(json["constants"].is_array(), "{json}");

    let err = |cfg: TrainConfig| train(&cfg, &mut Vec::new()).unwrap_err().to_string();
    let e = err(TrainConfig {
        graph_out: Some(dir.join("step.png")),
        ..config(lazy(2))
    });
    assert!(e.contains("must end in .dot (Graphviz) or .json"), "{e}");
    let e = err(TrainConfig {
        graph_out: Some(dir.join("step.dot")),
        ..config(Device::CPU)
    });
    assert!(e.contains("--graph-out needs --device lazy"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_command_line_prints_the_report() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args([
            "train",
            "--device",
            "lazy",
            "--epochs",
            "1",
            "--hidden",
            "16",
            "--no-progress",
            "--no-summary",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("final test accuracy"), "{stdout}");
    assert!(stdout.contains("Lazy backend metrics"), "{stdout}");
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["train", "--device", "gpu"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

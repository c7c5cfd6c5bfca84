//! `switchboard train --device`: cpu always; an out-of-tree backend when the build links it
//! (`cargo test -p switchboard-cli --features npu`, which `.ci/run` runs), a clear error when
//! it does not.

use std::process::{Command, Output};

fn train(device: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args([
            "train",
            "--epochs",
            "1",
            "--hidden",
            "16",
            "--no-progress",
            "--no-summary",
        ])
        .args(["--device", device])
        .output()
        .unwrap()
}

#[cfg(feature = "npu")]
fn final_accuracy(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("final test accuracy"))
        .unwrap_or_else(|| panic!("no final accuracy in {text}"));
    line.split(',').next().unwrap().to_string()
}

#[test]
fn trains_on_cpu_and_refuses_unknown_devices() {
    let cpu = train("cpu");
    assert!(cpu.status.success(), "{cpu:?}");
    assert!(String::from_utf8_lossy(&cpu.stdout).contains("parameters on cpu"));

    // cpu:0 is the CPU: the parameters are on `cpu`.
    let cpu0 = train("cpu:0");
    assert!(cpu0.status.success(), "{cpu0:?}");
    assert!(String::from_utf8_lossy(&cpu0.stdout).contains("parameters on cpu;"));

    let bad = train("cuda");
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("this build cannot train on cuda: available devices are cpu"),
        "{err}"
    );
}

#[cfg(not(feature = "npu"))]
#[test]
fn npu_needs_the_feature() {
    let out = train("npu");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("npu"), "{err}");
}

#[cfg(feature = "npu")]
#[test]
fn trains_on_npu_as_on_cpu() {
    let npu = train("npu");
    assert!(npu.status.success(), "{npu:?}");
    let text = String::from_utf8_lossy(&npu.stdout);
    assert!(text.contains("parameters on npu;"), "{text}");
    assert_eq!(final_accuracy(&npu), final_accuracy(&train("cpu")));
}

#[cfg(feature = "npu")]
#[test]
fn trains_on_npu_in_mixed_precision() {
    // npu is PrivateUse1, whose autocast key PyTorch defines: its region casts npu tensors.
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args([
            "train",
            "--epochs",
            "1",
            "--hidden",
            "16",
            "--no-progress",
            "--no-summary",
        ])
        .args(["--device", "npu", "--autocast", "float16"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

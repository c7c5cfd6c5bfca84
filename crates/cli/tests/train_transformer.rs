//! `switchboard train --model transformer` end to end through the binary, small enough for a
//! debug build (2 epochs of one step: `--batch-size 3200`). The accuracy the defaults reach is
//! checked by the ignored test, in a release build.

use std::process::{Command, Output};

fn switchboard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn transformer_learns_to_reverse_and_prints_examples() {
    let out = switchboard(&[
        "train",
        "--model",
        "transformer",
        "--epochs",
        "2",
        "--batch-size",
        "3200",
        "--no-progress",
    ]);
    let stdout = stdout_of(&out);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout
            .contains("model: Transformer decoder (2 pre-norm blocks, d_model 64, 4 causal heads"),
        "{stdout}"
    );
    assert!(stdout.contains("AdamW(lr=0.003"), "{stdout}");
    let losses: Vec<f64> = stdout
        .lines()
        .filter(|l| l.starts_with("epoch"))
        .map(|l| {
            l.split("loss ")
                .nth(1)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(losses.len(), 2, "{stdout}");
    assert!(losses[1] < losses[0], "the loss does not fall: {stdout}");
    // Four held-out examples, each a prompt and its decoding.
    let examples: Vec<&str> = stdout.lines().filter(|l| l.contains("  ->  ")).collect();
    assert_eq!(examples.len(), 4, "{stdout}");
    assert!(
        stdout.contains("final test sequence accuracy: "),
        "{stdout}"
    );

    // The transformer trains on its own data, on the cpu.
    let out = switchboard(&["train", "--model", "transformer", "--device", "lazy"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--model transformer trains on"));
}

/// The defaults reach a sequence accuracy of at least 0.99. Minutes in a debug build: run it
/// with `--release -- --ignored`.
#[test]
#[ignore]
fn transformer_default_run_reaches_its_accuracy() {
    let out = switchboard(&["train", "--model", "transformer", "--no-progress"]);
    let stdout = stdout_of(&out);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("final test sequence accuracy: "))
        .unwrap();
    let accuracy: f64 = line["final test sequence accuracy: ".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(accuracy >= 0.99, "{stdout}");
}

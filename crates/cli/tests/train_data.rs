//! `switchboard train --data` on hostile and extreme data: allocations sized by the data fail
//! with an error naming the limit (never an abort), and tiny but finite features train.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// A scratch directory, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("sb-train-data-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }
    fn write(&self, name: &str, bytes: &[u8]) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `switchboard ARGS` under a limit of `mib` MiB of address space (`ulimit -v`), so
/// that an allocation the data sizes fails instead of taking the machine's memory.
fn run_limited(mib: u64, args: &[&str]) -> Output {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {} && exec \"$0\" \"$@\"", mib * 1024))
        .arg(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .args(["--no-progress", "--no-summary", "--threads", "1"])
        .stdin(Stdio::null())
        .env_remove("RAYON_NUM_THREADS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("memory allocation") && !stderr.contains("panicked"),
        "{args:?}: {stderr}"
    );
    out
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim_end().to_owned()
}

#[test]
fn one_huge_row_fails_at_the_row_limit() {
    let dir = Dir::new("huge-row");
    // One 1 GiB line of fields ("1,1,1,...", no line break) from 1 MiB of gzip members.
    let block = b"1,".repeat(1 << 19);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&block).unwrap();
    let member = gz.finish().unwrap();
    let bomb = dir.write("row.csv.gz", &member.repeat(1024));
    let out = run_limited(1024, &["train", "--data", &bomb, "--epochs", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "error: {bomb}: the row at line 1 is longer than 16 MiB of CSV text, the limit for \
             one row; refusing to read more"
        )
    );
    // A quoted field spreading a record over many lines is one row all the same.
    let mut text = b"1,2,0\n\"".to_vec();
    text.extend(b"1\n".repeat(9 << 20));
    let quoted = dir.write("quoted.csv", &text);
    let out = run_limited(1024, &["train", "--data", &quoted, "--epochs", "1"]);
    assert!(
        stderr(&out).ends_with(
            "the row at line 2 is longer than 16 MiB of CSV text, the limit \
                                for one row; refusing to read more"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_bad_cell_in_a_long_row_is_named_alone() {
    let dir = Dir::new("long-row");
    let mut row = "1,".repeat(100_000);
    row += "x,0\n";
    let csv = dir.write(
        "long.csv",
        format!("1,{}0\n{row}", "2,".repeat(99_999)).as_bytes(),
    );
    let out = run_limited(1024, &["train", "--data", &csv, "--epochs", "1"]);
    assert_eq!(
        stderr(&out),
        format!("error: {csv}:2: column 100001 is \"x\", not a number: invalid float literal")
    );
}

#[test]
fn tiny_finite_features_train() {
    let dir = Dir::new("tiny");
    let mut csv = String::new();
    for i in 0..64 {
        // Subnormal float32s: 1 / max is beyond float32.
        csv += &format!(
            "{}e-40,{}e-40,{}\n",
            i % 8 + 1,
            8 - i % 8,
            (i % 8 < 4) as u8
        );
    }
    let data = dir.write("tiny.csv", csv.as_bytes());
    let out = run_limited(
        2048,
        &["train", "--data", &data, "--epochs", "30", "--lr", "0.5"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("final test accuracy: 1.0000"), "{stdout}");
}

#[test]
fn divergence_is_blamed_on_its_cause() {
    // A decay float32 cannot hold is refused before training (PyTorch refuses the `add`).
    let out = run_limited(2048, &["train", "--epochs", "1", "--weight-decay", "1e308"]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("--weight-decay")
            && e.contains("must be at most 3.4028235e38 (the parameters are float32), got 1e308"),
        "{e}"
    );
    let out = run_limited(
        2048,
        &[
            "train",
            "--epochs",
            "1",
            "--lr",
            "1",
            "--weight-decay",
            "10",
        ],
    );
    let e = stderr(&out);
    assert!(
        e.ends_with(
            "with --lr 1 and --weight-decay 10, each SGD step's decay overshoots (lr * \
             weight_decay = 10, stable below 2 * (1 + momentum) = 3.8): lower --weight-decay or \
             --lr"
        ),
        "{e}"
    );
    let out = run_limited(
        2048,
        &[
            "train",
            "--epochs",
            "1",
            "--lr",
            "1e30",
            "--weight-decay",
            "0",
        ],
    );
    let e = stderr(&out);
    assert!(
        e.ends_with("the updates grew the weights without bound at --lr 1e30: lower --lr"),
        "{e}"
    );
}

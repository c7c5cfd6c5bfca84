//! `switchboard train --distributed` under `mpirun` (the `mpi` feature): per-epoch losses
//! within 1e-5 of the single-process run with the same global batch and the same accuracy,
//! with 2 and 3 ranks, on the CPU and the lazy device; rank 0 alone prints. Without the
//! feature, `--distributed` fails with a message naming it.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use switchboard_cli::train::{train, TrainConfig};

fn config(device: switchboard_tensor::Device) -> TrainConfig {
    TrainConfig {
        epochs: 3,
        hidden: 32,
        // A global batch that leaves a short last batch (1438 = 44 x 32 + 30): the ranks'
        // shares differ there.
        batch_size: 32,
        threads: Some(1),
        progress: false,
        summary: false,
        device,
        ..TrainConfig::default()
    }
}

/// Set in the ranks' environment: this process is a rank of the job running that test.
const RANK_ENV: &str = "SWITCHBOARD_TEST_RANK_OF";

fn is_rank(test: &str) -> bool {
    std::env::var(RANK_ENV).is_ok_and(|t| t == test)
}

/// Runs `cmd` (mpirun ...) and returns its output; kills it if it hangs.
fn run_job(mut cmd: Command) -> Output {
    // One job at a time (Open MPI's session directory is created racily).
    static ONE_JOB: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun (Debian: openmpi-bin) must be installed for the `mpi` feature's tests");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        // A hang guard, not a measurement.
        if start.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            panic!("the MPI job hung: {cmd:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn mpirun(np: usize) -> Command {
    let mut cmd = Command::new("mpirun");
    cmd.args(["--allow-run-as-root", "--oversubscribe", "-np"])
        .arg(np.to_string())
        .env("RAYON_NUM_THREADS", "1");
    cmd
}

/// Runs this binary's test `test` as `np` ranks and checks that each passed.
fn as_ranks(test: &str, np: usize) {
    let dir = rank_output_dir(test, np);
    let mut cmd = mpirun(np);
    cmd.arg("--output-filename")
        .arg(&dir)
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(RANK_ENV, test);
    let out = run_job(cmd);
    let passed = ranks_passed(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{test} with {np} ranks failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(passed, np, "{stdout}");
}

/// How many ranks' own output (mpirun's `--output-filename DIR`: `DIR/<job>/rank.<r>/stdout`)
/// shows their test passed. The ranks' output forwarded to mpirun's stdout interleaves
/// mid-line, so it cannot be counted there.
fn ranks_passed(dir: &std::path::Path) -> usize {
    let mut passed = 0;
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.file_name().is_some_and(|n| n == "stdout")
                && std::fs::read_to_string(&path)
                    .is_ok_and(|s| s.contains("test result: ok. 1 passed"))
            {
                passed += 1;
            }
        }
    }
    passed
}

/// A fresh folder for one job's per-rank output.
fn rank_output_dir(test: &str, np: usize) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "switchboard-mpi-{}-{test}-{np}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[cfg(feature = "mpi")]
fn losses_match(test: &str, device: switchboard_tensor::Device) {
    if !is_rank(test) {
        as_ranks(test, 2);
        as_ranks(test, 3);
        return;
    }
    let alone = train(&config(device), &mut Vec::new()).unwrap();
    let mut out = Vec::new();
    let ranks = train(
        &TrainConfig {
            distributed: true,
            ..config(device)
        },
        &mut out,
    )
    .unwrap();
    assert_eq!(ranks.steps, alone.steps);
    for (a, r) in alone.epochs.iter().zip(&ranks.epochs) {
        assert!(
            (a.train_loss - r.train_loss).abs() <= 1e-5,
            "epoch {}: loss {} alone, {} distributed",
            a.epoch,
            a.train_loss,
            r.train_loss
        );
        assert_eq!(a.train_accuracy, r.train_accuracy, "epoch {}", a.epoch);
        assert_eq!(a.test_accuracy, r.test_accuracy, "epoch {}", a.epoch);
    }
    assert_eq!(alone.test_accuracy, ranks.test_accuracy);
    let rank = switchboard_distributed::world().unwrap().rank();
    // Rank 0 prints; the others are silent.
    assert_eq!(out.is_empty(), rank != 0, "rank {rank}");
    switchboard_distributed::destroy_process_group();
}

#[cfg(feature = "mpi")]
#[test]
fn distributed_losses_match_one_process_on_cpu() {
    losses_match(
        "distributed_losses_match_one_process_on_cpu",
        switchboard_tensor::Device::CPU,
    );
}

#[cfg(feature = "mpi")]
#[test]
fn distributed_losses_match_one_process_on_lazy() {
    losses_match(
        "distributed_losses_match_one_process_on_lazy",
        switchboard::lazy::DEVICE,
    );
}

/// The lines of a `train` output that do not depend on timing or the rank count.
fn result_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("epoch") || l.starts_with("final test accuracy"))
        .map(|l| {
            l.split("  (")
                .next()
                .unwrap()
                .split(", ")
                .next()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[cfg(feature = "mpi")]
#[test]
fn the_command_prints_once_the_single_process_numbers() {
    let exe = env!("CARGO_BIN_EXE_switchboard");
    let args = [
        "train",
        "--epochs",
        "2",
        "--hidden",
        "32",
        "--no-summary",
        "--threads",
        "1",
    ];
    let alone = Command::new(exe).args(args).output().unwrap();
    assert!(alone.status.success());
    let mut cmd = mpirun(2);
    cmd.arg(exe).args(args).arg("--distributed");
    let ranks = run_job(cmd);
    let text = String::from_utf8_lossy(&ranks.stdout);
    assert!(
        ranks.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&ranks.stderr)
    );
    assert_eq!(
        result_lines(&text),
        result_lines(&String::from_utf8_lossy(&alone.stdout))
    );
    assert_eq!(text.matches("final test accuracy").count(), 1, "{text}");
    assert!(
        text.contains("distributed: 2 ranks, global batch 32 split among them"),
        "{text}"
    );
}

#[cfg(not(feature = "mpi"))]
#[test]
fn without_mpi_distributed_is_refused() {
    let _ = (is_rank, as_ranks, run_job, mpirun, result_lines);
    let cfg = TrainConfig {
        distributed: true,
        ..config(switchboard_tensor::Device::CPU)
    };
    let err = train(&cfg, &mut Vec::new()).unwrap_err().to_string();
    assert_eq!(
        err,
        "distributed: this build has no MPI backend: build with `--features mpi` (it needs an \
         MPI installation)"
    );
}

/// The arguments of a small training run (`--epochs` added by each test).
#[cfg(feature = "mpi")]
const SMALL_RUN: [&str; 7] = [
    "train",
    "--hidden",
    "8",
    "--no-summary",
    "--no-progress",
    "--threads",
    "1",
];

/// A rank that stops taking part (here: it trains one epoch fewer, finishes and leaves) makes
/// the others fail with the watchdog's error once `--distributed-timeout` passed, and the job
/// ends: no rank waits forever.
#[cfg(feature = "mpi")]
#[test]
fn a_rank_that_stops_early_fails_the_others_within_the_timeout() {
    let exe = env!("CARGO_BIN_EXE_switchboard");
    let mut cmd = mpirun(1);
    // Two app contexts: rank 0 trains two epochs, rank 1 one.
    cmd.arg(exe)
        .args(SMALL_RUN)
        .args([
            "--epochs",
            "2",
            "--distributed",
            "--distributed-timeout",
            "3",
        ])
        .args([":", "-np", "1", exe])
        .args(SMALL_RUN)
        .args([
            "--epochs",
            "1",
            "--distributed",
            "--distributed-timeout",
            "3",
        ]);
    let out = run_job(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("error: ")
            && stderr.contains("Watchdog caught collective operation timeout: WorkMPI("),
        "{stderr}"
    );
}

/// A rank that dies (killed) ends the job: mpirun stops the other ranks and names the dead one.
#[cfg(feature = "mpi")]
#[test]
fn a_rank_that_dies_ends_the_job() {
    let exe = env!("CARGO_BIN_EXE_switchboard");
    let mut cmd = mpirun(1);
    // Rank 1 is killed a moment after it started; rank 0 has far more to train than that.
    cmd.arg(exe)
        .args(SMALL_RUN)
        .args(["--epochs", "1000", "--distributed"])
        .args([":", "-np", "1", "timeout", "--signal=KILL", "2", exe])
        .args(SMALL_RUN)
        .args(["--epochs", "1000", "--distributed"]);
    let out = run_job(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("process rank 1") && stderr.contains("exited on signal 9 (Killed)"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("final test accuracy"), "{stdout}");
}

/// A rank that fails with an error (here: its data file is missing) prints it and ends the job:
/// it exits without finalising MPI, so mpirun stops the ranks waiting for it.
#[cfg(feature = "mpi")]
#[test]
fn a_rank_that_fails_ends_the_job_with_its_error() {
    let exe = env!("CARGO_BIN_EXE_switchboard");
    let mut cmd = mpirun(1);
    cmd.arg(exe)
        .args(SMALL_RUN)
        .args(["--epochs", "1000", "--distributed"])
        .args([":", "-np", "1", exe])
        .args(SMALL_RUN)
        .args([
            "--epochs",
            "1000",
            "--distributed",
            "--data",
            "/nonexistent/data.csv",
        ]);
    let out = run_job(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("error: /nonexistent/data.csv: No such file or directory"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("final test accuracy"), "{stdout}");
}

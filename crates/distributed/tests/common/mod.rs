//! Running a test as the ranks of an MPI job: the test binary starts itself under `mpirun`,
//! running only the named test, in each rank.
#![allow(dead_code)] // each test file uses its part

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use switchboard_distributed::{init_process_group, BackendKind, ProcessGroupOptions};

/// Set in the ranks' environment: this process is a rank, not the launcher.
const RANK_ENV: &str = "SWITCHBOARD_TEST_RANK_OF";

/// The most a job may take before the launcher kills it (a hang guard, not a measurement).
const JOB_LIMIT: Duration = Duration::from_secs(120);

/// Whether this process is a rank of the job running `test`.
pub fn is_rank(test: &str) -> bool {
    std::env::var(RANK_ENV).is_ok_and(|t| t == test)
}

/// Runs `test` (this binary's test of that name) as `np` ranks under `mpirun`, returning the
/// job's output; fails if it hangs past [`JOB_LIMIT`].
pub fn mpirun(test: &str, np: usize) -> Output {
    mpirun_into(test, np, None)
}

/// [`mpirun`], each rank's output also written below `output_dir` when given.
fn mpirun_into(test: &str, np: usize, output_dir: Option<&std::path::Path>) -> Output {
    // One job at a time: mpirun's session directory is created racily by concurrent jobs,
    // and the ranks of two jobs would share the cores anyway.
    static ONE_JOB: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new("mpirun");
    cmd.args(["--allow-run-as-root", "--oversubscribe", "-np"])
        .arg(np.to_string());
    if let Some(dir) = output_dir {
        cmd.arg("--output-filename").arg(dir);
    }
    let mut child = cmd
        .arg(exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(RANK_ENV, test)
        // One thread per rank: the ranks share the machine's cores.
        .env("RAYON_NUM_THREADS", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun (Debian: openmpi-bin) must be installed for the `mpi` feature's tests");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("waiting for mpirun").is_some() {
            break;
        }
        if start.elapsed() > JOB_LIMIT {
            let _ = child.kill();
            let out = child.wait_with_output().expect("mpirun's output");
            panic!(
                "the MPI job {test} with {np} ranks hung (killed after {JOB_LIMIT:?}):\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("mpirun's output")
}

/// Runs `test` as `np` ranks and asserts that every rank passed.
pub fn mpirun_ok(test: &str, np: usize) {
    let dir = rank_output_dir(test, np);
    let out = mpirun_into(test, np, Some(&dir));
    let passed = ranks_passed(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the MPI job {test} with {np} ranks failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // Each rank's harness ran the test (a filter matching nothing would pass vacuously).
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

/// Starts the MPI world in a rank.
pub fn init(options: ProcessGroupOptions) -> std::sync::Arc<switchboard_distributed::ProcessGroup> {
    init_process_group(BackendKind::Mpi, options).expect("MPI world")
}

/// Declares a test that runs its body in each of `np` ranks, once per rank count.
#[macro_export]
macro_rules! rank_test {
    ($name:ident, [$($np:literal),+], |$pg:ident| $body:block) => {
        #[test]
        fn $name() {
            let name = stringify!($name);
            if common::is_rank(name) {
                let $pg = common::init(Default::default());
                $body
                switchboard_distributed::destroy_process_group();
            } else {
                $(common::mpirun_ok(name, $np);)+
            }
        }
    };
}

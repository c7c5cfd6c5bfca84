//! `switchboard worker`: a child-process worker trains through the lazy backend with the eager
//! numbers; a killed worker gives an error, a hung one a timeout, a restarted one "state lost";
//! the options' errors.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use switchboard::tensor::Device;
use switchboard_cli::device::parse_device;
use switchboard_cli::train::{train, TrainConfig};
use switchboard_remote::{ClientConfig, RemoteExecutor};

/// A `switchboard worker` child process and the address it printed.
struct ChildWorker {
    child: Child,
    addr: String,
}

impl ChildWorker {
    fn start(listen: &str, extra: &[&str]) -> ChildWorker {
        let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(["worker", "--listen", listen])
            .args(extra)
            .env_remove("SWITCHBOARD_WORKER_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .strip_prefix("switchboard worker listening on ")
            .and_then(|r| r.split(' ').next())
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_string();
        ChildWorker { child, addr }
    }

    fn executor(&self, timeout: Duration) -> Arc<RemoteExecutor> {
        RemoteExecutor::connect(
            &self.addr,
            ClientConfig {
                timeout,
                ..ClientConfig::default()
            },
        )
        .unwrap()
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
}

impl Drop for ChildWorker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lazy(index: u8) -> Device {
    parse_device(&format!("lazy:{index}")).unwrap()
}

fn config(device: Device) -> TrainConfig {
    TrainConfig {
        epochs: 1,
        hidden: 32,
        progress: false,
        summary: false,
        device,
        ..TrainConfig::default()
    }
}

#[test]
fn training_through_a_child_worker_gives_the_eager_numbers() {
    let w = ChildWorker::start("127.0.0.1:0", &[]);
    let device = lazy(40);
    let backend = switchboard::lazy::backend(device).unwrap();
    backend.set_executor(w.executor(Duration::from_secs(60)));
    let eager = train(&config(Device::CPU), &mut Vec::new()).unwrap();
    let mut out = Vec::new();
    let remote = train(&config(device), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    for (e, r) in eager.epochs.iter().zip(&remote.epochs) {
        assert!((e.train_loss - r.train_loss).abs() <= 1e-4, "{e:?} {r:?}");
        assert_eq!(e.train_accuracy, r.train_accuracy);
        assert_eq!(e.test_accuracy, r.test_accuracy);
    }
    assert!(text.contains("executor: remote"), "{text}");
    assert!(text.contains("Counter: RemoteRoundTrips"), "{text}");
}

/// One small lazy computation on `device`, read on the host.
fn compute(device: Device) -> Result<Vec<f32>, String> {
    use switchboard::ops;
    let x = ops::_to_copy_with(
        &switchboard::tensor::Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap(),
        ops::ToCopyOptions::default().device(device),
    )
    .unwrap();
    let y = ops::mul_scalar(&ops::exp(&x).unwrap(), 2).unwrap();
    y.to_vec_as::<f32>().map_err(|e| e.to_string())
}

/// A parameter-like tensor that lives on the worker, updated by each call.
fn update(p: &switchboard::tensor::Tensor) -> Result<f64, String> {
    use switchboard::ops;
    ops::add_scalar_(p, 1).map_err(|e| e.to_string())?;
    ops::sum(p)
        .unwrap()
        .item()
        .map(|v| v.to_f64())
        .map_err(|e| e.to_string())
}

#[test]
fn a_killed_worker_gives_an_error_not_a_hang() {
    let mut w = ChildWorker::start("127.0.0.1:0", &[]);
    let device = lazy(41);
    switchboard::lazy::backend(device)
        .unwrap()
        .set_executor(w.executor(Duration::from_secs(30)));
    assert!(compute(device).is_ok());
    w.child.kill().unwrap();
    w.child.wait().unwrap();
    let e = compute(device).unwrap_err();
    assert!(
        e.contains(&format!("lost the connection to the worker at {}", w.addr)),
        "{e}"
    );
    assert!(e.contains("reconnecting failed: cannot connect"), "{e}");
}

#[test]
fn a_hung_worker_times_out() {
    let w = ChildWorker::start("127.0.0.1:0", &[]);
    let device = lazy(42);
    switchboard::lazy::backend(device)
        .unwrap()
        .set_executor(w.executor(Duration::from_secs(2)));
    assert!(compute(device).is_ok());
    w.signal("-STOP");
    let e = compute(device).unwrap_err();
    w.signal("-CONT");
    assert!(
        e.contains(&format!(
            "the worker at {} did not answer within 2s (it may have died or hung)",
            w.addr
        )),
        "{e}"
    );
}

#[test]
fn a_restarted_worker_is_reported_as_lost_state() {
    let w = ChildWorker::start("127.0.0.1:0", &[]);
    let device = lazy(43);
    switchboard::lazy::backend(device)
        .unwrap()
        .set_executor(w.executor(Duration::from_secs(30)));
    let p = switchboard::ops::_to_copy_with(
        &switchboard::tensor::Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap(),
        switchboard::ops::ToCopyOptions::default().device(device),
    )
    .unwrap();
    assert_eq!(update(&p).unwrap(), 5.0);
    assert_eq!(update(&p).unwrap(), 7.0, "p lives on the worker");
    let addr = w.addr.clone();
    drop(w);
    let restarted = ChildWorker::start(&addr, &[]);
    assert_eq!(restarted.addr, addr);
    let e = update(&p).unwrap_err();
    assert!(
        e.contains("remote worker state lost (the worker restarted: handle"),
        "{e}"
    );
    // Work that does not need the lost tensors goes on.
    assert!(compute(device).is_ok());
}

#[test]
fn worker_options_errors() {
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["worker", "--listen", "0.0.0.0:0"])
        .env_remove("SWITCHBOARD_WORKER_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: refusing to listen on 0.0.0.0:0, which is not a loopback address, without a \
         token: set SWITCHBOARD_WORKER_TOKEN or give a token file\n"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["worker", "--token-file", "/nonexistent/token"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: cannot read the token file /nonexistent/token: "),
        "{err}"
    );
}

#[test]
fn a_token_file_is_required_of_clients() {
    let dir = std::env::temp_dir().join(format!("switchboard-worker-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("token");
    std::fs::write(&file, "abc123\n").unwrap();
    let w = ChildWorker::start("127.0.0.1:0", &["--token-file", file.to_str().unwrap()]);
    let connect = |token: &str| {
        RemoteExecutor::connect(
            &w.addr,
            ClientConfig {
                token: Some(token.into()),
                ..ClientConfig::default()
            },
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
    };
    assert!(connect("abc123").is_ok());
    assert_eq!(
        connect("abc124").unwrap_err(),
        "wrong worker token (the worker's SWITCHBOARD_WORKER_TOKEN or token file)"
    );
    std::fs::remove_dir_all(&dir).ok();
}

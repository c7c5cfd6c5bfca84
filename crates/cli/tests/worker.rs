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
        if sig == "-STOP" {
            // Delivery is asynchronous: wait until the kernel reports the process stopped
            // (state `T` in /proc/PID/stat), so that the next request meets a stopped worker.
            let stat = format!("/proc/{}/stat", self.child.id());
            for _ in 0..500 {
                let state = std::fs::read_to_string(&stat).unwrap_or_default();
                // The state follows the command name's closing parenthesis.
                if state
                    .rsplit_once(") ")
                    .is_some_and(|(_, rest)| rest.starts_with('T'))
                {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            panic!("the worker did not stop: {stat}");
        }
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

/// `switchboard ARGS` with `env` set (and the worker variables cleared otherwise).
fn switchboard(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    c.args(args)
        .env_remove("SWITCHBOARD_WORKER")
        .env_remove("SWITCHBOARD_WORKER_TOKEN")
        .env_remove("SWITCHBOARD_WORKER_CA");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// The epoch lines and the final accuracy of `train`'s output, without timings.
fn numbers(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| l.starts_with("epoch") || l.starts_with("final test accuracy"))
        .map(|l| {
            l.split("  (")
                .next()
                .unwrap_or_default()
                .split(", ")
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[test]
fn train_on_remote_accelerator_gives_the_eager_numbers() {
    let w = ChildWorker::start("127.0.0.1:0", &[]);
    let common = [
        "train",
        "--epochs",
        "2",
        "--hidden",
        "32",
        "--no-progress",
        "--no-summary",
    ];
    let eager = switchboard(&common, &[]);
    let remote = switchboard(
        &[
            &common[..],
            &["--device", "remote_accelerator", "--worker", &w.addr],
        ]
        .concat(),
        &[],
    );
    let (e, r) = (
        String::from_utf8(eager.stdout).unwrap(),
        String::from_utf8(remote.stdout).unwrap(),
    );
    assert!(
        remote.status.success(),
        "{r}\n{}",
        String::from_utf8_lossy(&remote.stderr)
    );
    assert_eq!(numbers(&e), numbers(&r), "{e}\n{r}");
    assert_eq!(numbers(&e).len(), 3, "{e}");
    assert!(r.contains("on remote_accelerator:0"), "{r}");
    for line in [
        "executor: remote",
        "Counter: RemoteRoundTrips",
        "Counter: RemoteBytesSent",
    ] {
        assert!(r.contains(line), "{r}");
    }
    // The same through SWITCHBOARD_WORKER.
    let from_env = switchboard(
        &[&common[..], &["--device", "remote_accelerator"]].concat(),
        &[("SWITCHBOARD_WORKER", &w.addr)],
    );
    assert_eq!(
        numbers(&String::from_utf8(from_env.stdout).unwrap()),
        numbers(&e)
    );
}

#[test]
fn call_on_remote_accelerator_uses_the_worker_of_the_environment() {
    use switchboard::tensor::{load_safetensors_file, save_safetensors_file, Tensor};
    let w = ChildWorker::start("127.0.0.1:0", &[]);
    let dir = std::env::temp_dir().join(format!("sb-worker-call-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = Tensor::from_vec(vec![1f32, 2., 3., 4.], &[2, 2]).unwrap();
    let input = dir.join("in.safetensors");
    save_safetensors_file(&input, &[("a", &a)], None).unwrap();
    let run = |device: &str, env: &[(&str, &str)]| {
        let out = dir.join(format!("out-{device}.safetensors"));
        let o = switchboard(
            &[
                "call",
                "mm",
                "--in",
                input.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
                "--device",
                device,
                "self=@a",
                "mat2=@a",
            ],
            env,
        );
        (o, out)
    };
    let (o, out) = run("remote_accelerator", &[("SWITCHBOARD_WORKER", &w.addr)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = load_safetensors_file(&out).unwrap();
    let (_, t) = got.iter().next().unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), [7., 10., 15., 22.]);
    // Without a worker: one error line saying what is missing.
    let (o, _) = run("remote_accelerator", &[]);
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: ")
            && err.contains("needs a worker: --worker HOST:PORT or SWITCHBOARD_WORKER=HOST:PORT"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn train_refuses_a_worker_it_cannot_use() {
    let o = switchboard(&["train", "--epochs", "1", "--worker", "127.0.0.1:9"], &[]);
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "--worker 127.0.0.1:9: a worker runs the graphs of --device remote_accelerator only"
        ),
        "{err}"
    );
    let o = switchboard(
        &["train", "--epochs", "1", "--device", "remote_accelerator"],
        &[],
    );
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("needs a worker"), "{err}");
    // Nothing listens there: the connection error names the address, in bounded time.
    let o = switchboard(
        &[
            "train",
            "--epochs",
            "1",
            "--device",
            "remote_accelerator",
            "--worker",
            "127.0.0.1:9",
        ],
        &[],
    );
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("127.0.0.1:9"), "{err}");
}

#[test]
fn a_worker_killed_mid_step_gives_an_error_not_a_hang() {
    use switchboard::ops;
    let mut w = ChildWorker::start("127.0.0.1:0", &[]);
    let device = lazy(44);
    let backend = switchboard::lazy::backend(device).unwrap();
    backend.set_executor(w.executor(Duration::from_secs(60)));
    // A step long enough on the worker (large products, one after the other) to be killed
    // while it runs.
    let a = ops::_to_copy_with(
        &ops::ones(&[384, 384]).unwrap(),
        ops::ToCopyOptions::default().device(device),
    )
    .unwrap();
    let mut y = a.clone();
    for _ in 0..400 {
        y = ops::mm(&y, &a).unwrap();
        y = ops::mul_scalar(&y, 1e-3).unwrap();
    }
    let pid = w.child.id();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    });
    // The connection's loss ends the wait at once (not the call's 60 s timeout).
    let e = y.to_vec_as::<f32>().unwrap_err().to_string();
    killer.join().unwrap();
    let _ = w.child.wait();
    assert!(
        e.contains(&format!("lost the connection to the worker at {}", w.addr)),
        "{e}"
    );
}

//! The files the `switchboard` binary reads and writes (Notes [Input files] and [Output
//! files]): inputs must be regular files, every output is replaced atomically through its
//! symlinks with its permissions kept, special files and the run's inputs are refused, and a
//! failed write to stdout says what failed.

#![cfg(unix)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use switchboard::tensor::{load_safetensors_file, save_safetensors_file, Tensor};

/// A scratch directory, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("sb-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
    fn write(&self, name: &str, bytes: &[u8]) -> String {
        std::fs::write(self.0.join(name), bytes).unwrap();
        self.path(name)
    }
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    cmd.args(args)
        .stdin(Stdio::null())
        .env_remove("SWITCHBOARD_SHOW_DISPATCH_TRACE")
        .env_remove("RAYON_NUM_THREADS");
    cmd
}

/// Far more than any of these runs needs in a debug build: a run still going then hangs (on a
/// FIFO, say).
const DEADLINE: Duration = Duration::from_secs(120);

fn run(args: &[&str]) -> Output {
    let mut child = command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the switchboard binary runs");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("{args:?}: still running after {DEADLINE:?} (a hang)");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    out
}

/// Runs and expects exit status 2 with one `error: ...` line; returns that line.
fn refused(args: &[&str]) -> String {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    stderr.trim_end().to_owned()
}

fn ok(args: &[&str]) -> Output {
    let out = run(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn save(dir: &Dir, name: &str, v: &[f32]) -> String {
    let path = dir.path(name);
    let t = Tensor::from_vec(v.to_vec(), &[v.len() as i64]).unwrap();
    save_safetensors_file(&path, &[("a", &t)], None).unwrap();
    path
}

fn out0(path: &str) -> Vec<f32> {
    load_safetensors_file(path).unwrap()["out0"]
        .to_vec::<f32>()
        .unwrap()
}

fn mkfifo(path: &str) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

/// A small two-class CSV.
fn tiny_csv(dir: &Dir) -> String {
    let mut csv = String::from("a,b,label\n");
    for i in 0..20 {
        csv += &format!("{i},{},{}\n", i % 3, i % 2);
    }
    dir.write("tiny.csv", csv.as_bytes())
}

const QUICK: [&str; 6] = [
    "--epochs",
    "1",
    "--no-progress",
    "--no-summary",
    "--hidden",
    "4",
];

#[test]
fn inputs_that_are_not_regular_files_are_refused() {
    let dir = Dir::new("fifo-in");
    let fifo = dir.path("pipe");
    mkfifo(&fifo);
    // Without the check, both would block forever opening the FIFO (no writer).
    let e = refused(&["call", "neg", "--in", &fifo, "self=@a"]);
    assert_eq!(
        e,
        format!(
            "error: input file {fifo}: cannot open {fifo}: a FIFO (named pipe), not a regular \
             file; an input must be a regular file"
        )
    );
    let e = refused(&[&["train", "--data", &fifo][..], &QUICK].concat());
    assert_eq!(
        e,
        format!(
            "error: {fifo}: a FIFO (named pipe), not a regular file; an input must be a regular \
             file"
        )
    );
    let e = refused(&["call", "neg", "--in", "/dev/zero", "self=@a"]);
    assert!(e.contains("a character device, not a regular file"), "{e}");
    let d = dir.0.display().to_string();
    let e = refused(&[&["train", "--data", &d][..], &QUICK].concat());
    assert!(e.contains("a directory, not a regular file"), "{e}");
}

#[test]
fn out_writes_through_symlinks_and_keeps_permissions() {
    let dir = Dir::new("out-link");
    let input = save(&dir, "in.safetensors", &[1.0, 2.0]);
    let target = save(&dir, "target.safetensors", &[0.0]);
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = dir.path("link.safetensors");
    std::os::unix::fs::symlink("target.safetensors", &link).unwrap();
    ok(&["call", "neg", "--in", &input, "--out", &link, "self=@a"]);
    let meta = std::fs::symlink_metadata(&link).unwrap();
    assert!(meta.file_type().is_symlink(), "the link stays a link");
    assert_eq!(out0(&target), [-1.0, -2.0], "its target is written");
    assert_eq!(std::fs::metadata(&target).unwrap().mode() & 0o777, 0o600);
    // A hard-linked output is replaced atomically: the other name keeps the old contents,
    // and the run says so.
    let other = dir.path("other.safetensors");
    std::fs::hard_link(&target, &other).unwrap();
    let out = ok(&["call", "neg", "--in", &input, "--out", &target, "self=@a"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim_end(),
        format!(
            "note: {target} had 1 other hard link(s), which keep the previous contents (the \
             file is replaced atomically, not rewritten in place)"
        )
    );
    assert_eq!(out0(&other), [-1.0, -2.0]);
    assert_eq!(
        dir.names(),
        [
            "in.safetensors",
            "link.safetensors",
            "other.safetensors",
            "target.safetensors"
        ],
        "no temporary file is left"
    );
}

#[test]
fn special_files_are_never_replaced() {
    let dir = Dir::new("out-special");
    let input = save(&dir, "in.safetensors", &[1.0]);
    let fifo = dir.path("pipe");
    mkfifo(&fifo);
    let e = refused(&["call", "neg", "--in", &input, "--out", &fifo, "self=@a"]);
    assert_eq!(
        e,
        format!(
            "error: output file {fifo}: cannot write it: a FIFO (named pipe), not a regular \
             file; refusing to replace it"
        )
    );
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    // A symlink to a device is followed, and the device refused.
    let link = dir.path("null.json");
    std::os::unix::fs::symlink("/dev/null", &link).unwrap();
    let e = refused(&["call", "neg", "--in", &input, "--out", &link, "self=@a"]);
    assert!(e.ends_with("a character device, not a regular file; refusing to replace it"));
    for flag in ["--trace-graph", "--graph-out"] {
        let mut args = vec!["train", flag, &link];
        args.extend(QUICK);
        if flag == "--graph-out" {
            args.extend(["--device", "lazy"]);
        }
        let e = refused(&args);
        assert!(
            e.contains("a character device, not a regular file"),
            "{flag}: {e}"
        );
    }
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("/dev/null"));
}

use std::os::unix::fs::FileTypeExt;

#[test]
fn graphs_are_not_written_over_the_inputs() {
    let dir = Dir::new("graph-input");
    let csv = tiny_csv(&dir);
    let before = std::fs::read(&csv).unwrap();
    // The data file under another name (a symlink) is still the data file.
    let alias = dir.path("alias.json");
    std::os::unix::fs::symlink("tiny.csv", &alias).unwrap();
    for (flag, lazy) in [("--trace-graph", false), ("--graph-out", true)] {
        let mut args = vec!["train", "--data", &csv, flag, &alias];
        args.extend(QUICK);
        if lazy {
            args.extend(["--device", "lazy"]);
        }
        let e = refused(&args);
        assert_eq!(
            e,
            format!(
                "error: {flag} {alias}: it is the --data file {csv}; refusing to overwrite an \
                 input"
            )
        );
        assert_eq!(std::fs::read(&csv).unwrap(), before);
    }
    // Two spellings of a file not there yet.
    let graph = dir.path("g.json");
    let other_spelling = format!(
        "{}/../{}/g.json",
        dir.0.display(),
        dir.0.file_name().unwrap().to_str().unwrap()
    );
    let mut args = vec!["train", "--device", "lazy", "--trace-graph", &graph];
    args.extend(["--graph-out", &other_spelling]);
    args.extend(QUICK);
    let e = refused(&args);
    assert_eq!(
        e,
        format!("error: --trace-graph and --graph-out name the same file {graph}")
    );
}

#[test]
fn graphs_replace_the_previous_file_atomically_through_links() {
    let dir = Dir::new("graph-atomic");
    let csv = tiny_csv(&dir);
    let target = dir.write("graph.json", b"previous");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
    let link = dir.path("link.json");
    std::os::unix::fs::symlink("graph.json", &link).unwrap();
    let lazy = dir.path("lazy.dot");
    let mut args = vec!["train", "--data", &csv, "--trace-graph", &link];
    args.extend(["--device", "lazy", "--graph-out", &lazy]);
    args.extend(QUICK);
    ok(&args);
    let text = std::fs::read_to_string(&target).unwrap();
    serde_json::from_str::<serde_json::Value>(&text).expect("the whole graph");
    assert_eq!(std::fs::metadata(&target).unwrap().mode() & 0o777, 0o640);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::read_to_string(&lazy)
        .unwrap()
        .starts_with("digraph"));
    assert_eq!(
        dir.names(),
        ["graph.json", "lazy.dot", "link.json", "tiny.csv"],
        "no temporary file is left"
    );
}

/// Runs `switchboard ARGS` with files limited to `blocks` 512-byte blocks (`ulimit -f`, the
/// signal ignored): a write past it fails with EFBIG, as on a full disk.
fn run_with_file_limit(blocks: u64, args: &[&str]) -> Output {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -f {blocks} && trap '' XFSZ && exec \"$0\" \"$@\""
        ))
        .arg(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    out
}

#[test]
fn a_failed_write_leaves_the_previous_file_whole() {
    let dir = Dir::new("efbig");
    let csv = tiny_csv(&dir);
    let input = save(&dir, "in.safetensors", &[1.0; 4096]);
    let previous = save(&dir, "out.safetensors", &[7.0]);
    let before = std::fs::read(&previous).unwrap();
    let out = run_with_file_limit(
        4,
        &["call", "neg", "--in", &input, "--out", &previous, "self=@a"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("File too large"), "{stderr}");
    assert_eq!(std::fs::read(&previous).unwrap(), before);
    let graph = dir.write("graph.json", b"{\"previous\": true}");
    let mut args = vec!["train", "--data", &csv, "--trace-graph", &graph];
    args.extend(QUICK);
    let out = run_with_file_limit(4, &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with(&format!("error: --trace-graph {graph}: File too large")));
    assert_eq!(std::fs::read(&graph).unwrap(), b"{\"previous\": true}");
    assert_eq!(
        dir.names(),
        [
            "graph.json",
            "in.safetensors",
            "out.safetensors",
            "tiny.csv"
        ],
        "no temporary file is left"
    );
}

#[test]
fn a_failed_write_to_stdout_says_what_failed() {
    let dir = Dir::new("dev-full");
    let input = save(&dir, "in.safetensors", &[1.0]);
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let argvs: [&[&str]; 5] = [
        &["keys"],
        &["ops"],
        &["table", "aten::add.Tensor"],
        &["call", "neg", "--in", &input, "self=@a"],
        &[&["train"][..], &QUICK].concat(),
    ];
    for args in argvs {
        let out = command(args).stdout(full()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim_end(),
            "error: cannot write the output: No space left on device (os error 28)",
            "{args:?}"
        );
    }
}

#[test]
fn a_missing_tensor_lists_a_bounded_number_of_names() {
    let dir = Dir::new("many-names");
    let t = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
    let names: Vec<String> = (0..1000).map(|i| format!("t{i:04}")).collect();
    let tensors: Vec<(&str, &Tensor)> = names.iter().map(|n| (n.as_str(), &t)).collect();
    let input = dir.path("many.safetensors");
    save_safetensors_file(&input, &tensors, None).unwrap();
    let e = refused(&["call", "neg", "--in", &input, "self=@missing"]);
    let listed: Vec<&str> = names[..20].iter().map(String::as_str).collect();
    assert_eq!(
        e,
        format!(
            "error: argument 'self': {input} holds no tensor 'missing' (it holds: {}, ... and \
             980 more)",
            listed.join(", ")
        )
    );
}

#[test]
fn unused_gradient_inputs_get_a_bounded_number_of_notes() {
    let dir = Dir::new("many-grads");
    let a = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
    let names: Vec<String> = (0..100).map(|i| format!("grad_out{}", i + 1)).collect();
    let mut tensors: Vec<(&str, &Tensor)> = names.iter().map(|n| (n.as_str(), &a)).collect();
    tensors.push(("a", &a));
    let input = dir.path("grads.safetensors");
    save_safetensors_file(&input, &tensors, None).unwrap();
    let out = ok(&["call", "neg", "--in", &input, "--backward", "self=@a"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 21, "{stderr}");
    assert_eq!(
        lines[0],
        "note: grad_out1 of the input file is not used: out1 is not a floating-point tensor \
         output of aten::neg"
    );
    assert_eq!(lines[20], "note: ... and 80 more unused grad_out tensors");
}

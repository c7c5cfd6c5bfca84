//! Bad and extreme input to the `switchboard` binary, one test per class of bad input: nothing
//! hangs, aborts, panics or answers wrongly. Every refusal is an `error: ...` line on stderr
//! with exit status 2; every process must end within `DEADLINE`.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use switchboard::tensor::{load_safetensors_file, save_safetensors_file, Tensor};

/// Far more than any of these runs needs in a debug build: a run still going then hangs.
const DEADLINE: Duration = Duration::from_secs(120);

/// A scratch directory, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("sb-bad-input-{name}-{}", std::process::id()));
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
    fn save(&self, name: &str, tensors: &[(&str, &Tensor)]) -> String {
        let path = self.path(name);
        save_safetensors_file(&path, tensors, None).unwrap();
        path
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn spawn(args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("SWITCHBOARD_SHOW_DISPATCH_TRACE")
        .env_remove("RAYON_NUM_THREADS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("the switchboard binary runs")
}

/// Waits for `child`, killing it (and failing) past the deadline.
fn finish(mut child: Child, what: &str) -> Run {
    let start = Instant::now();
    // Drain the pipes on threads so that a chatty child cannot block on a full pipe.
    let mut out_pipe = child.stdout.take();
    let mut err_pipe = child.stderr.take();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(p) = out_pipe.as_mut() {
            let _ = p.read_to_string(&mut s);
        }
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(p) = err_pipe.as_mut() {
            let _ = p.read_to_string(&mut s);
        }
        s
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("{what}: still running after {DEADLINE:?} (a hang)");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let run = Run {
        code: status.code(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    };
    assert!(
        !run.stderr.contains("panicked") && run.code != Some(101),
        "{what}: panicked: {}",
        run.stderr
    );
    assert!(run.code.is_some(), "{what}: killed by a signal (an abort?)");
    run
}

fn run_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    finish(spawn(args, env), &format!("{args:?} {env:?}"))
}

fn run(args: &[&str]) -> Run {
    run_env(args, &[])
}

/// Runs and expects a refusal: exit status 2 and stderr starting with `error: `. Returns the
/// first line of stderr.
fn refused_env(args: &[&str], env: &[(&str, &str)]) -> String {
    let r = run_env(args, env);
    assert_eq!(
        r.code,
        Some(2),
        "{args:?} {env:?}: {}{}",
        r.stdout,
        r.stderr
    );
    assert!(r.stderr.starts_with("error: "), "{args:?}: {}", r.stderr);
    r.stderr.lines().next().unwrap_or_default().to_owned()
}

fn refused(args: &[&str]) -> String {
    refused_env(args, &[])
}

/// A `call` refusal: one line, exactly.
fn call_refused(args: &[&str]) -> String {
    let r = run(&[&["call"], args].concat());
    assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {}", r.stderr);
    assert!(r.stderr.starts_with("error: "), "{args:?}: {}", r.stderr);
    r.stderr.trim_end().to_owned()
}

fn f32s(v: &[f32], sizes: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), sizes).unwrap()
}

/// A small two-class CSV.
fn tiny_csv(dir: &Dir) -> String {
    let mut csv = String::from("a,b,label\n");
    for i in 0..20 {
        csv += &format!("{i},{},{}\n", i % 3, i % 2);
    }
    dir.write("tiny.csv", csv.as_bytes())
}

// ---- Hangs ----

#[test]
fn pooling_with_a_huge_window_fails_at_once() {
    let dir = Dir::new("pool");
    let img = f32s(
        &(0..16).map(|v| v as f32).collect::<Vec<_>>(),
        &[1, 1, 4, 4],
    );
    let input = dir.save("img.safetensors", &[("img", &img)]);
    for op in ["max_pool2d", "max_pool2d_with_indices"] {
        let e = call_refused(&[
            op,
            "--in",
            &input,
            "self=@img",
            "kernel_size=1099511627776",
            "padding=549755813888",
        ]);
        assert!(
            e.ends_with("value cannot be converted to type int without overflow"),
            "{e}"
        );
    }
    // The largest window a C++ int allows finishes at once (closed-form window bounds).
    let r = run(&[
        "call",
        "max_pool2d",
        "--in",
        &input,
        "self=@img",
        "kernel_size=1073741824",
        "padding=536870912",
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout, "out0 = tensor([[[[15.]]]])\n");
}

#[test]
fn thread_counts_are_bounded() {
    let e = refused(&["train", "--threads", "100000"]);
    assert!(
        e.contains("--threads") && e.contains("from 1 to 1024"),
        "{e}"
    );
    for cmd in [&["train", "--epochs", "1"][..], &["keys"], &["call", "neg"]] {
        let e = refused_env(cmd, &[("RAYON_NUM_THREADS", "100000")]);
        assert_eq!(
            e,
            "error: RAYON_NUM_THREADS must be from 1 to 1024, got 100000"
        );
    }
    let e = refused_env(&["keys"], &[("RAYON_NUM_THREADS", "lots")]);
    assert!(e.contains("RAYON_NUM_THREADS=lots"), "{e}");
}

// ---- Aborts and panics ----

#[test]
fn huge_epoch_counts_allocate_nothing_up_front() {
    let dir = Dir::new("epochs");
    let csv = tiny_csv(&dir);
    for epochs in ["18446744073709551615", "1000000000"] {
        let args = [
            "train",
            "--data",
            &csv,
            "--epochs",
            epochs,
            "--no-progress",
            "--no-summary",
        ];
        let mut child = spawn(&args, &[]);
        // The first epoch runs; then closing the pipe ends the run (a closed stdout is not an
        // error: exit status 0).
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first_epoch = lines
            .by_ref()
            .map(|l| l.unwrap())
            .find(|l| l.starts_with("epoch"));
        assert!(
            first_epoch.as_deref().is_some_and(|l| l.contains(epochs)),
            "{first_epoch:?}"
        );
        drop(lines);
        let r = finish(child, epochs);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
    }
}

#[test]
fn very_high_ranks_print() {
    let dir = Dir::new("rank");
    let rank = 20_000;
    let x = Tensor::from_vec(vec![7.0f32], &vec![1; rank]).unwrap();
    let input = dir.save("x.safetensors", &[("x", &x)]);
    let r = run(&["call", "contiguous", "--in", &input, "self=@x"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let want = format!(
        "out0 = tensor({}7.{})\n",
        "[".repeat(rank),
        "]".repeat(rank)
    );
    assert!(r.stdout == want, "{:.60}", r.stdout);
}

#[test]
fn a_gzip_bomb_is_refused() {
    let dir = Dir::new("bomb");
    // 64 MiB of blank lines (after two rows) in 64 gzip members of 1 MiB each: about 64 KiB.
    let mut block = b"1,0\n2,1\n".to_vec();
    block.resize(1 << 20, b'\n');
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&block).unwrap();
    let bomb = dir.write("bomb.csv.gz", &gz.finish().unwrap().repeat(64));
    let e = refused(&["train", "--data", &bomb, "--max-data-mib", "8"]);
    assert_eq!(
        e,
        format!(
            "error: {bomb}: the data is larger than 8 MiB of CSV text (decompressed); refusing \
             to read more"
        )
    );
}

#[test]
fn convolutions_with_a_huge_dilation_fail_cleanly() {
    let dir = Dir::new("dilation");
    let x = f32s(&[0.0; 25], &[1, 1, 5, 5]);
    let w = f32s(&[1.0; 9], &[1, 1, 3, 3]);
    let x1 = f32s(&[0.0; 5], &[1, 1, 5]);
    let w1 = f32s(&[1.0; 2], &[1, 1, 2]);
    let input = dir.save(
        "conv.safetensors",
        &[("x", &x), ("w", &w), ("x1", &x1), ("w1", &w1)],
    );
    for (op, inp, wt) in [("conv2d", "x", "w"), ("conv1d", "x1", "w1")] {
        for dilation in [
            "9223372036854775807",
            "4611686018427387904",
            "1099511627776",
        ] {
            let e = call_refused(&[
                op,
                "--in",
                &input,
                &format!("input=@{inp}"),
                &format!("weight=@{wt}"),
                &format!("dilation={dilation}"),
            ]);
            assert!(
                e.contains("overflows int64") || e.contains("Kernel size can't be greater"),
                "{e}"
            );
        }
    }
}

// ---- Silently wrong answers ----

#[test]
fn as_strided_stays_within_a_loaded_tensor() {
    let dir = Dir::new("strided");
    let a = f32s(&[1.0, 2.0, 3.0, 4.0], &[4]);
    let b = f32s(&[5.0, 6.0, 7.0, 8.0], &[4]);
    let input = dir.save("ab.safetensors", &[("a", &a), ("b", &b)]);
    for args in [
        &["size=[8]", "stride=[1]"][..],
        &["size=[1]", "stride=[1]", "storage_offset=4"],
        &["size=[2]", "stride=[4]"],
    ] {
        let e = call_refused(&[&["as_strided", "--in", &input, "self=@a"], args].concat());
        assert!(
            e.ends_with("are out of bounds for storage of size 16"),
            "{args:?}: {e}"
        );
    }
    let r = run(&[
        "call",
        "as_strided",
        "--in",
        &input,
        "self=@b",
        "size=[2]",
        "stride=[2]",
        "storage_offset=1",
    ]);
    assert_eq!(r.stdout, "out0 = tensor([6., 8.])\n", "{}", r.stderr);
}

#[test]
fn convolution_padding_near_int64_max_errors() {
    let dir = Dir::new("padding");
    let x = f32s(&[1.0; 25], &[1, 1, 5, 5]);
    let w = f32s(&[1.0; 9], &[1, 1, 3, 3]);
    let input = dir.save("conv.safetensors", &[("x", &x), ("w", &w)]);
    for padding in ["9223372036854775806", "[0, 4611686018427387904]"] {
        let e = call_refused(&[
            "conv2d",
            "--in",
            &input,
            "input=@x",
            "weight=@w",
            &format!("padding={padding}"),
        ]);
        assert!(e.contains("the padded input size"), "{e}");
    }
    // An output too large for any memory is an error too.
    let e = call_refused(&[
        "conv2d",
        "--in",
        &input,
        "input=@x",
        "weight=@w",
        "padding=1099511627776",
    ]);
    assert!(e.contains("overflow"), "{e}");
}

#[test]
fn nan_clamp_bounds_give_nan() {
    let dir = Dir::new("clamp");
    let x = f32s(&[-2.0, 0.5, 3.0], &[3]);
    let nan = f32s(&[f32::NAN], &[]);
    let input = dir.save("x.safetensors", &[("x", &x), ("nan", &nan)]);
    for args in [
        &["clamp", "min=nan"][..],
        &["clamp", "max=nan"],
        &["clamp", "min=0", "max=nan"],
        &["clamp_min", "min=nan"],
        &["clamp_max", "max=nan"],
        &["clamp.Tensor", "min=@nan"],
        &["clamp.Tensor", "max=@nan"],
    ] {
        let r = run(&[&["call", args[0], "--in", &input, "self=@x"], &args[1..]].concat());
        assert_eq!(r.code, Some(0), "{args:?}: {}", r.stderr);
        assert_eq!(r.stdout, "out0 = tensor([nan, nan, nan])\n", "{args:?}");
    }
}

#[test]
fn int_literals_beyond_int64_are_overflow_errors() {
    let dir = Dir::new("literal");
    let input = dir.save("x.safetensors", &[("x", &f32s(&[1.0], &[1]))]);
    for (op, arg) in [
        ("add.Scalar", "other=9223372036854775808"),
        ("add.Scalar", "other=-9223372036854775809"),
        ("mul.Scalar", "other=100000000000000000000000"),
        ("sum.dim_IntList", "dim=[9223372036854775808]"),
    ] {
        let e = call_refused(&[op, "--in", &input, "self=@x", arg]);
        assert!(e.contains("Overflow when unpacking long"), "{e}");
    }
}

// ---- Messages and the command line ----

#[test]
fn negative_numbers_are_values() {
    for (flag, says) in [
        ("--lr", "must be a positive finite number, got -1"),
        ("--seed", "must not be negative, got -1"),
        ("--epochs", "must not be negative, got -1"),
        (
            "--test-fraction",
            "must be between 0 and 1 (exclusive), got -1",
        ),
        (
            "--weight-decay",
            "must be a finite number, at least 0, got -1",
        ),
        ("--momentum", "must be at least 0 and below 1, got -1"),
        ("--hidden", "must not be negative, got -1"),
        ("--batch-size", "must not be negative, got -1"),
        ("--threads", "must not be negative, got -1"),
    ] {
        for args in [
            vec![flag.to_owned(), "-1".into()],
            vec![format!("{flag}=-1")],
        ] {
            let argv: Vec<&str> = ["train"]
                .into_iter()
                .chain(args.iter().map(String::as_str))
                .collect();
            let e = refused(&argv);
            assert!(e.contains(flag) && e.contains(says), "{argv:?}: {e}");
        }
    }
}

#[test]
fn every_option_and_cell_is_validated() {
    for (args, says) in [
        (&["--momentum", "1"][..], "--momentum"),
        (&["--momentum", "nan"], "--momentum"),
        (&["--weight-decay", "nan"], "--weight-decay"),
        (&["--weight-decay", "inf"], "--weight-decay"),
        (&["--lr", "inf"], "--lr"),
        (
            &["--hidden", "18446744073709551615"],
            "must be at most 9223372036854775807",
        ),
        (&["--epochs", "0"], "must be at least 1"),
        (&["--max-data-mib", "0"], "--max-data-mib"),
    ] {
        let e = refused(&[&["train"], args].concat());
        assert!(e.contains(says) && !e.contains("diverged"), "{args:?}: {e}");
    }
    let dir = Dir::new("cells");
    for (cell, shown) in [
        ("nan", "\"nan\""),
        ("inf", "\"inf\""),
        ("-inf", "\"-inf\""),
        ("1e40", "\"1e40\""),
    ] {
        let csv = dir.write("c.csv", format!("1,2,0\n3,{cell},1\n4,5,0\n").as_bytes());
        let e = refused(&["train", "--data", &csv]);
        assert_eq!(
            e,
            format!(
                "error: {csv}:2: column 2 is {shown}, which is not a finite float32: features \
                 must be finite numbers"
            )
        );
    }
    for label in ["-1", "0.5", "x1"] {
        let csv = dir.write("l.csv", format!("1,0\n2,1\n3,{label}\n").as_bytes());
        let e = refused(&["train", "--data", &csv]);
        assert!(e.contains("must be a non-negative integer"), "{label}: {e}");
    }
}

#[test]
fn classes_are_counted_the_same_whatever_the_label() {
    let dir = Dir::new("labels");
    for label in ["0", "1", "7"] {
        let csv = dir.write(
            "one.csv",
            format!("1,{label}\n2,{label}\n3,{label}\n").as_bytes(),
        );
        let e = refused(&["train", "--data", &csv]);
        assert_eq!(
            e,
            format!("error: the data needs at least two classes, but every label is {label}")
        );
    }
}

#[test]
fn out_never_destroys_the_input() {
    let dir = Dir::new("out");
    let a = f32s(&[1.0, 2.0], &[2]);
    let file = dir.save("io.safetensors", &[("a", &a)]);
    // Writing the result onto the input replaces it whole.
    let r = run(&["call", "neg", "--in", &file, "--out", &file, "self=@a"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(
        load_safetensors_file(&file).unwrap()["out0"]
            .to_vec::<f32>()
            .unwrap(),
        [-1.0, -2.0]
    );
    // A failed save (a meta output has no data) leaves the file as it was.
    let before = std::fs::read(&file).unwrap();
    let e = call_refused(&[
        "empty.memory_format",
        "--out",
        &file,
        "size=[2]",
        "device=meta",
    ]);
    assert!(e.contains("output file"), "{e}");
    assert_eq!(std::fs::read(&file).unwrap(), before);
    let names: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["io.safetensors"], "no temporary file is left");
    assert!(Path::new(&file).exists());
}

#[test]
fn the_trace_flag_takes_the_usual_words() {
    let dir = Dir::new("trace");
    let input = dir.save("x.safetensors", &[("x", &f32s(&[1.0], &[1]))]);
    let args = ["call", "neg", "--in", &input, "self=@x"];
    for (value, traced) in [
        ("1", true),
        ("true", true),
        ("YES", true),
        ("on", true),
        ("0", false),
        ("false", false),
        ("No", false),
        ("off", false),
        ("", false),
    ] {
        let r = run_env(&args, &[("SWITCHBOARD_SHOW_DISPATCH_TRACE", value)]);
        assert_eq!(r.code, Some(0), "{value}: {}", r.stderr);
        assert_eq!(
            r.stderr.contains("[call] op=[aten::neg]"),
            traced,
            "{value}"
        );
    }
    for value in ["maybe", "2", "enable"] {
        let e = refused_env(&args, &[("SWITCHBOARD_SHOW_DISPATCH_TRACE", value)]);
        assert_eq!(
            e,
            format!(
                "error: SWITCHBOARD_SHOW_DISPATCH_TRACE={value} is not a boolean: use 1, true, \
                 yes, on (or 0, false, no, off)"
            )
        );
    }
}

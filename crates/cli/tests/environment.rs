//! The environment variables the `switchboard` binary reads are booleans read one way
//! (`1`, `true`, `yes`, `on` / `0`, `false`, `no`, `off`, any case); any other value is an
//! error naming the variable, before anything runs.

use std::process::{Command, Output};

use switchboard::tensor::{save_safetensors_file, Tensor};

struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run(args: &[&str], env: (&str, &str)) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .env_remove("SWITCHBOARD_SHOW_DISPATCH_TRACE")
        .env_remove("SWITCHBOARD_LOG_INTERCEPTS")
        .env(env.0, env.1)
        .output()
        .unwrap()
}

#[test]
fn log_intercepts_is_a_boolean() {
    let dir = std::env::temp_dir().join(format!("switchboard-env-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let d = Dir(dir);
    let x = Tensor::from_vec(vec![1f32, 2., 3., 4.], &[2, 2]).unwrap();
    let input = d.0.join("x.safetensors");
    save_safetensors_file(&input, &[("x", &x)], None).unwrap();
    let input = input.display().to_string();
    let args = [
        "call", "mm", "--in", &input, "self=@x", "mat2=@x", "--device", "lazy",
    ];
    const VAR: &str = "SWITCHBOARD_LOG_INTERCEPTS";
    for (value, logged) in [
        ("1", true),
        ("true", true),
        ("YES", true),
        (" on ", true),
        ("0", false),
        ("false", false),
        ("No", false),
        ("off", false),
        ("", false),
    ] {
        let out = run(&args, (VAR, value));
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(0), "{value:?}: {stderr}");
        assert_eq!(
            stderr.contains("[switchboard] Intercepted aten::mm -> id=lt_"),
            logged,
            "{value:?}: {stderr}"
        );
    }
    for value in ["maybe", "2", "enable"] {
        // Refused by every command, before it runs.
        for args in [&args[..], &["keys"]] {
            let out = run(args, (VAR, value));
            assert_eq!(out.status.code(), Some(2), "{value}");
            assert!(out.stdout.is_empty(), "{value}");
            assert_eq!(
                String::from_utf8(out.stderr).unwrap(),
                format!(
                    "error: {VAR}={value} is not a boolean: use 1, true, yes, on (or 0, false, \
                     no, off)\n"
                )
            );
        }
    }
}

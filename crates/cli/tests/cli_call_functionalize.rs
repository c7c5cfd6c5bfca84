//! `switchboard call --functionalize[=REMOVE]` as a process: every case gives functionalized
//! (views kept, views removed; with `--backward`, with `--device`) what it gives eagerly
//! (outputs, gradients, JSON returns, error lines), and a bad REMOVE is one `error:` line.

mod call_cases;

use call_cases::{dir, run, CASES};

/// Runs every case with `base` flags and with each functionalization added; all alike.
fn every_case_runs_alike(test: &str, base: &[&str]) {
    let d = dir(test);
    let mut failures = Vec::new();
    for case in CASES {
        let eager = run(&d, base, case);
        for f in ["--functionalize", "--functionalize=mutations_and_views"] {
            let mut flags = base.to_vec();
            flags.push(f);
            let got = run(&d, &flags, case);
            // With --backward an out= call whose `out` requires grad fails either way: eagerly
            // at autograd's out= check, functionalized where the written `out` (a leaf that
            // requires grad) is written back, as torch.func.functionalize's `copy_` fails.
            let out_with_grad = base.contains(&"--backward") && case[0].contains("out");
            if out_with_grad && eager.is_err() && got.is_err() {
                continue;
            }
            if got != eager {
                failures.push(format!("{case:?} {flags:?}: {got:?}, eagerly {eager:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_case_gives_functionalized_what_it_gives_eagerly() {
    every_case_runs_alike("plain", &[]);
}

#[test]
fn gradients_through_functionalized_calls_are_eagers() {
    every_case_runs_alike("backward", &["--backward"]);
}

#[test]
fn functionalized_calls_run_on_other_devices() {
    every_case_runs_alike("lazy", &["--device", "lazy"]);
}

#[test]
fn an_in_place_call_on_aliased_inputs_returns_the_written_value() {
    // `a.add_(a)`: each argument is wrapped on its own, as torch.func.functionalize does.
    let d = dir("write-back");
    for f in ["--functionalize", "--functionalize=mutations_and_views"] {
        let (_, _, tensors) = run(&d, &[f], &["add_.Tensor", "self=@a", "other=@a"]).unwrap();
        let doubled: Vec<f64> = [1.0, -2.0, 3.0, -4.0, 5.0, 6.0]
            .iter()
            .map(|x| 2.0 * x)
            .collect();
        assert_eq!(tensors[0].3, doubled, "{f}");
    }
}

#[test]
fn an_unknown_remove_is_one_error_line() {
    let d = dir("bad-remove");
    let err = run(&d, &["--functionalize=views"], &["relu", "self=@a"]).unwrap_err();
    assert!(
        err.contains("--functionalize: functionalize(f, remove='mutations'): received invalid argument for remove=views."),
        "{err}"
    );
}

#[test]
fn a_functionalized_out_call_writes_its_out_back_at_the_end() {
    // Eagerly autograd refuses the out= call; functionalized it runs as `pow` and fails only
    // where `out`, a leaf that requires grad, is written back (`copy_`), as in PyTorch.
    let d = dir("out-write-back");
    let case = ["pow.Tensor_Scalar_out", "self=@a", "exponent=2", "out=@b"];
    let eager = run(&d, &["--backward"], &case).unwrap_err();
    assert!(
        eager.contains("functions with out=... arguments don't support automatic differentiation"),
        "{eager}"
    );
    let functional = run(&d, &["--backward", "--functionalize"], &case).unwrap_err();
    assert!(
        functional
            .contains("a leaf Variable that requires grad is being used in an in-place operation"),
        "{functional}"
    );
}

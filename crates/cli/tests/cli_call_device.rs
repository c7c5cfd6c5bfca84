//! `switchboard call --device DEVICE` as a process: every case gives on `lazy` what it gives on
//! the CPU (outputs, gradients, JSON returns, error lines), and bad input is still one `error:`
//! line with exit status 2.

mod call_cases;

use call_cases::{dir, f32s, Dir, Written, CASES};
use switchboard::tensor::{save_safetensors_file, Tensor};

/// The case run with `--device DEVICE`, or without the flag.
fn run(d: &Dir, device: Option<&str>, case: &[&str]) -> Result<Written, String> {
    match device {
        Some(dev) => call_cases::run(d, &["--device", dev], case),
        None => call_cases::run(d, &[], case),
    }
}

#[test]
fn every_case_gives_on_lazy_what_it_gives_on_cpu() {
    let d = dir("cases");
    let mut failed = Vec::new();
    for case in CASES {
        let cpu = run(&d, None, case);
        let lazy = run(&d, Some("lazy"), case);
        assert_eq!(cpu, lazy, "{case:?}");
        if let Err(e) = &cpu {
            failed.push(format!("{case:?}: {e}"));
        }
        // `--device cpu` is the plain call.
        assert_eq!(run(&d, Some("cpu"), case), cpu, "{case:?}");
    }
    // The table is not a list of errors.
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn backward_on_lazy_gives_the_cpu_gradients() {
    let d = dir("backward");
    let mut passed = 0;
    for case in CASES {
        let mut case = case.to_vec();
        case.push("--backward");
        let cpu = run(&d, None, &case);
        let lazy = run(&d, Some("lazy"), &case);
        assert_eq!(cpu, lazy, "{case:?}");
        if let Ok((_, _, tensors)) = &cpu {
            passed += usize::from(tensors.iter().any(|t| t.0.starts_with("grad.")));
        }
    }
    assert!(passed >= 25, "{passed} cases with gradients");
}

#[test]
fn errors_on_lazy_are_the_cpu_errors_in_one_line() {
    let d = dir("errors");
    for case in [
        // Shape and dtype errors appear when the call is captured, with eager's message.
        &["mm", "self=@a", "mat2=@a"][..],
        &["add.Tensor", "self=@a", "other=@m"],
        &["index_select", "self=@a", "dim=0", "index=@v"],
        &["cat", "tensors=[@a, @v]"],
        &["view", "self=@a", "size=[4]"],
        // Errors before the call.
        &["no_such_op_xyz", "self=@a"],
        &["add.Tensor", "self=@a"],
        &["add.Tensor", "self=@nope", "other=@a"],
        &["mm", "self=@a", "mat2=@m", "extra=1"],
        // Autograd's in-place check on a leaf.
        &["add_.Tensor", "self=@a", "other=@b", "--backward"],
    ] {
        let cpu = run(&d, None, case).expect_err(&format!("{case:?} fails on cpu"));
        let lazy = run(&d, Some("lazy"), case).expect_err(&format!("{case:?} fails on lazy"));
        assert_eq!(cpu, lazy, "{case:?}");
    }
}

#[test]
fn bad_devices_are_one_error_line() {
    let d = dir("devices");
    let case = &["relu", "self=@a"][..];
    let e = run(&d, Some("gpu"), case).unwrap_err();
    assert!(e.starts_with("error: --device \"gpu\": "), "{e}");
    assert!(e.contains("Expected one of"), "{e}");
    let e = run(&d, Some("lazy:64"), case).unwrap_err();
    assert!(
        e.contains("lazy device index 64 is out of range: the lazy devices are lazy:0 to lazy:63"),
        "{e}"
    );
    // A device without a backend in this build fails at the first move.
    let e = run(&d, Some("cuda"), case).unwrap_err();
    assert!(
        e.starts_with("error: aten::relu: moving the inputs to cuda"),
        "{e}"
    );
    // On meta the call runs (shapes only) and reading the outputs back fails.
    let e = run(&d, Some("meta"), case).unwrap_err();
    assert!(
        e.starts_with("error: aten::relu: moving the outputs from meta to cpu"),
        "{e}"
    );
}

#[test]
fn cpu_and_meta_with_an_index_are_the_cpu_and_meta() {
    // `torch.device("cpu:0")` is the CPU: a tensor created there is on `cpu` and mixes with
    // every other CPU tensor (PyTorch's CPU and meta allocators give index-less devices).
    let d = dir("indexed");
    for case in CASES {
        let cpu = run(&d, None, case);
        assert_eq!(run(&d, Some("cpu:0"), case), cpu, "{case:?}");
        let mut backward = case.to_vec();
        backward.push("--backward");
        assert_eq!(
            run(&d, Some("cpu:0"), &backward),
            run(&d, None, &backward),
            "{backward:?}"
        );
    }
    // On meta:0 the call runs (shapes only, no device mismatch) and reading the outputs back
    // is the meta backend's error, as on meta.
    for case in [
        &["mm", "self=@a", "mat2=@m"][..],
        &["add.Tensor", "self=@a", "other=@b"],
    ] {
        let e = run(&d, Some("meta:0"), case).unwrap_err();
        assert!(
            e.contains("moving the outputs from meta:0 to cpu: Cannot copy out of meta tensor"),
            "{case:?}: {e}"
        );
    }
}

#[test]
fn backward_moves_the_gradient_weights_to_the_device() {
    // `grad_outI` is read by --backward besides the arguments: it goes to the device too.
    let dir = std::env::temp_dir().join(format!(
        "switchboard-call-device-{}-grad-out",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let d = Dir(dir);
    let a = f32s(&[1.0, -2.0, 3.0, -4.0, 5.0, 6.0], &[2, 3]);
    let m = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
    let g = f32s(&[1.0, 0.0, 2.0, -1.0], &[2, 2]);
    let g64 = Tensor::from_vec(vec![0.5f64, 1.0, -1.0, 2.0], &[2, 2]).unwrap();
    for grad in [&g, &g64] {
        let tensors = [("a", &a), ("m", &m), ("grad_out0", grad)];
        save_safetensors_file(d.0.join("in.safetensors"), &tensors, None).unwrap();
        let case = &["mm", "self=@a", "mat2=@m", "--backward"][..];
        let cpu = run(&d, None, case).unwrap();
        assert!(cpu.2.iter().any(|t| t.0 == "grad.self"), "{cpu:?}");
        assert_eq!(run(&d, Some("lazy"), case).unwrap(), cpu);
        // On meta, only reading the results back fails (no device mismatch before).
        let e = run(&d, Some("meta"), case).unwrap_err();
        assert!(e.contains("moving the outputs from meta to cpu"), "{e}");
    }
}

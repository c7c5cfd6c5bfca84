//! `switchboard call` on the FFT core: complex results print as PyTorch 2.15 prints them.

use std::process::Command;

use switchboard::tensor::{save_safetensors_file, Tensor};

fn call(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("call")
        .args(args)
        .output()
        .expect("the switchboard binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn fft_results_print_as_pytorchs() {
    let dir = std::env::temp_dir().join(format!("switchboard-cli-fft-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.safetensors");
    let x = Tensor::from_vec(vec![0.5f32, -1.0, 2.0, 3.0, 1.0, 0.0, -2.0, 4.0], &[2, 4]).unwrap();
    save_safetensors_file(&input, &[("x", &x)], None).unwrap();
    let input = input.to_str().unwrap();
    // torch.ops.aten._fft_r2c(x, [1], 0, True)
    let r2c = call(&[
        "aten::_fft_r2c",
        "--in",
        input,
        "self=@x",
        "dim=[1]",
        "normalization=0",
        "onesided=true",
    ]);
    assert_eq!(
        r2c.trim_end(),
        "out0 = tensor([[ 4.5000+0.j, -1.5000+4.j,  0.5000+0.j],\n        \
         [ 3.0000+0.j,  3.0000+4.j, -5.0000+0.j]])"
    );
    // torch.ops.aten._fft_r2c(x.double(), [0, 1], 2, False): complex128 carries its dtype.
    let x64 = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let input64 = dir.join("in64.safetensors");
    save_safetensors_file(&input64, &[("x", &x64)], None).unwrap();
    let full = call(&[
        "aten::_fft_r2c",
        "--in",
        input64.to_str().unwrap(),
        "self=@x",
        "dim=[0, 1]",
        "normalization=2",
        "onesided=false",
    ]);
    assert_eq!(
        full.trim_end(),
        "out0 = tensor([[ 2.5000+0.j, -0.5000+0.j],\n        [-1.0000+0.j,  0.0000+0.j]], \
         dtype=torch.complex128)"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

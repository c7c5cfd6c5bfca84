//! Empty views whose storage offset lies past their storage (`as_strided(size=[0],
//! storage_offset=7)` of a 2x3 tensor, which PyTorch allows: an empty tensor addresses no
//! element): every path that reads, copies, converts or writes one gives an empty tensor,
//! never a panic.

use std::process::Command;

use switchboard::ops;
use switchboard::tensor::{
    load_safetensors, load_safetensors_file, save_safetensors, save_safetensors_file, Device,
    RawOps, ScalarType, Tensor,
};
use switchboard_cli::device::to_device;

fn base() -> Tensor {
    Tensor::from_vec((0..6).map(|v| v as f32).collect(), &[2, 3]).unwrap()
}

fn empty_past_the_end() -> Tensor {
    base().as_strided(&[0], &[1], 7).unwrap()
}

#[test]
fn every_path_handles_an_offset_past_the_storage() {
    type Path = fn(&Tensor) -> switchboard::ops::Result<Tensor>;
    let paths: [(&str, Path); 10] = [
        ("contiguous", |t| ops::contiguous(t)),
        ("clone", |t| ops::clone(t)),
        ("to", |t| ops::to(t, ScalarType::Double)),
        ("_to_copy", |t| ops::_to_copy(t)),
        ("neg", |t| ops::neg(t)),
        ("cat", |t| ops::cat(&[t.clone(), t.clone()])),
        ("copy_ into", |t| {
            ops::copy_(t, &Tensor::zeros(&[0], ScalarType::Double).unwrap())
        }),
        ("copy_ from", |t| {
            ops::copy_(&Tensor::zeros(&[0], ScalarType::Double).unwrap(), t)
        }),
        ("lazy and back", |t| {
            let lazy = to_device(t, "lazy".parse().unwrap())?;
            to_device(&ops::neg(&lazy)?, Device::CPU)
        }),
        ("Tensor::contiguous", |t| Ok(t.contiguous()?)),
    ];
    for (name, path) in paths {
        let out = path(&empty_past_the_end()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(out.numel(), 0, "{name}");
    }
    assert!(empty_past_the_end().to_vec::<f32>().unwrap().is_empty());
    assert_eq!(empty_past_the_end().to_string(), "tensor([])");
    let bytes = save_safetensors(&[("e", &empty_past_the_end())], None).unwrap();
    assert_eq!(load_safetensors(&bytes).unwrap()["e"].sizes(), [0]);
    // Past the end in two dimensions, one of them empty.
    let v = base().as_strided(&[0, 2], &[1, 3], 9).unwrap();
    assert_eq!(ops::clone(&v).unwrap().sizes(), [0, 2]);
}

#[test]
fn call_saves_an_empty_view_past_its_storage() {
    let dir = std::env::temp_dir().join(format!("sb-empty-views-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("a.safetensors");
    save_safetensors_file(&input, &[("a", &base())], None).unwrap();
    let output = dir.join("o.safetensors");
    let run = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["call", "as_strided", "--in"])
        .arg(&input)
        .arg("--out")
        .arg(&output)
        .args(["self=@a", "size=[0]", "stride=[1]", "storage_offset=7"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let saved = load_safetensors_file(&output).unwrap();
    assert_eq!(saved["out0"].sizes(), [0]);
    assert_eq!(saved["out0"].dtype(), ScalarType::Float);
    let _ = std::fs::remove_dir_all(&dir);
}

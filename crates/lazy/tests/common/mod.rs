//! Helpers of the lazy backend's tests.
#![allow(dead_code)]

use std::sync::{Mutex, MutexGuard};

use switchboard_lazy as lazy;
use switchboard_ops as ops;
use switchboard_tensor::{Device, Tensor};

// The backend's state (pending graph, mode, filter, counters) is per process, and the tests
// of one binary run on several threads: each test holds this lock.
static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    lazy::sync().unwrap();
    g
}

pub fn f32s(v: &[f32], sizes: &[i64]) -> Tensor {
    Tensor::from_slice(v, sizes).unwrap()
}

/// `t` moved to `device` (`to(device)`).
pub fn to(t: &Tensor, device: Device) -> Tensor {
    ops::_to_copy_with(t, ops::ToCopyOptions::default().device(device)).unwrap()
}

pub fn lz(t: &Tensor) -> Tensor {
    to(t, lazy::DEVICE)
}

pub fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec_as::<f32>().unwrap()
}

/// `1..=n` as floats, shaped.
pub fn seq(sizes: &[i64]) -> Tensor {
    let n: i64 = sizes.iter().product();
    f32s(&(1..=n).map(|v| v as f32).collect::<Vec<_>>(), sizes)
}

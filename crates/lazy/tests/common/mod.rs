//! Helpers of the lazy backend's tests.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use switchboard_dispatcher::add_observer;
use switchboard_keys::DispatchKey;

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

/// Runs `f` and counts the CPU kernels called on this thread meanwhile (a capture runs none;
/// a sync runs the captured calls on CPU).
pub fn cpu_kernel_calls<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let count = Arc::new(AtomicUsize::new(0));
    let me = std::thread::current().id();
    let seen = count.clone();
    let guard = add_observer(move |e| {
        if e.before && e.key == DispatchKey::CPU && std::thread::current().id() == me {
            seen.fetch_add(1, Ordering::Relaxed);
        }
    });
    let r = f();
    drop(guard);
    (r, count.load(Ordering::Relaxed))
}

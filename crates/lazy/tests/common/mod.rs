//! Helpers of the lazy backend's tests.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use switchboard_dispatcher::add_observer;
use switchboard_keys::{DeviceType, DispatchKey};

use switchboard_lazy::{self as lazy, LazyBackend};
use switchboard_ops as ops;
use switchboard_tensor::{Device, Tensor};

/// A lazy device of one test's own: the tests of one binary run on several threads, in
/// parallel, each on a lazy device no other test of the binary uses (a backend's pending graph,
/// counters, filter, cache and executor are its device's, Note [Lazy devices]; lazy mode is
/// the thread's). Derefs to the device's backend: `d.stats()`, `d.sync()`, ...
#[derive(Clone, Copy)]
pub struct OwnDevice(&'static LazyBackend);

impl std::ops::Deref for OwnDevice {
    type Target = LazyBackend;
    fn deref(&self) -> &LazyBackend {
        self.0
    }
}

impl OwnDevice {
    /// `t` moved to this device.
    pub fn lz(&self, t: &Tensor) -> Tensor {
        to(t, self.0.device())
    }
}

/// A lazy device no other test of this binary has (`lazy:1`, `lazy:2`, ...; `lazy:0`, the
/// default, is left to the tests of the free functions).
pub fn own_device() -> OwnDevice {
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    let index = NEXT.fetch_add(1, Ordering::Relaxed);
    assert!(
        index < lazy::MAX_LAZY_DEVICES,
        "more tests than lazy devices"
    );
    let device = Device::with_index(DeviceType::Lazy, index as i16);
    OwnDevice(lazy::backend(device).unwrap())
}

pub fn f32s(v: &[f32], sizes: &[i64]) -> Tensor {
    Tensor::from_slice(v, sizes).unwrap()
}

/// `t` moved to `device` (`to(device)`).
pub fn to(t: &Tensor, device: Device) -> Tensor {
    ops::_to_copy_with(t, ops::ToCopyOptions::default().device(device)).unwrap()
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

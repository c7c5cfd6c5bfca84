//! What the structured-family tests share: the check that a family's Meta kernels are its
//! meta functions, and the tables of PyTorch's geometry and messages with their checks.

// Each test file includes this module and uses only some of it.
#![allow(dead_code)]

use switchboard_dispatcher::{Dispatcher, Result};
use switchboard_tensor::{Device, MemoryFormat, ScalarType, Tensor};

/// A float tensor of `sizes` (4-d) on Meta in the channels-last layout.
pub fn channels_last(sizes: &[i64]) -> Tensor {
    Tensor::empty_with_format(
        sizes,
        ScalarType::Float,
        Device::META,
        MemoryFormat::ChannelsLast,
    )
    .unwrap()
}

/// Asserts that the Meta kernel of each operator (`aten::gather.out`) is its meta function's
/// glue (`switchboard_ops::structured::...`), not a CPU kernel run without data.
pub fn assert_meta_kernels_are_meta_functions<S: AsRef<str>>(names: impl IntoIterator<Item = S>) {
    let d = Dispatcher::global();
    for name in names {
        let name = name.as_ref();
        let state = d.dump_state(name);
        let meta = state
            .lines()
            .find(|l| l.starts_with("Meta"))
            .unwrap_or_default();
        assert!(
            meta.contains("switchboard_ops::structured::"),
            "{name}: {state}"
        );
    }
}

/// `(name, call on a device, sizes, strides, dtype)`: an output's geometry as PyTorch 2.15
/// gives it on its CPU and meta devices alike.
pub type DeviceCase = (
    &'static str,
    fn(Device) -> Result<Tensor>,
    &'static [i64],
    &'static [i64],
    ScalarType,
);

/// Asserts that every case gives PyTorch's geometry on Meta and on the CPU.
pub fn assert_geometry_on_meta_and_cpu(cases: &[DeviceCase]) {
    let mut failures = Vec::new();
    for (name, call, sizes, strides, dtype) in cases {
        for d in [Device::META, Device::CPU] {
            match call(d) {
                Ok(t) => {
                    let got = (t.sizes(), t.strides(), t.dtype(), t.device());
                    if got != (*sizes, *strides, *dtype, d) {
                        failures.push(format!(
                            "{name} on {d}: got {got:?}, PyTorch gives {sizes:?} {strides:?} {dtype:?}"
                        ));
                    }
                }
                Err(err) => failures.push(format!("{name} on {d}: {err}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `(name, call on a device, PyTorch 2.15's CPU message)`; `T` is what the call returns.
pub type ErrorCase<T = Tensor> = (&'static str, fn(Device) -> Result<T>, &'static str);

/// Asserts that every case fails with PyTorch's CPU message (its first line) on Meta and on
/// the CPU.
pub fn assert_errors_on_meta_and_cpu<T>(cases: &[ErrorCase<T>]) {
    let mut failures = Vec::new();
    for (name, call, message) in cases {
        for d in [Device::META, Device::CPU] {
            match call(d) {
                Ok(_) => failures.push(format!("{name} on {d}: no error")),
                Err(err) if err.first_line() != *message => {
                    failures.push(format!("{name} on {d}: `{}`", err.first_line()))
                }
                Err(_) => {}
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

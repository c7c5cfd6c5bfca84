//! Registers this crate's kernels for the CPU key of the global dispatcher, as declared by
//! the `dispatch:` entries of switchboard-ops' native_functions.yaml (generated code).

use switchboard_dispatcher::{KernelFunction, Library, Result};
use switchboard_tensor::{Device, Generator, Layout, MemoryFormat, Scalar, ScalarType, Tensor};

include!(concat!(env!("OUT_DIR"), "/register_cpu.rs"));

switchboard_dispatcher::library!(IMPL aten, CPU, register);

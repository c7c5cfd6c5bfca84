//! Switchboard's Meta backend: tensors on the `meta` device have sizes, strides, dtype and
//! a key set but no data, and every operator computes its outputs' metadata with the same
//! checks and errors as on CPU, without touching data. Use it to check shapes of a whole
//! model, or as the shape function of a backend that captures graphs.
//!
//! Note [Meta kernels]
//! An operator of a structured family (`structured: True` / `structured_delegate:` in
//! native_functions.yaml) has its meta function (`switchboard_ops::structured`, PyTorch's
//! `TORCH_META_FUNC`) as its Meta kernel: the generated glue allocates, checks or resizes
//! the output from it (Note [Structured glue] in switchboard-codegen), and nothing runs a CPU
//! kernel. So does an operator outside structured families whose functional overload names
//! its meta function for Meta (`Meta: structured::NAME`, as `nll_loss2d_forward`). The other
//! operators' CPU kernels compute the output metadata first (shapes, strides, dtype
//! promotion, all checks) and only then touch data, which they skip for tensors without
//! data; this crate registers those functions for the `Meta` key (from the `CPU, Meta:`
//! entries). The tests check that every operator gives identical metadata on
//! both devices, and the structured ones PyTorch's.
//!
//! ```
//! use switchboard_ops as ops;
//! use switchboard_tensor::{Device, ScalarType};
//! use switchboard_meta as _; // links the Meta kernels
//! let x = ops::empty_with(&[128, 784], ops::EmptyOptions::default().device(Device::META)).unwrap();
//! let w = ops::empty_with(&[512, 784], ops::EmptyOptions::default().device(Device::META)).unwrap();
//! let y = ops::linear(&x, &w).unwrap();
//! assert_eq!((y.sizes(), y.dtype(), y.has_data()), (&[128i64, 512][..], ScalarType::Float, false));
//! ```

// Generated code: long signatures are PyTorch's schemas.
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
mod registrations {
    use switchboard_dispatcher::{KernelFunction, Library, Result};
    use switchboard_tensor::{Device, Generator, Layout, MemoryFormat, Scalar, ScalarType, Tensor};

    include!(concat!(env!("OUT_DIR"), "/register_meta.rs"));

    switchboard_dispatcher::library!(IMPL aten, Meta, register);
}

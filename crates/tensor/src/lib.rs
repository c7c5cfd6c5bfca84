//! The tensor data model of Switchboard: [`Tensor`] (a cheap handle to a [`TensorImpl`] over a
//! shared [`Storage`]), dtypes ([`ScalarType`], [`Element`]), [`Device`], [`Layout`],
//! [`MemoryFormat`], [`Scalar`], views, broadcasting, type promotion, printing and safetensors
//! I/O. Operators and kernels live elsewhere; this crate gives them metadata, storage and safe
//! (borrow-checked) or raw access to data.
//!
//! ```
//! use switchboard_tensor::{ScalarType, Tensor};
//! let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
//! assert_eq!(t.key_set().to_string(),
//!            "DispatchKeySet(CPU, ADInplaceOrView, AutogradCPU, AutocastCPU)");
//! let tt = t.t().unwrap(); // a view: same storage, strides (1, 2)
//! assert!(tt.is_alias_of(&t) && !tt.is_contiguous());
//! assert_eq!(tt.to_vec::<f32>().unwrap(), [1.0, 3.0, 2.0, 4.0]);
//! assert_eq!(&*t.data::<f32>().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
//! let m = Tensor::empty_on(&[2, 2], ScalarType::Float, "meta".parse().unwrap()).unwrap();
//! assert!(!m.has_data());
//! ```
#![warn(missing_docs)]

mod access;
mod broadcast;
mod create;
mod device;
mod dtype;
mod error;
mod io;
mod layout;
mod print;
mod promote;
mod scalar;
mod storage;
mod strided;
mod tensor;
mod view;

pub use access::{convert, Access, DataMut, DataRef};
pub use broadcast::{broadcast_shapes, broadcast_tensors, infer_size};
pub use device::Device;
pub use dtype::{Element, ScalarType};
pub use error::{wrap_dim, Result, TensorError};
pub use half::{bf16, f16};
pub use io::{
    load_safetensors, load_safetensors_file, safetensors_metadata, save_safetensors,
    save_safetensors_file,
};
pub use layout::{
    contiguous_strides, is_contiguous, is_non_overlapping_and_dense, suggest_memory_format, Layout,
    MemoryFormat,
};
pub use print::PrintOptions;
pub use promote::{can_cast, promote_types, result_type, Category, ResultTypeState, DEFAULT_DTYPE};
pub use scalar::Scalar;
pub use storage::{Storage, StorageBorrow, INLINE_BYTES, STORAGE_ALIGNMENT};
pub use strided::{copy_strided, copy_strided_raw, StridedOffsets};
pub use switchboard_keys::{DeviceType, DispatchKey, DispatchKeySet};
pub use tensor::{AnyArc, Tensor, TensorBuilder, TensorImpl, VersionCounter};
pub use view::{compute_view_stride, infer_view_size};

/// Sizes or strides: inline up to 5 dimensions, no heap allocation.
pub type DimVec = smallvec::SmallVec<[i64; 5]>;

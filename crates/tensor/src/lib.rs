//! The tensor data model of Switchboard: [`Tensor`] (a cheap handle to a [`TensorImpl`] over a
//! shared [`Storage`]), dtypes ([`ScalarType`], [`Element`]), [`Device`], [`Layout`],
//! [`MemoryFormat`], [`Scalar`], views, broadcasting, type promotion, printing and safetensors
//! I/O. Operators and kernels live elsewhere; this crate gives them metadata, storage and safe
//! (borrow-checked) or raw access to data.
//!
//! ```
//! use switchboard_tensor::RawOps;
//! use switchboard_tensor::{ScalarType, Tensor};
//! let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
//! assert_eq!(t.key_set().to_string(),
//!            "DispatchKeySet(CPU, ADInplaceOrView, AutogradCPU, AutocastCPU)");
//! let tt = t.t().unwrap(); // a view: same storage, strides (1, 2)
//! assert!(tt.is_alias_of(&t) && !tt.is_contiguous());
//! assert_eq!(tt.to_vec::<f32>().unwrap(), [1.0, 3.0, 2.0, 4.0]);
//! assert_eq!(&*t.data::<f32>().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
//! assert_eq!(t.to_string(), "tensor([[1., 2.],\n        [3., 4.]])");
//! let m = Tensor::empty_on(&[2, 2], ScalarType::Float, "meta".parse().unwrap()).unwrap();
//! assert!(!m.has_data());
//! ```
//!
//! # Reading and writing data (kernel authors)
//!
//! Storage is shared by views and written in place, so every access to its bytes happens under
//! a non-blocking borrow of the storage (see `Note [Storage mutability]` in `storage.rs`):
//!
//! - safe and simple: [`TensorImpl::data`] (`DataRef`, derefs to `&[T]`) and
//!   [`TensorImpl::data_mut`] (`DataMut`, derefs to `&mut [T]`) for contiguous CPU tensors,
//!   [`TensorImpl::to_vec`] / [`TensorImpl::item`] for any strided tensor, [`copy_strided`]
//!   for strided copies with broadcasting and dtype conversion;
//! - fast: take one [`Access`] over the kernel's inputs and outputs, then use raw pointers
//!   ([`TensorImpl::data_ptr_as`], [`TensorImpl::mut_data_ptr_as`]) with [`StridedOffsets`]
//!   (or your own loops) over [`TensorImpl::sizes`]/[`TensorImpl::strides`]:
//!
//! ```
//! use switchboard_tensor::{Access, Result, StridedOffsets, Tensor};
//! use switchboard_tensor::RawOps;
//! fn add_f32(a: &Tensor, b: &Tensor) -> Result<Tensor> {
//!     let out = a.empty_like()?; // contiguous, same sizes
//!     let access = Access::new(&[a, b], &[&out])?;
//!     let (pa, pb, po) = (a.data_ptr_as::<f32>()?, b.data_ptr_as::<f32>()?,
//!                         out.mut_data_ptr_as::<f32>()?);
//!     let offsets = StridedOffsets::new(a.sizes(), a.strides())
//!         .zip(StridedOffsets::new(b.sizes(), b.strides()));
//!     for (i, (oa, ob)) in offsets.enumerate() {
//!         // SAFETY: `access` holds the storages' borrows; offsets of in-range indices are in
//!         // bounds (Note [Tensor bounds invariant]); `out` is contiguous with numel elements.
//!         unsafe { *po.add(i) = *pa.add(oa as usize) + *pb.add(ob as usize) };
//!     }
//!     drop(access);
//!     Ok(out)
//! }
//! let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
//! let s = add_f32(&a, &a.t().unwrap()).unwrap();
//! assert_eq!(s.to_vec::<f32>().unwrap(), [2.0, 5.0, 5.0, 8.0]);
//! ```
#![warn(missing_docs)]

mod access;
mod alloc_tuning;
mod bounds;
mod broadcast;
mod builder;
mod checked_size;
mod complex;
mod complex_views;
mod cpu_alloc;
mod create;
mod device;
mod device_hooks;
mod dtype;
mod error;
mod files;
mod fixed_access;
mod generator;
mod geometry;
mod handle;
mod host;
mod io;
mod layout;
mod print;
mod promote;
mod resize;
mod scalar;
mod scalar_convert;
mod storage;
mod storage_block;
mod strided;
mod tensor;
mod view;
mod view_dtype;
mod without_data;
mod wrapper_tensor;

pub use access::{convert, Access, DataMut, DataRef};
pub use alloc_tuning::tune_allocator;
pub use broadcast::{broadcast_shapes, broadcast_tensors, infer_size};
pub use builder::TensorBuilder;
pub use checked_size::{to_int32, CheckedSize};
pub use complex::ComplexElement;
pub use cpu_alloc::HUGE_PAGE_BYTES;
pub use device::Device;
pub use dtype::{Element, ScalarType, StorageElement};
pub use error::{wrap_dim, Result, TensorError};
pub use files::{is_same_file, open_input_file, write_output_file, Written};
pub use fixed_access::FixedAccess;
pub use generator::{manual_seed, Generator, GeneratorState, Mt19937, DEFAULT_RNG_SEED};
pub use geometry::{compute_view_stride, infer_view_size};
pub use half::{bf16, f16};
pub use handle::WeakTensor;
pub use host::{register_host_copy, HostCopyFn};
pub use io::{
    load_safetensors, load_safetensors_file, safetensors_metadata, save_safetensors,
    save_safetensors_file,
};
pub use layout::{
    contiguous_strides, dim_vec, is_contiguous, is_non_overlapping_and_dense, same_dims,
    suggest_memory_format, Layout, MemoryFormat,
};
pub use num_complex::{Complex, Complex32, Complex64};
pub use print::PrintOptions;
pub use promote::{can_cast, promote_types, result_type, Category, ResultTypeState, DEFAULT_DTYPE};
pub use resize::{register_grow_storage, GrowStorageFn};
pub use scalar::Scalar;
pub use storage::{Storage, StorageBorrow, INLINE_ALIGNMENT, INLINE_BYTES, STORAGE_ALIGNMENT};
pub use strided::{copy_strided, copy_strided_raw, StridedOffsets};
pub use switchboard_keys::{DeviceType, DispatchKey, DispatchKeySet};
pub use tensor::{AnyArc, Tensor, TensorImpl, VersionCounter};
pub use view::RawOps;
pub use without_data::DatalessTensor;

/// Sizes or strides: inline up to 5 dimensions, no heap allocation.
pub type DimVec = smallvec::SmallVec<[i64; 5]>;

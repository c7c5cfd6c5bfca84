//! Tensors as [`HostTensor`]s and back: raw little-endian elements, every size checked.

use switchboard_graph::{check_geometry, TensorMeta};
use switchboard_tensor::{
    contiguous_strides, copy_strided, ScalarType, Storage, Tensor, TensorBuilder, TensorError,
};

use crate::protocol::HostTensor;

// The elements travel as the machine's bytes: both ends must be little-endian.
#[cfg(not(target_endian = "little"))]
compile_error!("switchboard-remote sends tensors as little-endian bytes");

type Result<T> = std::result::Result<T, String>;

fn tensor_error(e: TensorError) -> String {
    e.to_string()
}

/// `t`'s elements in row-major order (a CPU tensor with data).
pub fn to_host_tensor(t: &Tensor) -> Result<HostTensor> {
    if !t.is_cpu() || !t.has_data() {
        return Err(format!(
            "cannot send a tensor on {} without data: only CPU tensors travel inline",
            t.device()
        ));
    }
    let c = if t.is_contiguous() {
        t.clone()
    } else {
        t.deep_clone().map_err(tensor_error)?
    };
    let es = c.element_size();
    let start = c.storage_offset() as usize * es;
    let len = c.numel() as usize * es;
    let borrow = c.storage().try_borrow().map_err(tensor_error)?;
    let all = c.storage().bytes(&borrow).map_err(tensor_error)?;
    let bytes = all
        .get(start..start + len)
        .ok_or("a tensor's elements lie outside its storage")?
        .to_vec();
    Ok(HostTensor {
        dtype: c.dtype().name().to_string(),
        sizes: c.sizes().to_vec(),
        bytes,
    })
}

/// The contiguous CPU tensor `h` describes, after checking its dtype, sizes and that it holds
/// exactly `numel * element_size` bytes (with checked arithmetic).
pub fn from_host_tensor(h: &HostTensor) -> Result<Tensor> {
    let dtype: ScalarType = h
        .dtype
        .parse()
        .map_err(|_| format!("unknown dtype \"{}\"", h.dtype))?;
    let strides = contiguous_strides_checked(&h.sizes)?;
    let numel = check_geometry(&h.sizes, &strides, 0, dtype).map_err(|e| e.0)?;
    let expected = numel
        .checked_mul(dtype.element_size() as u64)
        .ok_or_else(|| format!("a {} tensor of sizes {:?} overflows", h.dtype, h.sizes))?;
    if expected != h.bytes.len() as u64 {
        return Err(format!(
            "a {} tensor of sizes {:?} needs {expected} bytes, {} were sent",
            h.dtype,
            h.sizes,
            h.bytes.len()
        ));
    }
    let storage = if dtype == ScalarType::Bool {
        Storage::bool_from_bytes(&h.bytes)
    } else {
        Storage::cpu_with(h.bytes.len(), |b| b.copy_from_slice(&h.bytes))
    }
    .map_err(tensor_error)?;
    TensorBuilder::new(storage, dtype)
        .sizes(&h.sizes)
        .build()
        .map_err(tensor_error)
}

/// Contiguous strides, refusing negative sizes and overflow before computing them.
fn contiguous_strides_checked(sizes: &[i64]) -> Result<Vec<i64>> {
    if let Some(s) = sizes.iter().find(|s| **s < 0) {
        return Err(format!("negative size {s} in sizes {sizes:?}"));
    }
    let mut acc: i64 = 1;
    for s in sizes {
        acc = acc
            .checked_mul((*s).max(1))
            .ok_or_else(|| format!("sizes {sizes:?} overflow"))?;
    }
    Ok(contiguous_strides(sizes).to_vec())
}

/// `t` (contiguous, of `meta`'s sizes and dtype) laid out as `meta` says: the same strides and
/// storage offset, so that views of it address what they address on the other side.
pub fn with_layout(t: Tensor, meta: &TensorMeta) -> Result<Tensor> {
    if t.dtype() != meta.dtype || t.sizes() != meta.sizes.as_slice() {
        return Err(format!(
            "a {} tensor of sizes {:?} where a {} tensor of sizes {:?} was expected",
            t.dtype().name(),
            t.sizes(),
            meta.dtype.name(),
            meta.sizes.as_slice()
        ));
    }
    if meta.storage_offset == 0 && meta.is_contiguous() {
        return Ok(t);
    }
    let numel = check_geometry(&meta.sizes, &meta.strides, meta.storage_offset, meta.dtype)
        .map_err(|e| e.0)?;
    // The storage ends after the last element the geometry addresses (checked above).
    let mut last = meta.storage_offset;
    if numel > 0 {
        for (s, st) in meta.sizes.iter().zip(&meta.strides) {
            last += (s - 1) * st;
        }
    }
    let nbytes = (last as usize + 1) * meta.dtype.element_size();
    let storage = Storage::zeros_for(switchboard_tensor::Device::CPU, nbytes, meta.dtype)
        .map_err(tensor_error)?;
    let out = TensorBuilder::new(storage, meta.dtype)
        .sizes(&meta.sizes)
        .strides(&meta.strides)
        .storage_offset(meta.storage_offset)
        .build()
        .map_err(tensor_error)?;
    copy_strided(&t, &out).map_err(tensor_error)?;
    Ok(out)
}

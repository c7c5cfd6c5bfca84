//! Loading and saving named tensors in the safetensors format.

use crate::RawOps;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, View};

use crate::builder::TensorBuilder;
use crate::dtype::ScalarType;
use crate::error::{Result, TensorError};
use crate::storage::{Storage, StorageBorrow};
use crate::tensor::Tensor;

// Note [Zero-copy safetensors]
// Loading reads the whole file (or copies the given bytes) once into one 64-byte-aligned CPU
// storage, which is then split (Note [Storage slices]) into one storage per tensor over that
// tensor's bytes: no per-tensor copy, no per-element conversion, and each tensor has the
// storage bounds of its own data, as in PyTorch (an `as_strided` beyond it fails instead of
// reading the next tensor or the header). Each has its own version counter (they are not
// views of each other). Bool tensors, and tensors at offsets misaligned for their element
// type, are copied into storages of their own (bools after checking every byte is 0 or 1,
// Note [Element bit patterns]). The file buffer lives as long as one of its tensors does.
// Saving passes each contiguous tensor's storage bytes straight to the serializer (a
// non-contiguous tensor is made contiguous first). Safetensors data is little-endian, as is
// every target Switchboard runs on; big-endian targets are refused.

fn to_safetensors(dtype: ScalarType) -> Result<Dtype> {
    Ok(match dtype {
        ScalarType::Bool => Dtype::BOOL,
        ScalarType::Byte => Dtype::U8,
        ScalarType::Char => Dtype::I8,
        ScalarType::Short => Dtype::I16,
        ScalarType::Int => Dtype::I32,
        ScalarType::Long => Dtype::I64,
        ScalarType::Half => Dtype::F16,
        ScalarType::BFloat16 => Dtype::BF16,
        ScalarType::Float => Dtype::F32,
        ScalarType::Double => Dtype::F64,
        ScalarType::ComplexFloat => Dtype::C64,
        ScalarType::ComplexDouble => {
            return Err(TensorError::Io(
                "safetensors has no dtype for complex128 (its only complex dtype, C64, is \
                 complex64)"
                    .into(),
            ))
        }
    })
}

fn from_safetensors(dtype: Dtype) -> Result<ScalarType> {
    Ok(match dtype {
        Dtype::BOOL => ScalarType::Bool,
        Dtype::U8 => ScalarType::Byte,
        Dtype::I8 => ScalarType::Char,
        Dtype::I16 => ScalarType::Short,
        Dtype::I32 => ScalarType::Int,
        Dtype::I64 => ScalarType::Long,
        Dtype::F16 => ScalarType::Half,
        Dtype::BF16 => ScalarType::BFloat16,
        Dtype::F32 => ScalarType::Float,
        Dtype::F64 => ScalarType::Double,
        Dtype::C64 => ScalarType::ComplexFloat,
        other => {
            return Err(TensorError::Io(format!(
                "safetensors dtype {other} is not supported"
            )))
        }
    })
}

fn check_endian() -> Result<()> {
    if cfg!(target_endian = "big") {
        return Err(TensorError::Io(
            "safetensors I/O needs a little-endian target".into(),
        ));
    }
    Ok(())
}

fn io_err(e: impl std::fmt::Display) -> TensorError {
    TensorError::Io(e.to_string())
}

/// Reads named tensors from safetensors bytes (one copy of `bytes` into an aligned storage,
/// then views: Note [Zero-copy safetensors]).
///
/// ```
/// use switchboard_tensor::{load_safetensors, save_safetensors, Tensor};
/// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
/// let bytes = save_safetensors(&[("w", &t)], None).unwrap();
/// let loaded = load_safetensors(&bytes).unwrap();
/// assert_eq!(loaded["w"].to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
/// ```
pub fn load_safetensors(bytes: &[u8]) -> Result<BTreeMap<String, Tensor>> {
    check_endian()?;
    let storage = Storage::cpu_with(bytes.len(), |d| d.copy_from_slice(bytes))?;
    tensors_from_storage(storage)
}

/// Reads named tensors from a safetensors file: one read into an aligned storage, then views
/// (Note [Zero-copy safetensors]).
pub fn load_safetensors_file(path: impl AsRef<Path>) -> Result<BTreeMap<String, Tensor>> {
    check_endian()?;
    let path = path.as_ref();
    let mut file = crate::files::open_input_file(path)
        .map_err(|e| TensorError::Io(format!("cannot open {}: {e}", path.display())))?;
    let len = file.metadata().map_err(io_err)?.len();
    let len = usize::try_from(len).map_err(io_err)?;
    let storage = Storage::try_cpu_with(len, |buf| {
        file.read_exact(buf)
            .map_err(|e| TensorError::Io(format!("cannot read {}: {e}", path.display())))
    })?;
    tensors_from_storage(storage)
}

/// Where a tensor's storage comes from: a slice of the file buffer, or a copy of its own.
enum Source {
    /// Index into the slices of the file buffer.
    Slice(usize),
    Own(Storage),
}

fn tensors_from_storage(storage: Storage) -> Result<BTreeMap<String, Tensor>> {
    // Read the header under a borrow, then split the buffer once it is released.
    let mut entries = Vec::new();
    let mut ranges = Vec::new();
    {
        let borrow = storage.try_borrow()?;
        let bytes = storage.bytes(&borrow)?;
        let st = SafeTensors::deserialize(bytes).map_err(io_err)?;
        let base = bytes.as_ptr() as usize;
        for (name, view) in st.iter() {
            let dtype = from_safetensors(view.dtype())?;
            let sizes = view
                .shape()
                .iter()
                .map(|&s| i64::try_from(s).map_err(io_err))
                .collect::<Result<Vec<i64>>>()?;
            let data = view.data();
            let offset = data.as_ptr() as usize - base;
            let source = if dtype == ScalarType::Bool {
                Source::Own(Storage::bool_from_bytes(data)?)
            } else if offset % dtype.element_size() == 0 {
                ranges.push(offset..offset + data.len());
                Source::Slice(ranges.len() - 1)
            } else {
                Source::Own(Storage::cpu_with(data.len(), |d| d.copy_from_slice(data))?)
            };
            entries.push((name.to_string(), dtype, sizes, source));
        }
    }
    let mut slices: Vec<Option<Storage>> = storage.split(&ranges)?.into_iter().map(Some).collect();
    let mut out = BTreeMap::new();
    for (name, dtype, sizes, source) in entries {
        let own = match source {
            Source::Own(s) => s,
            Source::Slice(i) => slices[i].take().expect("each slice is used once"),
        };
        let tensor = TensorBuilder::new(own, dtype).sizes(&sizes).build()?;
        out.insert(name, tensor);
    }
    Ok(out)
}

struct SaveView<'a> {
    dtype: Dtype,
    shape: Vec<usize>,
    data: &'a [u8],
}

impl View for &SaveView<'_> {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// Serialises named CPU tensors (any dtype, any strides) to safetensors bytes, with optional
/// string metadata. Contiguous tensors' bytes are passed through without conversion.
pub fn save_safetensors(
    tensors: &[(&str, &Tensor)],
    metadata: Option<HashMap<String, String>>,
) -> Result<Vec<u8>> {
    check_endian()?;
    let contiguous: Vec<Tensor> = tensors
        .iter()
        .map(|(_, t)| {
            if !t.has_data() {
                return Err(TensorError::NoData {
                    device: t.device().to_string(),
                });
            }
            t.contiguous()
        })
        .collect::<Result<_>>()?;
    let borrows: Vec<StorageBorrow<'_>> = contiguous
        .iter()
        .map(|t| t.storage().try_borrow())
        .collect::<Result<_>>()?;
    let mut views = Vec::with_capacity(tensors.len());
    for ((t, b), (name, _)) in contiguous.iter().zip(&borrows).zip(tensors) {
        let all = t.storage().bytes(b)?;
        // An empty tensor's offset may lie anywhere, even past its storage (Note [Tensor
        // bounds invariant]): it has no bytes to address.
        let data = if t.numel() == 0 {
            &[]
        } else {
            let start = t.storage_offset() as usize * t.element_size();
            &all[start..start + t.nbytes()]
        };
        let shape = t.sizes().iter().map(|&s| s as usize).collect();
        views.push((
            name.to_string(),
            SaveView {
                dtype: to_safetensors(t.dtype())?,
                shape,
                data,
            },
        ));
    }
    // safetensors without its `std` feature takes hashbrown maps: convert.
    let metadata = metadata.map(|m| m.into_iter().collect());
    safetensors::serialize(views.iter().map(|(n, v)| (n.as_str(), v)), metadata).map_err(io_err)
}

/// [`save_safetensors`] to a file, atomically, through symlinks, keeping its permissions
/// (Note [Output files]): a failure at any point (a full disk, an unsavable tensor, a crash)
/// leaves whatever was at `path` intact, so a file can be both a computation's input and its
/// output.
pub fn save_safetensors_file(
    path: impl AsRef<Path>,
    tensors: &[(&str, &Tensor)],
    metadata: Option<HashMap<String, String>>,
) -> Result<()> {
    let bytes = save_safetensors(tensors, metadata)?;
    let path = path.as_ref();
    crate::files::write_output_file(path, &bytes, &[])
        .map(drop)
        .map_err(|e| TensorError::Io(format!("cannot write {}: {e}", path.display())))
}

/// The string metadata (`__metadata__`) of safetensors bytes, if any.
pub fn safetensors_metadata(bytes: &[u8]) -> Result<Option<HashMap<String, String>>> {
    let (_, meta) = SafeTensors::read_metadata(bytes).map_err(io_err)?;
    Ok(meta
        .metadata()
        .as_ref()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{bf16, f16, Device};

    #[test]
    fn round_trip_every_dtype() {
        let tensors = vec![
            (
                "b",
                Tensor::from_vec(vec![true, false, true], &[3]).unwrap(),
            ),
            ("u8", Tensor::from_vec(vec![1u8, 255], &[2, 1]).unwrap()),
            ("i8", Tensor::from_vec(vec![-1i8], &[]).unwrap()),
            ("i16", Tensor::from_vec(vec![-300i16, 2], &[2]).unwrap()),
            ("i32", Tensor::from_vec(vec![7i32; 6], &[2, 3]).unwrap()),
            ("i64", Tensor::from_vec(vec![i64::MIN, 5], &[2]).unwrap()),
            (
                "f16",
                Tensor::from_vec(vec![f16::from_f32(1.5)], &[1]).unwrap(),
            ),
            (
                "bf16",
                Tensor::from_vec(vec![bf16::from_f32(-2.0); 3], &[3]).unwrap(),
            ),
            ("f32", Tensor::arange(0.0, 3.0, 0.5, None).unwrap()),
            ("f64", Tensor::from_vec(vec![1e300f64], &[1, 1]).unwrap()),
            ("empty", Tensor::zeros(&[0, 4], ScalarType::Float).unwrap()),
        ];
        let refs: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
        let meta = HashMap::from([("format".to_string(), "pt".to_string())]);
        let bytes = save_safetensors(&refs, Some(meta.clone())).unwrap();
        assert_eq!(safetensors_metadata(&bytes).unwrap(), Some(meta));
        let loaded = load_safetensors(&bytes).unwrap();
        assert_eq!(loaded.len(), tensors.len());
        for (name, t) in &tensors {
            let l = &loaded[*name];
            assert_eq!((l.sizes(), l.dtype()), (t.sizes(), t.dtype()), "{name}");
            assert_eq!(
                l.to_vec_as::<f64>().unwrap(),
                t.to_vec_as::<f64>().unwrap(),
                "{name}"
            );
        }
        // Every tensor has a storage of its own, with its own version counter.
        assert!(!loaded["i32"].is_alias_of(&loaded["f64"]));
        assert!(!loaded["b"].is_alias_of(&loaded["f64"]));
        loaded["i32"].bump_version();
        assert_eq!(loaded["f64"].version(), 0);
    }

    #[test]
    fn each_tensor_has_its_own_storage_bounds() {
        use crate::RawOps;
        let a = Tensor::from_vec((0..20).map(|v| v as f32).collect(), &[20]).unwrap();
        let b = Tensor::from_vec(vec![7.0f32; 30], &[30]).unwrap();
        let bytes = save_safetensors(&[("a", &a), ("b", &b)], None).unwrap();
        let l = load_safetensors(&bytes).unwrap();
        for (name, n) in [("a", 20usize), ("b", 30)] {
            let t = &l[name];
            assert_eq!(t.storage().nbytes(), n * 4, "{name}");
            assert_eq!(t.storage_offset(), 0);
            // Issue #22: a larger as_strided used to read the neighbouring tensor or the
            // header; PyTorch's message instead.
            let e = t.as_strided(&[n as i64 + 1], &[1], 0).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "setStorage: sizes [{}], strides [1], storage offset 0, and itemsize 4 \
                     requiring a storage size of {} are out of bounds for storage of size {}",
                    n + 1,
                    4 * (n + 1),
                    4 * n
                )
            );
            assert!(t.as_strided(&[1], &[1], n as i64).is_err());
            assert!(t.as_strided(&[n as i64], &[1], 0).is_ok());
        }
        // No copy: the tensors view the one buffer the file was read into.
        let (pa, pb) = (l["a"].storage().data_ptr(), l["b"].storage().data_ptr());
        assert_eq!(pb as usize - pa as usize, 80);
    }

    #[test]
    fn saves_noncontiguous_and_rejects_meta() {
        let t = Tensor::from_vec(vec![1i64, 2, 3, 4], &[2, 2])
            .unwrap()
            .t()
            .unwrap();
        let loaded = load_safetensors(&save_safetensors(&[("t", &t)], None).unwrap()).unwrap();
        assert_eq!(loaded["t"].to_vec::<i64>().unwrap(), [1, 3, 2, 4]);
        let m = Tensor::zeros_on(&[2], ScalarType::Float, Device::META).unwrap();
        assert!(save_safetensors(&[("m", &m)], None).is_err());
    }

    fn raw(header: &str, data: &[u8]) -> Vec<u8> {
        let mut v = (header.len() as u64).to_le_bytes().to_vec();
        v.extend_from_slice(header.as_bytes());
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn rejects_bad_input() {
        assert!(load_safetensors(b"").is_err());
        assert!(load_safetensors(&raw("{}", &[])).unwrap().is_empty());
        let h = r#"{"x":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}}"#;
        let err = load_safetensors(&raw(h, &[2, 1])).unwrap_err().to_string();
        assert!(err.contains("invalid value 2"), "{err}");
        assert_eq!(
            load_safetensors(&raw(h, &[0, 1])).unwrap()["x"]
                .to_vec::<bool>()
                .unwrap(),
            [false, true]
        );
        let h = r#"{"x":{"dtype":"U16","shape":[1],"data_offsets":[0,2]}}"#;
        assert!(load_safetensors(&raw(h, &[2, 1])).is_err());
        let h = r#"{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#;
        assert!(load_safetensors(&raw(h, &[0; 4])).is_err());
        // A misaligned tensor is copied into its own storage.
        let h = r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"I32","shape":[1],"data_offsets":[1,5]}}"#;
        let mut data = vec![9u8];
        data.extend_from_slice(&7i32.to_le_bytes());
        let l = load_safetensors(&raw(h, &data)).unwrap();
        assert_eq!(l["b"].to_vec::<i32>().unwrap(), [7]);
        assert_eq!(l["a"].to_vec::<u8>().unwrap(), [9]);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // file system access
    fn file_round_trip() {
        let dir = std::env::temp_dir().join(format!("sb-tensor-io-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.safetensors");
        let t = Tensor::arange(0, 100, 1, None)
            .unwrap()
            .view(&[10, 10])
            .unwrap();
        save_safetensors_file(&path, &[("t", &t)], None).unwrap();
        let l = load_safetensors_file(&path).unwrap();
        assert_eq!(l["t"].to_vec::<i64>().unwrap(), t.to_vec::<i64>().unwrap());
        assert!(load_safetensors_file(dir.join("missing")).is_err());
        // Saving over the file that was read replaces it whole; a failed save leaves it intact
        // and no temporary file behind.
        let doubled = Tensor::from_vec(vec![2i64; 3], &[3]).unwrap();
        save_safetensors_file(&path, &[("t", &doubled)], None).unwrap();
        assert_eq!(
            load_safetensors_file(&path).unwrap()["t"]
                .to_vec::<i64>()
                .unwrap(),
            [2; 3]
        );
        let m = Tensor::zeros_on(&[2], ScalarType::Float, Device::META).unwrap();
        assert!(save_safetensors_file(&path, &[("m", &m)], None).is_err());
        assert!(
            save_safetensors_file(dir.join("no/such/dir/x"), &[("t", &doubled)], None).is_err()
        );
        assert_eq!(
            load_safetensors_file(&path).unwrap()["t"]
                .to_vec::<i64>()
                .unwrap(),
            [2; 3]
        );
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["t.safetensors"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

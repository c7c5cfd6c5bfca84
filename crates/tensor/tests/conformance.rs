//! Checks tensors' key sets and device parsing against every `keys/keys*.json` file recorded
//! from PyTorch (the `tensors` and `devices` records).

use switchboard_keys::{DispatchKey, DispatchKeySet};
use switchboard_tensor::RawOps;
use switchboard_tensor::{Device, ScalarType, Tensor};
use switchboard_testkit::{data_files, file_name, read_json, Report, Value};

/// Builds the tensor a record's label describes, from the label's words: the device (`cpu`
/// unless `meta` is named), the dtype, emptiness, and the extra functionality keys that some
/// tensor kinds carry (`zerotensor`, `neg`, `conj`). `None` for kinds this crate cannot make
/// (sparse, nested, quantized, mkldnn tensors).
fn tensor_for_label(label: &str) -> Option<Tensor> {
    let words: Vec<&str> = label.split(['_', '-', ' ']).collect();
    let has = |w: &str| words.contains(&w);
    if ["sparse", "nested", "quantized", "mkldnn", "csr"]
        .iter()
        .any(|w| has(w))
    {
        return None;
    }
    let device = if has("meta") {
        Device::META
    } else {
        Device::CPU
    };
    let dtype = words
        .iter()
        .find_map(|w| w.parse::<ScalarType>().ok())
        .unwrap_or(ScalarType::Float);
    let sizes: &[i64] = if has("empty") { &[0] } else { &[2, 3] };
    let t = Tensor::zeros_on(sizes, dtype, device).ok()?;
    let mut extra = DispatchKeySet::EMPTY;
    if has("zerotensor") {
        extra = extra.add(DispatchKey::ZeroTensor);
    }
    if has("neg") {
        extra = extra.add(DispatchKey::Negative);
    }
    if has("conj") {
        extra = extra.add(DispatchKey::Conjugate);
    }
    Some(t.with_extra_keys(extra))
}

fn check_tensor(r: &mut Report, section: &str, rec: &Value) {
    let id = rec["id"].as_str().unwrap();
    let label = rec["label"].as_str().unwrap();
    let Some(t) = tensor_for_label(label) else {
        println!("skipped {id}: tensor kind '{label}' is not supported");
        return;
    };
    r.record(section);
    let ks = t.key_set();
    r.eq(
        id,
        "keyset.raw",
        ks.raw(),
        rec["keyset"]["raw"].as_u64().unwrap(),
    );
    r.eq(
        id,
        "keyset.str",
        ks.to_string().as_str(),
        rec["keyset"]["str"].as_str().unwrap(),
    );
    r.eq(
        id,
        "highestPriorityTypeId_value",
        ks.highest_priority_type_id() as u64,
        rec["highestPriorityTypeId_value"].as_u64().unwrap(),
    );
}

fn check_device(r: &mut Report, section: &str, rec: &Value) {
    let id = rec["id"].as_str().unwrap();
    let text = rec["device"].as_str().unwrap();
    r.record(section);
    let device: Device = match text.parse() {
        Ok(d) => d,
        Err(e) => {
            // Only records that PyTorch rejects may fail to parse.
            if rec.get("key").is_some() {
                r.fail(id, format!("'{text}' did not parse: {e}"));
            }
            return;
        }
    };
    r.eq(id, "display", device.to_string().as_str(), text);
    let ks = device.dense_key_set();
    match (rec.get("key").and_then(|k| k.as_str()), ks) {
        (Some(key), Ok(ks)) => {
            // The dense key of the device is in the set, and the set is exactly
            // dense ∪ autograd-related ∪ autocast-related keys of its backend.
            let dense = device.ty.dense_key().unwrap();
            r.eq(id, "dense key", dense.name(), key);
            let b = dense.to_backend_component();
            let expected = DispatchKeySet::from_key(dense)
                | b.autograd_related_key_set()
                | b.autocast_related_key_set();
            r.eq(id, "key set", ks, expected);
        }
        (None, Err(e)) => {
            let err = rec["error"].as_str().unwrap();
            if !err.contains(e.to_string().as_str()) && device.index.is_none() {
                r.fail(id, format!("error '{e}' is not part of PyTorch's '{err}'"));
            }
        }
        (None, Ok(_)) => {
            // PyTorch's `_dispatch_key_for_device` refuses indexed devices (`cuda:0`); a
            // tensor on such a device is still fine.
            if device.index.is_none() {
                r.fail(id, "PyTorch refused this device but we accepted it");
            }
        }
        (Some(_), Err(e)) => r.fail(id, format!("unexpected error {e}")),
    }
}

#[test]
fn tensor_key_sets_conform() {
    let mut report = Report::new();
    for path in data_files("keys", "keys", ".json") {
        let doc = read_json(&path);
        let file = file_name(&path);
        for rec in doc["tensors"].as_array().into_iter().flatten() {
            check_tensor(&mut report, &format!("{file}: tensors"), rec);
        }
        for rec in doc["devices"].as_array().into_iter().flatten() {
            check_device(&mut report, &format!("{file}: devices"), rec);
        }
    }
    report.finish();
}

#[test]
fn dense_cpu_and_meta_key_sets() {
    let cpu = Tensor::zeros(&[2], ScalarType::Int).unwrap();
    assert_eq!(cpu.key_set().raw(), 635655225345);
    assert_eq!(
        cpu.key_set().to_string(),
        "DispatchKeySet(CPU, ADInplaceOrView, AutogradCPU, AutocastCPU)"
    );
    let meta = Tensor::zeros_on(&[2], ScalarType::Float, Device::META).unwrap();
    assert_eq!(
        meta.key_set().to_string(),
        "DispatchKeySet(Meta, ADInplaceOrView, AutogradMeta)"
    );
    let p1 = Tensor::empty_on(&[1], ScalarType::Float, "privateuseone:0".parse().unwrap()).unwrap();
    assert_eq!(
        p1.key_set().to_string(),
        "DispatchKeySet(PrivateUse1, ADInplaceOrView, AutogradPrivateUse1, AutocastPrivateUse1)"
    );
    let lazy = Tensor::empty_on(&[1], ScalarType::Float, "lazy".parse().unwrap()).unwrap();
    assert_eq!(
        lazy.key_set().to_string(),
        "DispatchKeySet(Lazy, ADInplaceOrView, AutogradLazy)"
    );
    // Views keep the key set.
    assert_eq!(cpu.unsqueeze(0).unwrap().key_set(), cpu.key_set());
}

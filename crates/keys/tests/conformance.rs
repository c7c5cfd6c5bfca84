//! Checks the key system against every `keys/keys*.json` file recorded from PyTorch.

use switchboard_keys::*;
use switchboard_testkit::{data_files, file_name, read_json, Report, Value};

/// The keys a name may denote: names are not unique (`Undefined` is 0 and 48).
fn keys_named(name: &str) -> Vec<DispatchKey> {
    DispatchKey::ALL
        .iter()
        .copied()
        .filter(|k| k.name() == name)
        .collect()
}

fn key_named(name: &str) -> Option<DispatchKey> {
    keys_named(name).first().copied()
}

fn key_of_value(v: &Value) -> Option<DispatchKey> {
    v.as_u64()
        .and_then(|v| u8::try_from(v).ok())
        .and_then(DispatchKey::from_u8)
}

fn set_of_names(names: &Value) -> DispatchKeySet {
    names
        .as_array()
        .unwrap()
        .iter()
        .map(|n| key_named(n.as_str().unwrap()).unwrap_or_else(|| panic!("unknown key {n}")))
        .collect()
}

/// Checks a `{str, raw}` object against a set.
fn check_set(r: &mut Report, id: &str, field: &str, got: DispatchKeySet, expected: &Value) {
    r.eq(
        id,
        &format!("{field}.raw"),
        got.raw(),
        expected["raw"].as_u64().unwrap(),
    );
    let s = DispatchKeySet::from_raw(expected["raw"].as_u64().unwrap()).to_string();
    r.eq(
        id,
        &format!("{field}.str"),
        s.as_str(),
        expected["str"].as_str().unwrap(),
    );
}

fn check_meta(r: &mut Report, section: &str, meta: &Value) {
    r.record(section);
    r.eq(
        "meta",
        "num_backends",
        NUM_BACKENDS as u64,
        meta["num_backends"].as_u64().unwrap(),
    );
    r.eq(
        "meta",
        "max_enum_value",
        155,
        meta["max_enum_value"].as_u64().unwrap(),
    );
    check_set(
        r,
        "meta",
        "keyset_full",
        DispatchKeySet::FULL,
        &meta["keyset_full"],
    );
    let order: Vec<&str> = DispatchKeySet::FULL.iter().map(DispatchKey::name).collect();
    let expected: Vec<&str> = meta["keyset_full_iteration_order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    r.eq("meta", "keyset_full_iteration_order", order, expected);
    for bc in meta["backend_components"].as_array().unwrap() {
        let bit = bc["bit"].as_u64().unwrap() as u8;
        let component = BackendComponent::from_index(bit + 1).unwrap();
        let dense =
            DispatchKey::to_runtime_per_backend_functionality_key(DispatchKey::Dense, component);
        r.eq(
            "meta",
            "backend_components",
            dense.name(),
            bc["name"].as_str().unwrap(),
        );
    }
    for fb in meta["functionality_bits"].as_array().unwrap() {
        let bit = fb["bit"].as_u64().unwrap();
        let k = DispatchKeySet::from_raw(1 << bit).highest_functionality_key();
        r.eq(
            "meta",
            &format!("functionality_bits[{bit}]"),
            k.name(),
            fb["name"].as_str().unwrap(),
        );
    }
    for (functionality, keys) in meta["per_backend_functionality_keys"].as_object().unwrap() {
        let f = key_named(functionality).unwrap();
        r.eq(
            "meta",
            "per-backend functionality",
            f.is_per_backend_functionality(),
            true,
        );
        let got: Vec<&str> = BackendComponent::ALL[1..]
            .iter()
            .map(|b| DispatchKey::to_runtime_per_backend_functionality_key(f, *b).name())
            .collect();
        let expected: Vec<&str> = keys
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        r.eq("meta", functionality, got, expected);
    }
    check_set(
        r,
        "meta",
        "autogradother_backends",
        AUTOGRADOTHER_BACKENDS,
        &meta["autogradother_backends"],
    );
    check_set(
        r,
        "meta",
        "tls include",
        DEFAULT_INCLUDED_SET,
        &meta["tls_local_include_set_default"],
    );
    check_set(
        r,
        "meta",
        "tls exclude",
        DEFAULT_EXCLUDED_SET,
        &meta["tls_local_exclude_set_default"],
    );
}

fn check_key(r: &mut Report, rec: &Value) {
    let id = rec["id"].as_str().unwrap();
    let Some(k) = key_of_value(&rec["value"]) else {
        return r.fail(id, "value out of range");
    };
    r.eq(id, "name", k.name(), rec["name"].as_str().unwrap());
    r.eq(
        id,
        "is_alias",
        k.is_alias(),
        rec["is_alias"].as_bool().unwrap(),
    );
    let parsed = DispatchKey::parse(k.name()).ok().map(|k| k as u64);
    r.eq(
        id,
        "parse_name",
        parsed,
        rec["parse_name"]["value"].as_u64(),
    );
    let ks = DispatchKeySet::from_key(k);
    let expected = &rec["keyset"];
    check_set(r, id, "keyset", ks, expected);
    let backend_bits: Vec<u64> = (0..16).filter(|b| ks.raw() & (1 << b) != 0).collect();
    let expected_bits: Vec<u64> = expected["backend_bits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap())
        .collect();
    r.eq(id, "keyset.backend_bits", backend_bits, expected_bits);
    if let Some(f) = expected["functionality"].as_str() {
        r.eq(
            id,
            "keyset.functionality",
            ks.highest_functionality_key().name(),
            f,
        );
    }
    r.eq(
        id,
        "keyset.has_self",
        ks.has(k),
        expected["has_self"].as_bool().unwrap(),
    );
    r.eq(
        id,
        "keyset.highestPriorityTypeId_value",
        ks.highest_priority_type_id() as u64,
        expected["highestPriorityTypeId_value"].as_u64().unwrap(),
    );
    check_set(
        r,
        id,
        "full_after",
        DispatchKeySet::full_after(k),
        &rec["full_after"],
    );
    check_set(
        r,
        id,
        "backend_keyset_from_autograd",
        k.backend_key_set_from_autograd(),
        &rec["backend_keyset_from_autograd"],
    );
}

fn check_parse(r: &mut Report, rec: &Value) {
    let id = rec["id"].as_str().unwrap();
    let got = DispatchKey::parse(rec["input"].as_str().unwrap()).ok();
    if rec["ok"].as_bool().unwrap() {
        r.eq(id, "value", got.map(|k| k as u64), rec["value"].as_u64());
    } else if let Some(k) = got {
        r.fail(id, format!("parsed to {k}, PyTorch rejects it"));
    }
}

fn check_alias_inclusion(r: &mut Report, rec: &Value) {
    let id = rec["id"].as_str().unwrap();
    let alias = key_of_value(&rec["second_arg_value"]).unwrap();
    r.eq(
        id,
        "second_arg_is_alias",
        alias.is_alias(),
        rec["second_arg_is_alias"].as_bool().unwrap(),
    );
    let got: Vec<&str> = DispatchKey::ALL
        .iter()
        .filter(|k| k.is_included_in_alias(alias))
        .map(|k| k.name())
        .collect();
    let expected: Vec<&str> = rec["included_runtime_keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    r.eq(id, "included_runtime_keys", got, expected);
    // PyTorch asserts on an Undefined alias for every key but Undefined itself.
    let errors = if alias == DispatchKey::Undefined {
        155
    } else {
        0
    };
    r.eq(id, "n_errors", errors, rec["n_errors"].as_u64().unwrap());
}

/// `has` probes name keys; a name shared by two values matches if either value agrees.
fn check_has(r: &mut Report, id: &str, ks: DispatchKeySet, probes: &Value) {
    for (name, expected) in probes.as_object().unwrap() {
        let expected = expected.as_bool().unwrap();
        let candidates = keys_named(name);
        if !candidates.iter().any(|k| ks.has(*k) == expected) {
            r.fail(id, format!("has({name}) != {expected}"));
        }
    }
}

fn check_combo(r: &mut Report, rec: &Value) {
    let id = rec["id"].as_str().unwrap();
    let ks = set_of_names(&rec["keys"]);
    r.eq(id, "raw", ks.raw(), rec["raw"].as_u64().unwrap());
    r.eq(
        id,
        "str",
        ks.to_string().as_str(),
        rec["str"].as_str().unwrap(),
    );
    r.eq(
        id,
        "to_string",
        ks.to_string().as_str(),
        rec["to_string"].as_str().unwrap(),
    );
    r.eq(
        id,
        "highestPriorityTypeId_value",
        ks.highest_priority_type_id() as u64,
        rec["highestPriorityTypeId_value"].as_u64().unwrap(),
    );
    check_has(r, id, ks, &rec["has"]);
    let remove = key_named(rec["remove"]["key"].as_str().unwrap()).unwrap();
    check_set(r, id, "remove", ks.remove(remove), &rec["remove"]["result"]);
    let add = key_named(rec["add"]["key"].as_str().unwrap()).unwrap();
    check_set(r, id, "add", ks.add(add), &rec["add"]["result"]);
    // `other.keys` lists what `other` prints; functionality bits without a backend print
    // nothing, so the raw value is the truth.
    let other = DispatchKeySet::from_raw(rec["other"]["raw"].as_u64().unwrap());
    let printed: Vec<&str> = other.iter().map(DispatchKey::name).collect();
    let listed: Vec<&str> = rec["other"]["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    r.eq(id, "other.keys", printed, listed);
    check_set(r, id, "or_other", ks | other, &rec["or_other"]);
    check_set(r, id, "and_other", ks & other, &rec["and_other"]);
    check_set(r, id, "sub_other", ks - other, &rec["sub_other"]);
    r.eq(
        id,
        "eq_other",
        ks == other,
        rec["eq_other"].as_bool().unwrap(),
    );
}

fn check_raw(r: &mut Report, rec: &Value) {
    let id = rec["id"].as_str().unwrap();
    let ks = DispatchKeySet::from_raw(rec["raw"].as_u64().unwrap());
    r.eq(
        id,
        "str",
        ks.to_string().as_str(),
        rec["str"].as_str().unwrap(),
    );
    r.eq(
        id,
        "highestPriorityTypeId_value",
        ks.highest_priority_type_id() as u64,
        rec["highestPriorityTypeId_value"].as_u64().unwrap(),
    );
}

fn check_device(r: &mut Report, rec: &Value) {
    let id = rec["id"].as_str().unwrap();
    let got = DispatchKey::for_device(rec["device"].as_str().unwrap());
    match (&got, rec["key"].as_str(), rec["error"].as_str()) {
        (Ok(k), Some(expected), _) => r.eq(id, "key", k.name(), expected),
        // PyTorch's internal-assert text carries a source path we do not reproduce: our message
        // must be the part of theirs that explains the error.
        (Err(e), None, Some(expected)) if expected.contains(e.message()) => {}
        (got, _, _) => r.fail(id, format!("got {got:?}, expected {rec}")),
    }
}

fn check_tensor(r: &mut Report, rec: &Value) {
    let id = rec["id"].as_str().unwrap();
    let ks = DispatchKeySet::from_raw(rec["keyset"]["raw"].as_u64().unwrap());
    r.eq(
        id,
        "str",
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

#[test]
fn keys_conformance() {
    let mut report = Report::new();
    for path in data_files("keys", "keys", ".json") {
        let doc = read_json(&path);
        let file = file_name(&path);
        if let Some(meta) = doc.get("meta") {
            check_meta(&mut report, &format!("{file}: meta"), meta);
        }
        type Check = fn(&mut Report, &Value);
        let sections: [(&str, Check); 7] = [
            ("keys", check_key),
            ("parse", check_parse),
            ("alias_inclusion", check_alias_inclusion),
            ("combos", check_combo),
            ("raw_keysets", check_raw),
            ("devices", check_device),
            ("tensors", check_tensor),
        ];
        for (name, check) in sections {
            for rec in doc
                .get(name)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                report.record(&format!("{file}: {name}"));
                check(&mut report, rec);
            }
        }
    }
    report.finish();
}

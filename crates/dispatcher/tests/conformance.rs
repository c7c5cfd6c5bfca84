//! Replays every `tables/cases*.jsonl` and `tables/errors*.jsonl` record on a fresh dispatcher
//! and compares the dumps, the errors and the state after each deregistration with PyTorch's.

use switchboard_dispatcher::*;
use switchboard_keys::DispatchKey;
use switchboard_tensor::Tensor;
use switchboard_testkit::{data_files, file_name, read_json, read_jsonl, Report, Value};

/// PyTorch's test kernel `impl_t_t`: Tensor -> Tensor.
fn t_t(x: &Tensor) -> Result<Tensor> {
    Ok(x.clone())
}

/// A boxed fallback standing for the Python fallbacks of the recording: it redispatches below
/// its key.
fn boxed_fallback() -> KernelFunction {
    KernelFunction::from_boxed(|op, ks, stack| {
        let below = ks & DispatchKeySet::full_after(ks.highest_priority_type_id());
        op.redispatch_boxed(below, stack)
    })
}

/// The key a Python `DispatchKey[name]` enum member names (no parser restrictions).
fn enum_key(name: &str) -> DispatchKey {
    DispatchKey::ALL
        .iter()
        .copied()
        .find(|k| k.name() == name)
        .unwrap_or_else(|| panic!("no key {name}"))
}

/// A dispatcher with PyTorch's builtin backend fallbacks, read from `builtin_fallbacks.json`.
fn fresh_dispatcher() -> Dispatcher {
    let d = Dispatcher::new();
    for path in data_files("tables", "builtin_fallbacks", ".json") {
        let doc = read_json(&path);
        let table = doc["dump_table_of_op_with_only_a_def"].as_str().unwrap();
        for line in table.lines() {
            let (key, rest) = line.split_once(": ").unwrap();
            let kernel = if rest.starts_with("fallthrough ") {
                KernelFunction::fallthrough()
            } else {
                boxed_fallback()
            };
            d.register_fallback(enum_key(key), kernel, "registered in pytorch framework")
                .unwrap()
                .leak();
        }
    }
    d
}

fn opt_str(v: &Value) -> Option<&str> {
    v.as_str()
}

fn parse_key(v: &Value) -> Result<Option<DispatchKey>> {
    match v.as_str() {
        None | Some("") => Ok(None),
        Some(s) => DispatchKey::parse(s)
            .map(Some)
            .map_err(|e| DispatchError::from(DispatchErrorKind::Registration(e.to_string()))),
    }
}

/// Performs one registration record through its own library; the library is returned so that
/// dropping it deregisters.
fn register(d: &Dispatcher, r: &Value) -> Result<Option<Library>> {
    let lib_spec = &r["lib"];
    let kind = LibraryKind::parse(lib_spec["kind"].as_str().unwrap())?;
    let lib_key = parse_key(&lib_spec["dispatch"])?;
    let mut lib = Library::with_location(
        d,
        kind,
        lib_spec["ns"].as_str().unwrap(),
        lib_key,
        lib_spec["file"].as_str().unwrap(),
        lib_spec["line"].as_u64().unwrap() as u32,
    )?;
    let kernel = || KernelFunction::from_fn(t_t);
    match r["op"].as_str().unwrap() {
        "def" => {
            let alias = opt_str(&r["alias_analysis"]).unwrap_or("");
            let alias = AliasAnalysisKind::parse(alias).ok_or_else(|| {
                DispatchError::from(DispatchErrorKind::Registration(format!(
                    "could not parse {alias}"
                )))
            })?;
            lib.def_with_alias(r["schema"].as_str().unwrap(), Some(alias))?;
        }
        "def_legacy" => {
            lib.def_legacy(r["schema"].as_str().unwrap())?;
        }
        "def_name_t_t" => {
            let key = parse_key(&r["key"])?;
            let debug = opt_str(&r["debug"]).unwrap_or("default_def_name_t_t");
            lib.def_with_kernel(r["name"].as_str().unwrap(), key, kernel(), Some(debug))?;
        }
        "def_schema_t_t" => {
            let key = parse_key(&r["key"])?;
            let debug = opt_str(&r["debug"]).unwrap_or("default_def_schema_t_t");
            lib.def_with_kernel(r["schema"].as_str().unwrap(), key, kernel(), Some(debug))?;
        }
        "impl" => {
            let key = parse_key(&r["key"])?;
            let debug = opt_str(&r["debug"]).unwrap_or("impl_t_t");
            lib.impl_with_debug(r["name"].as_str().unwrap(), key, kernel(), Some(debug))?;
        }
        "impl_fallthrough" => {
            lib.fallthrough(
                r["name"].as_str().unwrap(),
                enum_key(r["key"].as_str().unwrap()),
            )?;
        }
        "fallback" => {
            lib.fallback(Some(enum_key(r["key"].as_str().unwrap())), boxed_fallback())?;
        }
        "fallback_fallthrough" => {
            let key = opt_str(&r["key"]).map(enum_key);
            lib.fallback(key, KernelFunction::fallthrough())?;
        }
        "library_only" => {}
        other => panic!("unknown registration op {other}"),
    }
    Ok(Some(lib))
}

fn check_case(report: &mut Report, rec: &Value) {
    let id = rec["id"].as_str().unwrap();
    let op = rec["op"].as_str().unwrap();
    let d = fresh_dispatcher();
    let mut libs = Vec::new();
    for r in rec["registrations"].as_array().unwrap() {
        match register(&d, r) {
            Ok(lib) => libs.push(lib),
            Err(e) => return report.fail(id, format!("registration {r} failed: {e}")),
        }
    }
    report.eq(
        id,
        "dump_table",
        d.dump_table(op),
        rec["dump_table"].as_str().unwrap_or("").to_owned(),
    );
    report.eq(
        id,
        "dump_state",
        d.dump_state(op),
        rec["dump_state"].as_str().unwrap_or("").to_owned(),
    );
    check_introspection(report, id, &d, op, rec);
    drop(libs);
    report.eq(
        id,
        "dump_state after teardown",
        d.dump_state(op),
        String::new(),
    );
    for r in rec["registrations"].as_array().unwrap() {
        if r["op"].as_str().unwrap().starts_with("fallback") {
            let key = opt_str(&r["key"]).map(enum_key);
            if let Some(key) = key.filter(|k| !k.is_alias()) {
                report.eq(
                    id,
                    &format!("has_backend_fallback({key}) after teardown"),
                    d.has_backend_fallback_for_dispatch_key(key),
                    builtin_fallback_keys().contains(&key),
                );
            }
        }
    }
}

/// The keys PyTorch's builtin backend fallbacks are registered at (`builtin_fallbacks.json`).
fn builtin_fallback_keys() -> Vec<DispatchKey> {
    let mut keys = Vec::new();
    for path in data_files("tables", "builtin_fallbacks", ".json") {
        let doc = read_json(&path);
        let table = doc["dump_table_of_op_with_only_a_def"].as_str().unwrap();
        keys.extend(
            table
                .lines()
                .map(|l| enum_key(l.split_once(": ").unwrap().0)),
        );
    }
    keys
}

/// The `torch._C._dispatch_*` queries agree with PyTorch's dumps of the same registrations: a
/// key has a registered kernel when `_dispatch_dump` lists one for it, a runtime key has a
/// computed kernel when `_dispatch_dump_table` prints a line for it, the registrations of a key
/// list the operator when it has a kernel there, and the fallbacks the case registered exist.
fn check_introspection(report: &mut Report, id: &str, d: &Dispatcher, op: &str, rec: &Value) {
    let state = rec["dump_state"].as_str().unwrap_or("");
    let table = rec["dump_table"].as_str().unwrap_or("");
    let name = OperatorName::parse(op).unwrap();
    // An empty dump: no operator of that name (PyTorch's queries raise "does not exist").
    let exists = !state.is_empty();
    for k in DispatchKey::ALL {
        let unique = DispatchKey::ALL
            .iter()
            .filter(|o| o.name() == k.name())
            .count()
            == 1;
        if !unique {
            continue;
        }
        let listed = state.lines().any(|l| {
            l.strip_prefix(k.name())
                .is_some_and(|rest| rest.starts_with(':') || rest.starts_with("[alias]:"))
        });
        let got = d.has_kernel_for_dispatch_key(op, k).ok();
        let want = exists.then_some(listed);
        report.eq(id, &format!("has_kernel_for_dispatch_key({k})"), got, want);
        let registered = d.registrations_for_dispatch_key(Some(k)).contains(&name);
        report.eq(
            id,
            &format!("registrations_for_dispatch_key({k})"),
            registered,
            listed,
        );
    }
    for (slot, k) in runtime_keys().enumerate().skip(1) {
        let printed = table
            .lines()
            .any(|l| l.starts_with(&format!("{}: ", k.name())));
        let got = d.has_computed_kernel_for_dispatch_key(op, k).ok();
        report.eq(
            id,
            &format!("has_computed_kernel_for_dispatch_key({k}) [slot {slot}]"),
            got,
            exists.then_some(printed),
        );
    }
    for r in rec["registrations"].as_array().unwrap() {
        if r["op"].as_str().unwrap().starts_with("fallback") {
            let key = opt_str(&r["key"]).map(enum_key);
            if let Some(key) = key.filter(|k| !k.is_alias()) {
                report.eq(
                    id,
                    &format!("has_backend_fallback({key})"),
                    d.has_backend_fallback_for_dispatch_key(key),
                    true,
                );
            }
        }
    }
}

fn check_errors(report: &mut Report, rec: &Value) {
    let id = rec["id"].as_str().unwrap();
    let op = rec["op"].as_str().unwrap();
    let d = fresh_dispatcher();
    let mut libs: Vec<Option<Library>> = Vec::new();
    for (i, r) in rec["registrations"].as_array().unwrap().iter().enumerate() {
        let expected = &rec["results"][i];
        match register(&d, r) {
            Ok(lib) => {
                libs.push(lib);
                if expected["raised"].as_bool() == Some(true) {
                    report.fail(
                        id,
                        format!(
                            "registration {i} succeeded; PyTorch raised {}",
                            expected["error_first_line"]
                        ),
                    );
                }
            }
            Err(e) => {
                libs.push(None);
                match expected["error_first_line"].as_str() {
                    Some(line) => report.eq(
                        id,
                        &format!("error of registration {i}"),
                        e.first_line(),
                        line.to_owned(),
                    ),
                    None => {
                        report.fail(id, format!("registration {i} raised {e}; PyTorch did not"))
                    }
                }
            }
        }
    }
    // Some records do not carry the state after (null): nothing to compare then.
    if let Some(expected) = rec["dump_state_after"].as_str() {
        report.eq(
            id,
            "dump_state_after",
            d.dump_state(op),
            expected.to_owned(),
        );
    }
    if let Some(expected) = rec["dump_table_after"].as_str() {
        report.eq(
            id,
            "dump_table_after",
            d.dump_table(op),
            expected.to_owned(),
        );
    }
    if let Some(dangling) = rec.get("dangling_impls").and_then(Value::as_array) {
        let expected: Vec<String> = dangling
            .iter()
            .map(|v| v.as_str().unwrap_or("").to_owned())
            .collect();
        report.eq(id, "dangling_impls", d.find_dangling_impls(), expected);
    }
    for step in rec["teardown"].as_array().into_iter().flatten() {
        let i = step["removed"].as_u64().unwrap() as usize;
        libs[i] = None;
        report.eq(
            id,
            &format!("dump_state after removing {i}"),
            d.dump_state(op),
            step["dump_state"].as_str().unwrap_or("").to_owned(),
        );
        report.eq(
            id,
            &format!("dump_table after removing {i}"),
            d.dump_table(op),
            step["dump_table"].as_str().unwrap_or("").to_owned(),
        );
    }
}

#[test]
fn tables_conformance() {
    let mut report = Report::new();
    for path in data_files("tables", "cases", ".jsonl") {
        let section = file_name(&path);
        for rec in read_jsonl(&path) {
            report.record(&section);
            check_case(&mut report, &rec);
        }
    }
    for path in data_files("tables", "errors", ".jsonl") {
        let section = file_name(&path);
        for rec in read_jsonl(&path) {
            report.record(&section);
            check_errors(&mut report, &rec);
        }
    }
    report.finish();
}

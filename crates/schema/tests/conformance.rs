//! Conformance against schemas recorded from PyTorch 2.15.
//!
//! Reads the folder named by `SWITCHBOARD_CONFORMANCE` (default:
//! `../shared/conformance` beside the workspace) and checks every file
//! matching `schemas/valid*.txt`, `schemas/roundtrip*.jsonl` and
//! `schemas/invalid*.jsonl`.  Nothing here knows about particular ids.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;
use switchboard_schema::{Argument, FunctionSchema, SchemaParseError};
use switchboard_testkit::{conformance_dir, data_files};

const MAX_REPORTED: usize = 20;

/// Sorts the names inside multi-set alias annotations (`(b|a)` -> `(a|b)`),
/// outside string literals: PyTorch prints them in hash order, we print them
/// in the order written, and the README accepts either.
fn normalize_alias_order(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut quote: Option<u8> = None;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = quote {
            if c == b'\\' && i + 1 < b.len() {
                out.push_str(&s[i..i + 2]);
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
        } else if c == b'"' || c == b'\'' {
            quote = Some(c);
        } else if c == b'(' {
            if let Some(len) = s[i + 1..].find(')') {
                let inner = &s[i + 1..i + 1 + len];
                let alias_like = inner.contains('|')
                    && inner
                        .bytes()
                        .all(|c| c.is_ascii_alphanumeric() || b"_*|! ->$".contains(&c));
                if alias_like {
                    let parts: Vec<String> = inner
                        .split(" -> ")
                        .map(|part| {
                            let (names, bang) = match part.strip_suffix('!') {
                                Some(p) => (p, "!"),
                                None => (part, ""),
                            };
                            let mut v: Vec<&str> = names.split('|').collect();
                            v.sort_unstable();
                            format!("{}{bang}", v.join("|"))
                        })
                        .collect();
                    let _ = write!(out, "({})", parts.join(" -> "));
                    i += len + 2;
                    continue;
                }
            }
        }
        let ch_len = s[i..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&s[i..i + ch_len]);
        i += ch_len;
    }
    out
}

/// PyTorch's error line with its libtorch path and line number normalised.
fn normalize_error_line(line: &str) -> String {
    let line = line.replace("\"/__w/pytorch/pytorch/", "\"<pytorch>/pytorch/");
    let mut out = String::new();
    let mut rest = line.as_str();
    while let Some(pos) = rest.find("\":") {
        out.push_str(&rest[..pos + 2]);
        rest = &rest[pos + 2..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            out.push_str("<line>");
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
    out
}

struct Report {
    failures: Vec<String>,
}

impl Report {
    fn fail(&mut self, id: &str, what: impl std::fmt::Display) {
        self.failures.push(format!("{id}: {what}"));
    }
}

fn lines_of(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines().map(str::to_string).collect()
}

fn check_valid(path: &Path, report: &mut Report) -> usize {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let mut checked = 0;
    for (n, line) in lines_of(path).iter().enumerate() {
        if line.is_empty() {
            continue;
        }
        checked += 1;
        let id = format!("{name}:{}", n + 1);
        match FunctionSchema::parse(line) {
            Ok(schema) => {
                let printed = schema.to_string();
                if normalize_alias_order(&printed) != normalize_alias_order(line) {
                    report.fail(&id, format!("printed {printed:?}, expected {line:?}"));
                }
            }
            // The README's exception: `PyObject` is no schema type.
            Err(e)
                if e.message().starts_with("unknown type specifier")
                    && line.contains("PyObject") => {}
            Err(e) => report.fail(&id, format!("rejected {line:?}: {}", e.first_line())),
        }
    }
    checked
}

fn opt_str(v: &Value) -> Option<&str> {
    v.as_str()
}

fn sorted_strings(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str().map(String::from))
        .collect();
    out.sort();
    out
}

fn check_argument(id: &str, which: &str, got: &Argument, want: &Value, report: &mut Report) {
    let mut diffs = Vec::new();
    let mut cmp = |field: &str, g: String, w: String| {
        if g != w {
            diffs.push(format!("{field}: got {g:?}, expected {w:?}"));
        }
    };
    cmp(
        "name",
        got.name().to_string(),
        opt_str(&want["name"]).unwrap_or("").to_string(),
    );
    cmp(
        "type",
        normalize_alias_order(&got.type_string()),
        normalize_alias_order(opt_str(&want["type"]).unwrap_or("")),
    );
    cmp(
        "default",
        format!("{:?}", got.default_string()),
        format!("{:?}", opt_str(&want["default"])),
    );
    cmp(
        "kwarg_only",
        got.kwarg_only().to_string(),
        want["kwarg_only"].to_string(),
    );
    cmp(
        "N",
        format!("{:?}", got.n()),
        format!("{:?}", want["N"].as_i64().map(|n| n as i32)),
    );
    cmp(
        "is_out",
        got.is_out().to_string(),
        want["is_out"].to_string(),
    );
    cmp(
        "is_write",
        got.is_write().to_string(),
        want["is_write"].to_string(),
    );
    cmp(
        "torch_type",
        got.fake_type().annotation_str(),
        opt_str(&want["torch_type"]).unwrap_or("").to_string(),
    );
    cmp(
        "torch_real_type",
        got.ty().annotation_str(),
        opt_str(&want["torch_real_type"]).unwrap_or("").to_string(),
    );
    let got_alias = got.alias_info().map(|a| {
        let mut before: Vec<String> = a.before_set().map(String::from).collect();
        let mut after: Vec<String> = a.after_set().map(String::from).collect();
        before.sort();
        after.sort();
        (before, after, a.is_write())
    });
    let want_alias = want["alias"].as_object().map(|a| {
        (
            sorted_strings(&a["before_set"]),
            sorted_strings(&a["after_set"]),
            a["is_write"].as_bool() == Some(true),
        )
    });
    cmp("alias", format!("{got_alias:?}"), format!("{want_alias:?}"));
    if !diffs.is_empty() {
        report.fail(id, format!("{which} {}: {}", got.name(), diffs.join("; ")));
    }
}

fn check_roundtrip_record(r: &Value, report: &mut Report) {
    let id = r["id"].as_str().unwrap_or("?").to_string();
    let input = r["input"].as_str().unwrap_or_default();
    let schema = match FunctionSchema::parse(input) {
        Ok(s) => s,
        Err(e) => return report.fail(&id, format!("rejected {input:?}: {}", e.first_line())),
    };
    let printed = schema.to_string();
    let canonical = r["canonical"].as_str().unwrap_or_default();
    if r["canonical_is_fixed_point"].as_bool() == Some(true)
        && normalize_alias_order(&printed) != normalize_alias_order(canonical)
    {
        report.fail(&id, format!("printed {printed:?}, expected {canonical:?}"));
    }
    let mut top = |field: &str, got: String, want: &Value| {
        let want = match want {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if got != want {
            report.fail(&id, format!("{field}: got {got}, expected {want}"));
        }
    };
    top("name", schema.name().to_string(), &r["name"]);
    top(
        "overload_name",
        schema.overload_name().to_string(),
        &r["overload_name"],
    );
    top(
        "is_mutable",
        schema.is_mutable().to_string(),
        &r["is_mutable"],
    );
    top(
        "is_view_op",
        schema.is_view_op().to_string(),
        &r["is_view_op"],
    );
    top("is_vararg", schema.is_vararg().to_string(), &r["is_vararg"]);
    top("is_varret", schema.is_varret().to_string(), &r["is_varret"]);
    top(
        "kw_only_marker_index",
        schema
            .kwarg_only_index()
            .map_or("null".to_string(), |i| i.to_string()),
        &r["kw_only_marker_index"],
    );
    for (which, got, want) in [
        ("argument", schema.arguments(), &r["arguments"]),
        ("return", schema.returns(), &r["returns"]),
    ] {
        let want = want.as_array().cloned().unwrap_or_default();
        if got.len() != want.len() {
            report.fail(
                &id,
                format!("{} {which}s, expected {}", got.len(), want.len()),
            );
            continue;
        }
        for (g, w) in got.iter().zip(&want) {
            check_argument(&id, which, g, w, report);
        }
    }
    // Reparsing our own output must behave as reparsing PyTorch's did.
    let reparse = &r["canonical_reparse"];
    match (FunctionSchema::parse(&printed), reparse["ok"].as_bool()) {
        (Ok(s), Some(true)) => {
            let want = reparse["canonical"].as_str().unwrap_or_default();
            if normalize_alias_order(&s.to_string()) != normalize_alias_order(want) {
                report.fail(
                    &id,
                    format!("reparse printed {:?}, expected {want:?}", s.to_string()),
                );
            }
        }
        (Err(e), Some(false)) => {
            let want = reparse["error_first_line"].as_str().unwrap_or_default();
            if e.first_line() != want {
                report.fail(
                    &id,
                    format!("reparse error {:?}, expected {want:?}", e.first_line()),
                );
            }
        }
        (Ok(_), _) => report.fail(
            &id,
            "reparse of the canonical text succeeded, PyTorch's failed",
        ),
        (Err(e), _) => report.fail(
            &id,
            format!("reparse of {printed:?} failed: {}", e.first_line()),
        ),
    }
}

fn records(path: &Path) -> Vec<Value> {
    lines_of(path)
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}: bad JSON line: {e}", path.display()))
        })
        .collect()
}

#[derive(Default)]
struct ErrorStats {
    total: usize,
    first_line_exact: usize,
    first_line_normalized: usize,
    exception_type: usize,
    full_message: usize,
    mismatches: Vec<String>,
}

fn check_invalid_record(r: &Value, report: &mut Report, stats: &mut ErrorStats) {
    let id = r["id"].as_str().unwrap_or("?");
    let input = r["input"].as_str().unwrap_or_default();
    let err: SchemaParseError = match FunctionSchema::parse(input) {
        Ok(s) => return report.fail(id, format!("accepted {input:?} as {s}")),
        Err(e) => e,
    };
    stats.total += 1;
    let want = r["error_first_line"].as_str().unwrap_or_default();
    let want_norm = r["error_first_line_normalized"].as_str().unwrap_or(want);
    let got = err.first_line();
    if got == want {
        stats.first_line_exact += 1;
    }
    if normalize_error_line(got) == want_norm {
        stats.first_line_normalized += 1;
    } else {
        stats
            .mismatches
            .push(format!("{id}: got {got:?}, expected {want_norm:?}"));
    }
    let want_full = r["error_message"].as_str().unwrap_or_default();
    if normalize_error_line(err.pytorch_message()) == normalize_error_line(want_full) {
        stats.full_message += 1;
    } else {
        stats.mismatches.push(format!(
            "{id}: full message {:?}, expected {want_full:?}",
            err.pytorch_message()
        ));
    }
    if Some(err.kind().python_exception()) == r["error_type"].as_str() {
        stats.exception_type += 1;
    }
}

#[test]
fn conformance() {
    let schemas = conformance_dir().join("schemas");
    assert!(
        schemas.is_dir(),
        "conformance data not found at {}",
        schemas.display()
    );
    let mut report = Report {
        failures: Vec::new(),
    };
    let mut total = 0;

    for path in data_files("schemas", "valid", ".txt") {
        let n = check_valid(&path, &mut report);
        println!("{}: {n} schemas checked", path.display());
        total += n;
    }
    for path in data_files("schemas", "roundtrip", ".jsonl") {
        let recs = records(&path);
        for r in &recs {
            check_roundtrip_record(r, &mut report);
        }
        println!("{}: {} records checked", path.display(), recs.len());
        total += recs.len();
    }
    let mut stats = ErrorStats::default();
    for path in data_files("schemas", "invalid", ".jsonl") {
        let recs = records(&path);
        for r in &recs {
            check_invalid_record(r, &mut report, &mut stats);
        }
        println!("{}: {} records checked", path.display(), recs.len());
        total += recs.len();
    }
    println!(
        "invalid inputs: {} rejected; error first line matches PyTorch exactly for {}, after path/line normalisation for {}; exception type matches for {}; whole message (excerpt and caret line) matches for {}",
        stats.total, stats.first_line_exact, stats.first_line_normalized, stats.exception_type, stats.full_message
    );
    for m in stats.mismatches.iter().take(MAX_REPORTED) {
        println!("  first-line difference: {m}");
    }
    assert!(
        total > 0,
        "no conformance records found under {}",
        schemas.display()
    );
    if !report.failures.is_empty() {
        let mut msg = format!(
            "{} conformance failures (first {MAX_REPORTED}):\n",
            report.failures.len()
        );
        for f in report.failures.iter().take(MAX_REPORTED) {
            let _ = writeln!(msg, "  {f}");
        }
        panic!("{msg}");
    }
}

#[test]
fn alias_order_normalisation() {
    assert_eq!(
        normalize_alias_order("f(Tensor(b|a) x, str s=\"(b|a)\") -> Tensor(b|a! -> d|c)"),
        "f(Tensor(a|b) x, str s=\"(b|a)\") -> Tensor(a|b! -> c|d)"
    );
    assert_eq!(
        normalize_error_line(
            "0 INTERNAL ASSERT FAILED at \"/__w/pytorch/pytorch/aten/x.h\":662, please"
        ),
        "0 INTERNAL ASSERT FAILED at \"<pytorch>/pytorch/aten/x.h\":<line>, please"
    );
}

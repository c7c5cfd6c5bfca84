//! `schema/parse_all`: parse every schema of the conformance `valid*.txt`
//! files (the folder named by `SWITCHBOARD_CONFORMANCE`, default
//! `../shared/conformance` beside the workspace).  Throughput is reported
//! per schema, so criterion's "time per element" is the average parse time.

use std::path::{Path, PathBuf};

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use switchboard_schema::FunctionSchema;

fn schema_lines() -> Vec<String> {
    let dir = match std::env::var_os("SWITCHBOARD_CONFORMANCE") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance"),
    }
    .join("schemas");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("valid") && n.ends_with(".txt"))
    });
    files.sort();
    files
        .iter()
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap_or_default()
                .lines()
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .filter(|l| !l.is_empty())
        .collect()
}

fn parse_all(c: &mut Criterion) {
    let lines = schema_lines();
    assert!(!lines.is_empty(), "no valid*.txt schemas found");
    let mut group = c.benchmark_group("schema");
    group.throughput(Throughput::Elements(lines.len() as u64));
    group.bench_function("parse_all", |b| {
        b.iter(|| {
            let mut ok = 0usize;
            for line in &lines {
                ok += usize::from(FunctionSchema::parse(black_box(line)).is_ok());
            }
            ok
        })
    });
    group.finish();
}

criterion_group!(benches, parse_all);
criterion_main!(benches);

//! `schema/parse_all`: parse every schema of the conformance `valid*.txt`
//! files (the folder named by `SWITCHBOARD_CONFORMANCE`, default
//! `../shared/conformance` beside the workspace).  Throughput is reported
//! per schema, so criterion's "time per element" is the average parse time.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use switchboard_schema::FunctionSchema;
use switchboard_testkit::{data_files, read_lines};

fn schema_lines() -> Vec<String> {
    data_files("schemas", "valid", ".txt")
        .iter()
        .flat_map(|p| read_lines(p))
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

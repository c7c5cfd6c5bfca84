//! Shared support for the conformance tests: finding the data recorded from PyTorch, loading
//! every file of a category, and reporting mismatches with their record ids.
//!
//! The data folder is `$SWITCHBOARD_CONFORMANCE`, or `../shared/conformance` beside the
//! workspace. Tests load *every* file matching a category's pattern, so extra files of the same
//! format are checked without code changes.

use std::fmt::Display;
use std::path::{Path, PathBuf};

pub use serde_json::Value;

/// The conformance data folder.
pub fn conformance_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SWITCHBOARD_CONFORMANCE") {
        return PathBuf::from(dir);
    }
    // crates/testkit -> workspace root -> its parent.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance")
}

/// Every file `<dir>/<sub>/<prefix>*<suffix>`, sorted. Panics when none exists, so that a missing
/// data folder fails loudly instead of passing vacuously.
pub fn data_files(sub: &str, prefix: &str, suffix: &str) -> Vec<PathBuf> {
    let dir = conformance_dir().join(sub);
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read conformance folder {}: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with(prefix) && name.ends_with(suffix)
        })
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no {sub}/{prefix}*{suffix} in {}",
        dir.display()
    );
    files
}

/// The JSON document of a file.
pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON in {}: {e}", path.display()))
}

/// The records of a JSON-lines file (blank lines skipped).
pub fn read_jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("bad JSON at {}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

/// The text lines of a file (blank lines skipped).
pub fn read_lines(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

/// Collects the results of checking records; `finish` prints the counts and fails the test with
/// the first mismatches when any record failed.
#[derive(Default)]
pub struct Report {
    checked: Vec<(String, usize)>,
    mismatches: Vec<String>,
    total_mismatches: usize,
}

/// How many mismatches `finish` lists.
const SHOWN: usize = 25;

impl Report {
    /// A new, empty report.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one checked record under `section` (e.g. `keys_public.json: combos`).
    pub fn record(&mut self, section: &str) {
        match self.checked.iter_mut().find(|(s, _)| s == section) {
            Some((_, n)) => *n += 1,
            None => self.checked.push((section.to_owned(), 1)),
        }
    }

    /// Notes a mismatch of record `id`.
    pub fn fail(&mut self, id: impl Display, what: impl Display) {
        self.total_mismatches += 1;
        if self.mismatches.len() < SHOWN {
            self.mismatches.push(format!("[{id}] {what}"));
        }
    }

    /// Compares `got` with `expected`, noting a mismatch of `field` in record `id`.
    pub fn eq<T: PartialEq + std::fmt::Debug>(
        &mut self,
        id: impl Display,
        field: &str,
        got: T,
        expected: T,
    ) {
        if got != expected {
            let (got, expected) = (clip(format!("{got:?}")), clip(format!("{expected:?}")));
            self.fail(id, format!("{field}: got {got}, expected {expected}"));
        }
    }

    /// Prints the counts; panics listing the first mismatches if there were any.
    pub fn finish(self) {
        for (section, n) in &self.checked {
            println!("checked {n:>6} records: {section}");
        }
        if self.total_mismatches > 0 {
            let mut msg = format!("{} mismatches; the first ones:\n", self.total_mismatches);
            for m in &self.mismatches {
                msg.push_str("  ");
                msg.push_str(m);
                msg.push('\n');
            }
            panic!("{msg}");
        }
        assert!(!self.checked.is_empty(), "no record was checked");
    }
}

/// The file name of a path, for report sections.
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Shortens a long value for a mismatch line.
fn clip(s: String) -> String {
    const MAX: usize = 400;
    if s.len() <= MAX {
        return s;
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &s[..end], s.len())
}

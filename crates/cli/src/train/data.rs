//! The training data: a CSV of numeric features with the integer class label in the last
//! column (optionally gzip-compressed), by default the UCI handwritten digits embedded in the
//! binary (see `data/README.md`).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use switchboard_tensor::Generator;

#[path = "data_limits.rs"]
mod limits;
use limits::{Limited, RowLimited};

/// The UCI 8x8 handwritten digits (1797 samples, 64 features 0..16, label 0..9), as
/// scikit-learn ships them (`data/digits.csv.gz`).
pub const DIGITS_CSV_GZ: &[u8] = include_bytes!("../../data/digits.csv.gz");

/// By default, at most this many bytes of CSV text are read from a data file, after
/// decompression (1 GiB): a bound on the memory the data can take, so that a gzip bomb or a
/// runaway file ends in an error rather than an abort (Note [Reading untrusted data]).
pub const MAX_CSV_BYTES: u64 = 1 << 30;

/// At most this many bytes of CSV text make one row (16 MiB, a million features and more).
pub const MAX_ROW_BYTES: u64 = 16 << 20;

// Note [Reading untrusted data]
// A data file decides how much is read and allocated, so nothing it says is trusted: the text
// is streamed (never read whole), through a reader that fails once more than a limit
// (`MAX_CSV_BYTES` by default, `--max-data-mib`) of text (decompressed) has gone by. The csv
// reader grows its record buffers infallibly, as long as the record is: so a row (a record,
// which quoted fields can spread over several lines) is limited to `MAX_ROW_BYTES`, checked on
// the text before the csv reader sees it, which bounds those buffers and the row's fields. The
// data's own vectors (features, labels, the split, each epoch's shuffle) reserve fallibly and
// fail with an error naming what could not be held. Every cell must be a finite number and
// every label an exact non-negative integer (no rounding through `f32`, no silent cap).

/// A classification data set held in memory, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// `len() * n_features` values.
    pub features: Vec<f32>,
    /// One class index per sample.
    pub labels: Vec<i64>,
    /// Features per sample.
    pub n_features: usize,
    /// Number of classes (the largest label + 1).
    pub n_classes: usize,
}

/// A data-loading failure, with the line where it happened.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// Reading the file failed.
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    /// The CSV is malformed (or its gzip stream is, or it is too large).
    #[error("{0}")]
    Csv(String),
}

/// Appends `values` to `v`, failing instead of aborting when memory runs out.
fn try_extend<T: Copy>(
    v: &mut Vec<T>,
    values: &[T],
    name: &str,
    what: &str,
) -> Result<(), DataError> {
    v.try_reserve(values.len()).map_err(|_| {
        DataError::Csv(format!(
            "{name}: out of memory holding the {what} ({} values read, {} more bytes needed)",
            v.len(),
            v.len()
                .max(values.len())
                .saturating_mul(std::mem::size_of::<T>())
        ))
    })?;
    v.extend_from_slice(values);
    Ok(())
}

/// A label cell: an exact non-negative integer (`3`, or `3.0` as some writers print it).
fn parse_label(text: &str) -> Option<i64> {
    if let Ok(v) = text.parse::<i64>() {
        return (v >= 0).then_some(v);
    }
    // Integers a float literal holds exactly: up to 2^53.
    let f = text.parse::<f64>().ok()?;
    (f >= 0.0 && f.fract() == 0.0 && f <= (1u64 << 53) as f64).then_some(f as i64)
}

impl Dataset {
    /// The embedded digits data set.
    pub fn digits() -> Result<Dataset, DataError> {
        Dataset::from_csv_bytes(DIGITS_CSV_GZ, "embedded digits.csv.gz")
    }

    /// Reads a CSV file (gzip-compressed when it starts with the gzip magic bytes, whatever
    /// its name), streamed, at most `limit` bytes of text (Note [Reading untrusted data]).
    pub fn from_path(path: &Path, limit: u64) -> Result<Dataset, DataError> {
        let name = path.display().to_string();
        let file = switchboard_tensor::open_input_file(path)
            .map_err(|e| DataError::Io(name.clone(), e))?;
        Dataset::from_reader(BufReader::new(file), &name, limit)
    }

    /// Parses CSV bytes, plain or gzip-compressed, at most [`MAX_CSV_BYTES`] of text (see
    /// [`from_reader`](Self::from_reader)).
    pub fn from_csv_bytes(bytes: &[u8], name: &str) -> Result<Dataset, DataError> {
        Dataset::from_reader(bytes, name, MAX_CSV_BYTES)
    }

    /// Parses CSV text, plain or gzip-compressed (when it starts with the gzip magic bytes),
    /// reading at most `limit` bytes of text (decompressed). Every row holds the same number of fields:
    /// finite numbers, the last one the label (a non-negative integer); a first row that does
    /// not parse as numbers is taken for a header and skipped. `name` is for messages.
    pub fn from_reader(
        mut input: impl BufRead,
        name: &str,
        limit: u64,
    ) -> Result<Dataset, DataError> {
        let head = input
            .fill_buf()
            .map_err(|e| DataError::Io(name.to_owned(), e))?;
        let text: Box<dyn Read + '_> = if head.starts_with(&[0x1f, 0x8b]) {
            Box::new(flate2::bufread::MultiGzDecoder::new(input))
        } else {
            Box::new(input)
        };
        let text = RowLimited::new(Limited::new(text, limit), MAX_ROW_BYTES);
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .trim(csv::Trim::All)
            .comment(Some(b'#'))
            .from_reader(text);
        let mut features = Vec::new();
        let mut labels = Vec::new();
        let mut n_features = None;
        for (i, record) in reader.records().enumerate() {
            let record = record.map_err(|e| DataError::Csv(format!("{name}: {e}")))?;
            let line = record.position().map_or(i as u64 + 1, |p| p.line());
            if record.len() < 2 {
                return Err(DataError::Csv(format!(
                    "{name}:{line}: expected at least 2 columns (features, then the label), got {}",
                    record.len()
                )));
            }
            let d = record.len() - 1;
            let parsed: Result<Vec<f32>, _> = record
                .iter()
                .take(d)
                .enumerate()
                .map(|(c, cell)| cell.parse::<f32>().map_err(|e| (c, e)))
                .collect();
            let label = parse_label(&record[d]);
            let values = match parsed {
                Ok(v) => v,
                Err(_) if i == 0 => continue, // a header row
                Err((c, e)) => {
                    // The cell, not the row: a row can be megabytes long.
                    return Err(DataError::Csv(format!(
                        "{name}:{line}: column {} is {:?}, not a number: {e}",
                        c + 1,
                        &record[c]
                    )));
                }
            };
            if let Some(c) = values.iter().position(|v| !v.is_finite()) {
                return Err(DataError::Csv(format!(
                    "{name}:{line}: column {} is {:?}, which is not a finite float32: features \
                     must be finite numbers",
                    c + 1,
                    &record[c]
                )));
            }
            let Some(label) = label else {
                if i == 0 && record[d].parse::<f64>().is_err() {
                    continue; // a header row whose feature names read as numbers
                }
                return Err(DataError::Csv(format!(
                    "{name}:{line}: the label (last column) must be a non-negative integer, got \
                     {:?}",
                    &record[d]
                )));
            };
            match n_features {
                None => n_features = Some(d),
                Some(n) if n != d => {
                    return Err(DataError::Csv(format!(
                        "{name}:{line}: {} columns, but the first row has {}",
                        d + 1,
                        n + 1
                    )))
                }
                Some(_) => {}
            }
            try_extend(&mut features, &values, name, "features")?;
            try_extend(&mut labels, &[label], name, "labels")?;
        }
        let Some(n_features) = n_features else {
            return Err(DataError::Csv(format!("{name}: no data rows")));
        };
        let n_classes = labels
            .iter()
            .max()
            .and_then(|m| usize::try_from(*m).ok()?.checked_add(1))
            .unwrap_or(0);
        Ok(Dataset {
            features,
            labels,
            n_features,
            n_classes,
        })
    }

    /// Number of distinct labels present (at most 2 are counted: enough to know whether there
    /// is something to learn).
    pub fn distinct_labels_up_to_two(&self) -> usize {
        match self.labels.first() {
            None => 0,
            Some(&l0) if self.labels.iter().any(|&l| l != l0) => 2,
            Some(_) => 1,
        }
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when there are no samples.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The samples at `indices`, in that order (fails when memory runs out).
    pub fn subset(&self, indices: &[usize]) -> Result<Dataset, DataError> {
        let d = self.n_features;
        let mut features = Vec::new();
        let mut labels = Vec::new();
        let oom = |_| DataError::Csv("out of memory splitting the data".into());
        features
            .try_reserve_exact(indices.len().saturating_mul(d))
            .map_err(oom)?;
        labels.try_reserve_exact(indices.len()).map_err(oom)?;
        for &i in indices {
            features.extend_from_slice(&self.features[i * d..(i + 1) * d]);
            labels.push(self.labels[i]);
        }
        Ok(Dataset {
            features,
            labels,
            n_features: d,
            n_classes: self.n_classes,
        })
    }

    /// Scales every feature by `1 / max |value|` over the whole set (digits: 1/16), so that
    /// inputs lie in [-1, 1]. Returns the factor.
    ///
    /// The factor and the products are computed in `f64`: for features below `1 / f32::MAX`
    /// (about 2.9e-39, subnormal float32s) the factor itself is not a finite float32, while
    /// every scaled value is (it lies in [-1, 1]).
    pub fn normalize_max_abs(&mut self) -> f64 {
        let m = self.features.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let s = if m > 0.0 { 1.0 / f64::from(m) } else { 1.0 };
        self.features
            .iter_mut()
            .for_each(|v| *v = (f64::from(*v) * s) as f32);
        s
    }

    /// A seeded shuffled split: `(train, test)` with `round(len * test_fraction)` test
    /// samples (at least one of each when there are two samples or more).
    pub fn split(&self, test_fraction: f64, seed: u64) -> Result<(Dataset, Dataset), DataError> {
        let perm = permutation(self.len(), &Generator::new(seed))?;
        let n = self.len();
        let mut n_test = (n as f64 * test_fraction).round() as usize;
        if n >= 2 {
            n_test = n_test.clamp(1, n - 1);
        }
        let (test, train) = perm.split_at(n_test.min(n));
        Ok((self.subset(train)?, self.subset(test)?))
    }
}

/// A uniformly random permutation of `0..n` (Fisher-Yates) drawn from `gen`; an error when
/// memory runs out.
pub fn permutation(n: usize, gen: &Generator) -> Result<Vec<usize>, DataError> {
    let mut p: Vec<usize> = Vec::new();
    p.try_reserve_exact(n).map_err(|_| {
        DataError::Csv(format!(
            "out of memory shuffling {n} samples ({} bytes needed)",
            n.saturating_mul(std::mem::size_of::<usize>())
        ))
    })?;
    p.extend(0..n);
    let mut state = gen.lock();
    for i in (1..n).rev() {
        // random64 % (i + 1): the bias is below 2^-40 for any realistic data set.
        let j = (state.random64() % (i as u64 + 1)) as usize;
        p.swap(i, j);
    }
    Ok(p)
}

#[cfg(test)]
#[path = "data_fuzz.rs"]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_digits() {
        let d = Dataset::digits().unwrap();
        assert_eq!(d.len(), 1797);
        assert_eq!(d.n_features, 64);
        assert_eq!(d.n_classes, 10);
        assert_eq!(d.labels[..3], [0, 1, 2]);
        assert_eq!(&d.features[..6], &[0.0, 0.0, 5.0, 13.0, 9.0, 1.0]);
        assert!(d.features.iter().all(|v| (0.0..=16.0).contains(v)));
    }

    #[test]
    fn plain_csv_with_header_and_errors() {
        let d = Dataset::from_csv_bytes(b"a,b,label\n1,2,0\n3.5, 4,2\n", "t").unwrap();
        assert_eq!(d.features, [1.0, 2.0, 3.5, 4.0]);
        assert_eq!(d.labels, [0, 2]);
        assert_eq!(d.n_classes, 3);
        let e = Dataset::from_csv_bytes(b"1,2,0\n3,1\n", "t").unwrap_err();
        assert!(e.to_string().contains("t:2"), "{e}");
        let e = Dataset::from_csv_bytes(b"1,2,0\n3,x,1\n", "t").unwrap_err();
        assert!(e.to_string().contains("not a number"), "{e}");
        let e = Dataset::from_csv_bytes(b"1,2,0.5\n", "t").unwrap_err();
        assert!(e.to_string().contains("non-negative integer"), "{e}");
        assert!(Dataset::from_csv_bytes(b"", "t").is_err());
    }

    #[test]
    fn cells_must_be_finite_and_labels_exact() {
        let err = |csv: &[u8]| Dataset::from_csv_bytes(csv, "t").unwrap_err().to_string();
        for (cell, shown) in [
            ("nan", "\"nan\""),
            ("NaN", "\"NaN\""),
            ("inf", "\"inf\""),
            ("-infinity", "\"-infinity\""),
            ("1e39", "\"1e39\""),
        ] {
            let csv = format!("1,2,0\n3,{cell},1\n");
            assert_eq!(
                err(csv.as_bytes()),
                format!(
                    "t:2: column 2 is {shown}, which is not a finite float32: features must be \
                     finite numbers"
                )
            );
        }
        // Labels are read exactly: no rounding through f32, no cap.
        let d = Dataset::from_csv_bytes(b"1,16777217\n2,3.0\n", "t").unwrap();
        assert_eq!(d.labels, [16777217, 3]);
        assert_eq!(d.n_classes, 16777218);
        for bad in ["-1", "1.5", "1e300", "nan", "x"] {
            let csv = format!("1,0\n2,{bad}\n");
            assert!(
                err(csv.as_bytes()).contains("must be a non-negative integer"),
                "{bad}"
            );
        }
        let d = Dataset::from_csv_bytes(b"1,9223372036854775807\n", "t").unwrap();
        assert_eq!(d.n_classes, 9223372036854775808);
        // Distinct labels, whichever they are.
        let count = |csv: &[u8]| {
            Dataset::from_csv_bytes(csv, "t")
                .unwrap()
                .distinct_labels_up_to_two()
        };
        assert_eq!(count(b"1,0\n2,0\n"), 1);
        assert_eq!(count(b"1,1\n2,1\n"), 1);
        assert_eq!(count(b"1,1\n2,0\n3,5\n"), 2);
    }

    /// `copies` gzip members of `block` each: a cheap bomb (MultiGzDecoder reads them all).
    pub(super) fn gzip_bomb(block: &[u8], copies: usize) -> Vec<u8> {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(block).unwrap();
        let member = gz.finish().unwrap();
        member.repeat(copies)
    }

    #[test]
    fn oversized_input_is_an_error_not_an_abort() {
        // 16 MiB of mostly blank lines from 16 KiB of gzip, against a 1 MiB limit: refused
        // once the limit is reached, after reading only that much.
        let mut block = b"1,0\n2,1\n".to_vec();
        block.resize(1 << 20, b'\n');
        let bomb = gzip_bomb(&block, 16);
        assert!(bomb.len() < 32 << 10, "{}", bomb.len());
        let e = Dataset::from_reader(&bomb[..], "bomb.csv.gz", 1 << 20).unwrap_err();
        assert_eq!(
            e.to_string(),
            "bomb.csv.gz: the data is larger than 1 MiB of CSV text (decompressed); refusing to \
             read more"
        );
        assert_eq!(
            Dataset::from_reader(&bomb[..], "b", 16 << 20)
                .unwrap()
                .len(),
            32
        );
    }

    #[test]
    fn split_is_seeded_and_disjoint() {
        let d = Dataset::digits().unwrap();
        let (tr, te) = d.split(0.2, 7).unwrap();
        assert_eq!((tr.len(), te.len()), (1438, 359));
        let (tr2, te2) = d.split(0.2, 7).unwrap();
        assert_eq!((tr.clone(), te.clone()), (tr2, te2));
        let (tr3, _) = d.split(0.2, 8).unwrap();
        assert_ne!(tr.labels, tr3.labels);
        let mut p = permutation(100, &Generator::new(1)).unwrap();
        p.sort();
        assert_eq!(p, (0..100).collect::<Vec<_>>());
        // More samples than memory can index: an error, not an abort.
        let e = permutation(usize::MAX / 4, &Generator::new(1)).unwrap_err();
        assert!(e.to_string().starts_with("out of memory shuffling"), "{e}");
    }
}

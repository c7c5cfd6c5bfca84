//! The training data: a CSV of numeric features with the integer class label in the last
//! column (optionally gzip-compressed), by default the UCI handwritten digits embedded in the
//! binary (see `data/README.md`).

use std::io::Read;
use std::path::Path;

use switchboard_tensor::Generator;

/// The UCI 8x8 handwritten digits (1797 samples, 64 features 0..16, label 0..9), as
/// scikit-learn ships them (`data/digits.csv.gz`).
pub const DIGITS_CSV_GZ: &[u8] = include_bytes!("../../data/digits.csv.gz");

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
    /// The CSV is malformed (or its gzip stream is).
    #[error("{0}")]
    Csv(String),
}

impl Dataset {
    /// The embedded digits data set.
    pub fn digits() -> Result<Dataset, DataError> {
        Dataset::from_csv_bytes(DIGITS_CSV_GZ, "embedded digits.csv.gz")
    }

    /// Reads a CSV file (gzip-compressed when it starts with the gzip magic bytes, whatever
    /// its name).
    pub fn from_path(path: &Path) -> Result<Dataset, DataError> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| DataError::Io(name.clone(), e))?;
        Dataset::from_csv_bytes(&bytes, &name)
    }

    /// Parses CSV bytes, plain or gzip-compressed. Every row holds the same number of
    /// numeric fields, the last one the label (a non-negative integer); a first row that
    /// does not parse as numbers is taken for a header and skipped. `name` is for messages.
    pub fn from_csv_bytes(bytes: &[u8], name: &str) -> Result<Dataset, DataError> {
        let text: Box<dyn Read + '_> = if bytes.starts_with(&[0x1f, 0x8b]) {
            Box::new(flate2::read::MultiGzDecoder::new(bytes))
        } else {
            Box::new(bytes)
        };
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
            let parsed: Result<Vec<f32>, _> = record.iter().map(str::parse::<f32>).collect();
            let values = match parsed {
                Ok(v) => v,
                Err(_) if i == 0 => continue, // a header row
                Err(e) => {
                    return Err(DataError::Csv(format!(
                        "{name}:{line}: not a number: {e} in {:?}",
                        record.iter().collect::<Vec<_>>()
                    )))
                }
            };
            let d = values.len() - 1;
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
            let label = values[d];
            if !(label >= 0.0 && label.fract() == 0.0 && label < 1e9) {
                return Err(DataError::Csv(format!(
                    "{name}:{line}: the label (last column) must be a non-negative integer, got {label}"
                )));
            }
            features.extend_from_slice(&values[..d]);
            labels.push(label as i64);
        }
        let Some(n_features) = n_features else {
            return Err(DataError::Csv(format!("{name}: no data rows")));
        };
        let n_classes = labels.iter().max().map_or(0, |m| *m as usize + 1);
        Ok(Dataset {
            features,
            labels,
            n_features,
            n_classes,
        })
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when there are no samples.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The samples at `indices`, in that order.
    pub fn subset(&self, indices: &[usize]) -> Dataset {
        let d = self.n_features;
        let mut features = Vec::with_capacity(indices.len() * d);
        for &i in indices {
            features.extend_from_slice(&self.features[i * d..(i + 1) * d]);
        }
        Dataset {
            features,
            labels: indices.iter().map(|&i| self.labels[i]).collect(),
            n_features: d,
            n_classes: self.n_classes,
        }
    }

    /// Scales every feature by `1 / max |value|` over the whole set (digits: 1/16), so that
    /// inputs lie in [-1, 1]. Returns the factor.
    pub fn normalize_max_abs(&mut self) -> f32 {
        let m = self.features.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let s = if m > 0.0 { 1.0 / m } else { 1.0 };
        self.features.iter_mut().for_each(|v| *v *= s);
        s
    }

    /// A seeded shuffled split: `(train, test)` with `round(len * test_fraction)` test
    /// samples (at least one of each when there are two samples or more).
    pub fn split(&self, test_fraction: f64, seed: u64) -> (Dataset, Dataset) {
        let perm = permutation(self.len(), &Generator::new(seed));
        let n = self.len();
        let mut n_test = (n as f64 * test_fraction).round() as usize;
        if n >= 2 {
            n_test = n_test.clamp(1, n - 1);
        }
        let (test, train) = perm.split_at(n_test.min(n));
        (self.subset(train), self.subset(test))
    }
}

/// A uniformly random permutation of `0..n` (Fisher-Yates) drawn from `gen`.
pub fn permutation(n: usize, gen: &Generator) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    let mut state = gen.lock();
    for i in (1..n).rev() {
        // random64 % (i + 1): the bias is below 2^-40 for any realistic data set.
        let j = (state.random64() % (i as u64 + 1)) as usize;
        p.swap(i, j);
    }
    p
}

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
    fn split_is_seeded_and_disjoint() {
        let d = Dataset::digits().unwrap();
        let (tr, te) = d.split(0.2, 7);
        assert_eq!((tr.len(), te.len()), (1438, 359));
        let (tr2, te2) = d.split(0.2, 7);
        assert_eq!((tr.clone(), te.clone()), (tr2, te2));
        let (tr3, _) = d.split(0.2, 8);
        assert_ne!(tr.labels, tr3.labels);
        let mut p = permutation(100, &Generator::new(1));
        p.sort();
        assert_eq!(p, (0..100).collect::<Vec<_>>());
    }
}

//! `switchboard train` end to end, small enough for a debug build: two epochs on the embedded
//! digits, then the same run again to check that the seed fixes every number.

use switchboard_cli::train::{train, OptimizerKind, TrainConfig};

fn config() -> TrainConfig {
    TrainConfig {
        epochs: 2,
        hidden: 32,
        progress: false,
        ..TrainConfig::default()
    }
}

#[test]
fn trains_digits_deterministically() {
    let mut out = Vec::new();
    let report = train(&config(), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!((report.n_train, report.n_test), (1438, 359));
    assert_eq!(report.epochs.len(), 2);
    assert!(report.test_accuracy > 0.8, "{text}");
    assert!(
        report.epochs[1].train_loss < report.epochs[0].train_loss,
        "{text}"
    );
    assert!(text.contains("final test accuracy"), "{text}");

    // The dispatch summary saw the training: the loss, the optimizer's in-place updates and
    // the autograd layer hopping down to the CPU kernels.
    let d = report.dispatch.as_ref().unwrap();
    assert!(
        d.per_operator.contains_key("aten::cross_entropy_loss"),
        "{text}"
    );
    assert!(d.per_operator.contains_key("aten::add_.Tensor"), "{text}");
    assert!(d.per_key.contains_key("CPU"), "{text}");
    assert!(d.layer_hops.values().sum::<u64>() > 0, "{text}");
    assert!(text.contains("dispatch summary"), "{text}");

    // Same seed, same numbers.
    let again = train(&config(), &mut Vec::new()).unwrap();
    assert_eq!(report.epochs.len(), again.epochs.len());
    for (a, b) in report.epochs.iter().zip(&again.epochs) {
        assert_eq!(
            (a.train_loss, a.test_accuracy),
            (b.train_loss, b.test_accuracy)
        );
    }
}

#[test]
fn adam_and_csv_data() {
    // A linearly separable two-class CSV with a header, read from a file.
    let dir = std::env::temp_dir().join(format!("switchboard-train-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("blobs.csv");
    let mut csv = String::from("x,y,label\n");
    for i in 0..100 {
        let t = i as f64 / 100.0;
        csv += &format!("{},{},0\n{},{},1\n", t, 1.0 + t, 1.0 + t, t);
    }
    std::fs::write(&path, csv).unwrap();
    let cfg = TrainConfig {
        data: Some(path),
        epochs: 5,
        hidden: 8,
        optimizer: OptimizerKind::Adam,
        lr: Some(0.05),
        summary: false,
        ..config()
    };
    let report = train(&cfg, &mut Vec::new()).unwrap();
    assert_eq!(report.n_train + report.n_test, 200);
    assert!(report.test_accuracy > 0.9, "{report:?}");
    assert!(report.dispatch.is_none());

    let bad = TrainConfig {
        epochs: 0,
        ..config()
    };
    assert!(train(&bad, &mut Vec::new())
        .unwrap_err()
        .to_string()
        .contains("--epochs"));
    std::fs::remove_dir_all(&dir).ok();
}

/// `switchboard train --autocast bfloat16`: the forward passes run in a CPU autocast region
/// (linear layers in bfloat16, the loss in float32). Five epochs here (a debug build); the
/// default twenty reach 0.955, as in float32.
#[test]
fn trains_in_mixed_precision() {
    use switchboard_cli::layers::{AutocastDtype, LayerOptions};
    let cfg = TrainConfig {
        progress: false,
        summary: false,
        epochs: 5,
        layers: LayerOptions {
            autocast: Some(AutocastDtype::Bfloat16),
            ..LayerOptions::default()
        },
        ..TrainConfig::default()
    };
    let mut out = Vec::new();
    let report = train(&cfg, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(report.test_accuracy >= 0.93, "{text}");
}

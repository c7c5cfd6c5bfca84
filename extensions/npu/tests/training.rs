//! Training the default model (`switchboard train`'s MLP on the embedded digits) on npu gives
//! the accuracy it gives on the CPU: the model and the data move to npu, the forward pass, the
//! loss, backward (AutogradPrivateUse1) and the optimizer's in-place updates run there, natively
//! or through the CPU fallback.

use switchboard::tensor::Device;
use switchboard_cli::train::{train, TrainConfig};

fn run(device: Device) -> switchboard_cli::train::TrainReport {
    let cfg = TrainConfig {
        epochs: 2,
        progress: false,
        summary: device != Device::CPU,
        device,
        ..TrainConfig::default()
    };
    let mut out = Vec::new();
    let report = train(&cfg, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains(&format!("parameters on {device}")), "{text}");
    report
}

#[test]
fn the_default_model_trains_on_npu_as_on_cpu() {
    let npu = switchboard_npu::init().unwrap();
    let backend = switchboard_npu::backend().unwrap();
    backend.reset_stats();
    let on_npu = run(npu);
    let on_cpu = run(Device::CPU);

    // The native kernels sum in another order than the CPU's (mm, sum), so the losses agree
    // to rounding, and the predictions, hence the accuracies, are the same.
    assert_eq!(on_npu.test_accuracy, on_cpu.test_accuracy);
    assert!(on_npu.test_accuracy > 0.9, "{}", on_npu.test_accuracy);
    for (n, c) in on_npu.epochs.iter().zip(&on_cpu.epochs) {
        assert!(
            (n.train_loss - c.train_loss).abs() < 1e-4 * c.train_loss.max(1.0),
            "epoch {}: npu loss {} vs cpu {}",
            n.epoch,
            n.train_loss,
            c.train_loss
        );
        assert_eq!(n.test_accuracy, c.test_accuracy, "epoch {}", n.epoch);
    }

    // It ran on npu: the dispatcher chose PrivateUse1 kernels and the autograd layer hopped
    // from AutogradPrivateUse1 (AutogradCPU only sees the minibatch indices' moves to npu), and the backend's own counters saw natives and fallbacks.
    let d = on_npu.dispatch.as_ref().unwrap();
    assert!(d.per_key.contains_key("PrivateUse1"), "{:?}", d.per_key);
    assert!(
        d.layer_hops
            .keys()
            .any(|(from, _)| from == "AutogradPrivateUse1"),
        "{:?}",
        d.layer_hops
    );
    let stats = backend.stats();
    assert!(stats.native.contains_key("aten::mm"), "{stats:?}");
    assert!(
        stats.fallback.contains_key("aten::_log_softmax"),
        "{stats:?}"
    );
}

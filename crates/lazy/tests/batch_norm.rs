//! `native_batch_norm` in training mode updates its running statistics on a lazy device as in
//! eager mode (Note [The running statistics of native_batch_norm]).

use switchboard_lazy as lazy;
use switchboard_ops as ops;
use switchboard_tensor::{ScalarType, Tensor};

fn input() -> Tensor {
    let v: Vec<f32> = (0..24).map(|i| ((i * 7) % 11) as f32 - 3.0).collect();
    Tensor::from_vec(v, &[2, 3, 2, 2]).unwrap()
}

fn stats() -> (Tensor, Tensor) {
    (
        Tensor::from_vec(vec![0.5f32, -1.0, 2.0], &[3]).unwrap(),
        Tensor::from_vec(vec![1.0f32, 2.0, 0.5], &[3]).unwrap(),
    )
}

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

#[test]
fn training_updates_the_running_statistics_as_eager_does() {
    let lz = |t: &Tensor| ops::to_device(t, lazy::DEVICE, ScalarType::Float).unwrap();
    let w = Tensor::from_vec(vec![1.5f32, 0.5, -1.0], &[3]).unwrap();
    let b = Tensor::from_vec(vec![0.1f32, 0.2, 0.3], &[3]).unwrap();
    for training in [true, false] {
        let (rm, rv) = stats();
        let want = ops::native_batch_norm(
            &input(),
            Some(&w),
            Some(&b),
            Some(&rm),
            Some(&rv),
            training,
            0.1,
            1e-5,
        )
        .unwrap();
        let (lrm, lrv) = (lz(&stats().0), lz(&stats().1));
        let got = ops::native_batch_norm(
            &lz(&input()),
            Some(&lz(&w)),
            Some(&lz(&b)),
            Some(&lrm),
            Some(&lrv),
            training,
            0.1,
            1e-5,
        )
        .unwrap();
        assert!(lazy::default_backend().pending_calls() > 0, "captured");
        assert_eq!(values(&got.0), values(&want.0), "training={training}");
        assert_eq!(values(&got.1), values(&want.1));
        assert_eq!(values(&got.2), values(&want.2));
        assert_eq!(
            values(&lrm),
            values(&rm),
            "running_mean, training={training}"
        );
        assert_eq!(
            values(&lrv),
            values(&rv),
            "running_var, training={training}"
        );
    }
    // Twice in one graph: the second call reads the first one's update.
    let (rm, rv) = stats();
    let (lrm, lrv) = (lz(&rm), lz(&rv));
    for _ in 0..2 {
        ops::native_batch_norm(&input(), None, None, Some(&rm), Some(&rv), true, 0.1, 1e-5)
            .unwrap();
        ops::native_batch_norm(
            &lz(&input()),
            None,
            None,
            Some(&lrm),
            Some(&lrv),
            true,
            0.1,
            1e-5,
        )
        .unwrap();
    }
    assert_eq!(values(&lrm), values(&rm));
    assert_eq!(values(&lrv), values(&rv));
}

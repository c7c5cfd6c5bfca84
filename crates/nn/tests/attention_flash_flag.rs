//! The global `enable_flash_sdp` flag (`set_flash_sdp_enabled`) and the autograd node of each
//! attention branch. A file of its own: the flag is process-wide, as PyTorch's is, and turning
//! it off while other tests run would send them down the math path.

use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_nn::{
    scaled_dot_product_attention as sdpa, sdp_backend, set_flash_sdp_enabled, SdpBackend,
};
use switchboard_tensor::Tensor;

#[test]
fn the_flag_turns_flash_off_and_each_branch_has_its_node() {
    let v: Vec<f32> = (0..2 * 4 * 16 * 8)
        .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
        .collect();
    let q = Tensor::from_vec(v, &[2, 4, 16, 8]).unwrap();
    let ql = q.detach().requires_grad_(true).unwrap();
    let node = |t: &Tensor| t.grad_fn().unwrap().name().to_string();

    assert_eq!(
        sdp_backend(&q, &q, &q, None, 0.0, false, false).unwrap(),
        SdpBackend::Flash
    );
    let out = sdpa(&ql, &ql, &ql, None, 0.0, true, None, false).unwrap();
    assert_eq!(node(&out), "ScaledDotProductFlashAttentionForCpuBackward0");

    assert!(set_flash_sdp_enabled(false));
    assert_eq!(
        sdp_backend(&q, &q, &q, None, 0.0, false, false).unwrap(),
        SdpBackend::Math
    );
    let math = sdpa(&ql, &ql, &ql, None, 0.0, true, None, false).unwrap();
    assert!(!set_flash_sdp_enabled(true));
    assert_eq!(node(&math), "UnsafeViewBackward0");
    assert_eq!(
        sdp_backend(&q, &q, &q, None, 0.0, false, false).unwrap(),
        SdpBackend::Flash
    );
}

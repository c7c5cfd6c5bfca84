//! The cast cache (Note [Autocast cast cache]), alone in its process: the cache is process-wide.

use switchboard_autocast::{autocast, autocast_cache_len, autocast_with, AutocastOptions};
use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_dispatcher::{DispatchError, Result};
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{Device, ScalarType};

#[test]
fn weights_are_cast_once_per_region() -> Result<()> {
    let x = ops::ones(&[2, 3])?;
    let w = ops::ones(&[4, 3])?.requires_grad_(true)?;
    let plain = ops::ones(&[4, 3])?; // no grad: never cached
    autocast(Device::CPU, ScalarType::BFloat16, || {
        let y1 = ops::linear(&x, &w)?;
        assert_eq!(autocast_cache_len(), 1);
        let y2 = ops::linear(&x, &w)?;
        ops::linear(&x, &plain)?;
        assert_eq!(autocast_cache_len(), 1);
        // Nested regions share the cache; leaving an inner one keeps it.
        autocast(Device::CPU, ScalarType::BFloat16, || ops::linear(&x, &w))?;
        assert_eq!(autocast_cache_len(), 1);
        // Both uses reach the weight through one cast node: its gradient is the sum.
        ops::add(&y1.sum()?, &y2.sum()?)?.backward()?;
        assert_eq!(w.grad().unwrap().to_vec::<f32>()?, vec![4.0; 12]);
        Ok::<_, DispatchError>(())
    })?;
    assert_eq!(autocast_cache_len(), 0); // emptied when the outermost region ends
                                         // A non-leaf (the result of an operator) and float32 targets are not cached; nor casts in
                                         // a region with the cache off.
    autocast_with(
        Device::CPU,
        AutocastOptions::default().cache_enabled(false),
        || ops::linear(&x, &w),
    )?;
    assert_eq!(autocast_cache_len(), 0);
    autocast(Device::CPU, ScalarType::BFloat16, || {
        let nonleaf = ops::mul(&w, &w)?;
        ops::linear(&x, &nonleaf)?;
        ops::mse_loss(
            &ops::ones(&[2])?.to(ScalarType::BFloat16)?,
            &ops::ones(&[2])?,
        )?;
        assert_eq!(autocast_cache_len(), 0);
        Ok::<_, DispatchError>(())
    })?;
    Ok(())
}

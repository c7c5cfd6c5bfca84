//! Autocast regions are per thread, and regions ended out of order leave each device's state
//! as it was before them (Note [Autocast regions dropped out of order]).

use std::sync::Barrier;

use switchboard_autocast::{
    autocast_cache_len, get_autocast_dtype, is_autocast_cache_enabled, is_autocast_enabled,
    AutocastGuard, AutocastOptions,
};
use switchboard_cpu as _;
use switchboard_keys::DeviceType;
use switchboard_tensor::{Device, ScalarType};

const CPU: DeviceType = DeviceType::CPU;
const CUDA: DeviceType = DeviceType::CUDA;

#[test]
fn regions_ended_out_of_order_restore_the_state_before_them() {
    std::thread::spawn(|| {
        let outer = AutocastGuard::new(Device::CPU, ScalarType::BFloat16).unwrap();
        let inner = AutocastGuard::new(Device::CPU, ScalarType::Half).unwrap();
        drop(outer);
        // The inner region is still in force.
        assert!(is_autocast_enabled(CPU));
        assert_eq!(get_autocast_dtype(CPU).unwrap(), ScalarType::Half);
        drop(inner);
        assert!(!is_autocast_enabled(CPU), "autocast was left on");
        assert_eq!(get_autocast_dtype(CPU).unwrap(), ScalarType::BFloat16);

        // Regions of two devices: ending the CPU one first turns CPU autocast off at once,
        // since no region inside it is a CPU one; the cache switch goes to the inner region.
        let cpu = AutocastGuard::with_options(
            Device::CPU,
            AutocastOptions::default().cache_enabled(false),
        )
        .unwrap();
        let cuda = AutocastGuard::new(Device::new(CUDA), ScalarType::Half).unwrap();
        assert!(is_autocast_cache_enabled());
        drop(cpu);
        assert!(!is_autocast_enabled(CPU));
        assert!(is_autocast_enabled(CUDA));
        assert!(
            is_autocast_cache_enabled(),
            "the CUDA region's cache switch"
        );
        drop(cuda);
        assert!(!is_autocast_enabled(CUDA));
        assert!(is_autocast_cache_enabled());
        assert_eq!(autocast_cache_len(), 0);
    })
    .join()
    .unwrap();
}

#[test]
fn interleaved_regions_on_two_threads_keep_each_threads_state() {
    // Each thread records (enabled, dtype) of CPU autocast at each step and reaches every
    // barrier, so a wrong state fails the assertions below rather than stalling a thread.
    let state = || (is_autocast_enabled(CPU), get_autocast_dtype(CPU).unwrap());
    let barrier = Barrier::new(2);
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| {
            let mut seen = Vec::new();
            let region = AutocastGuard::new(Device::CPU, ScalarType::BFloat16).unwrap();
            barrier.wait(); // 1: A's region is live
            barrier.wait(); // 2: B's region is live
            seen.push(state());
            drop(region);
            seen.push(state());
            barrier.wait(); // 3: A's region ended
            barrier.wait(); // 4: B's region ended
            seen.push(state());
            seen
        });
        let b = s.spawn(|| {
            let mut seen = Vec::new();
            barrier.wait(); // 1
            seen.push(state());
            let region = AutocastGuard::new(Device::CPU, ScalarType::Half).unwrap();
            barrier.wait(); // 2
            barrier.wait(); // 3
            seen.push(state());
            drop(region);
            seen.push(state());
            barrier.wait(); // 4
            seen
        });
        (a.join().unwrap(), b.join().unwrap())
    });
    let (bf16, f16) = (ScalarType::BFloat16, ScalarType::Half);
    assert_eq!(a, [(true, bf16), (false, bf16), (false, bf16)]);
    assert_eq!(b, [(false, bf16), (true, f16), (false, bf16)]);
}

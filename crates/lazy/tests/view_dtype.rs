//! `view(dtype)` on lazy tensors (functional tensors, whose views of another dtype are
//! `view_copy.dtype` values: Note [Lazy tensors are functional]): the view reads its
//! base's bytes as another dtype, writes through it are seen by the base and the other way
//! round, pending or materialised, with lazy mode on and off, as on the CPU.

mod common;

use common::*;
use switchboard_lazy as lazy;
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{Device, ScalarType, Tensor};

/// The same program on a CPU tensor and on a lazy one: a pending base, its views as int32,
/// int16 and int64 (smaller and larger elements), writes through a view and through the base.
fn program(x: &Tensor) -> Vec<Tensor> {
    let base = ops::mul_scalar(x, 2).unwrap(); // pending on lazy
    let bits = base.view_dtype(ScalarType::Int).unwrap();
    let halves = base.view_dtype(ScalarType::Short).unwrap();
    let rows = ops::slice_with(&base, ops::SliceOptions::default().dim(0).start(1)).unwrap();
    let longs = rows.view_dtype(ScalarType::Long).unwrap(); // offset 2 floats = 1 long
    let longs = longs.view_dtype(ScalarType::Long).unwrap();
    let bits_plus = ops::add_scalar(&bits, 1).unwrap();
    // A write through the int32 view: each float of the base moves by one ulp.
    ops::add_scalar_(&bits, 1).unwrap();
    let nudged = ops::mul_scalar(&base, 1).unwrap();
    // A write through the base: every view sees it.
    ops::mul_scalar_(&base, 4).unwrap();
    vec![bits_plus, nudged, halves, longs, bits, base]
}

#[test]
fn views_of_another_dtype_read_and_write_the_same_bytes() {
    let d = own_device();
    let x = f32s(&[1.0, -2.5, 3.0, 0.5, -0.0, 7.0], &[3, 2]);
    let cpu = program(&x);
    for mode in [true, false] {
        let _m = lazy::LazyModeGuard::new(mode);
        let lz_out = program(&d.lz(&x));
        for (k, (c, l)) in cpu.iter().zip(&lz_out).enumerate() {
            assert_eq!(l.device(), d.device());
            assert_eq!(
                (c.sizes(), c.strides(), c.storage_offset(), c.dtype()),
                (l.sizes(), l.strides(), l.storage_offset(), l.dtype()),
                "output {k}, lazy mode {mode}"
            );
            let l = to(l, Device::CPU);
            assert!(
                ops::equal(c, &l).unwrap(),
                "output {k}, lazy mode {mode}: {c} vs {l}"
            );
        }
    }
}

#[test]
fn a_dtype_view_of_materialised_data_and_its_errors() {
    let d = own_device();
    let x = d.lz(&f32s(&[1.0, -1.0], &[2]));
    d.sync().unwrap();
    let bits = x.view_dtype(ScalarType::Int).unwrap();
    assert!(bits.is_alias_of(&x));
    assert_eq!(
        bits.to_vec::<i32>().unwrap(),
        [1.0f32.to_bits() as i32, (-1.0f32).to_bits() as i32]
    );
    // The geometry errors are eager's (PyTorch's), at the call.
    let odd = d.lz(&f32s(&[1.0, 2.0, 3.0], &[3]));
    let e = odd.view_dtype(ScalarType::Double).unwrap_err().to_string();
    let want = f32s(&[1.0, 2.0, 3.0], &[3])
        .view_dtype(ScalarType::Double)
        .unwrap_err()
        .to_string();
    assert_eq!(e, want);
    assert!(e.contains("self.size(-1) must be divisible by 2"), "{e}");
}

//! `cpu:0` is the CPU and `meta:0` is meta: `torch.device("cpu:0")` keeps its index, but a
//! tensor created there reports `cpu` (PyTorch's CPU and meta allocators tag storages with the
//! index-less device), so it mixes with every other CPU tensor (Note [The devices of CPU and
//! meta tensors]).

use switchboard::ops;
use switchboard::prelude::*;
use switchboard::tensor::DatalessTensor;

#[test]
fn tensors_created_on_cpu_0_and_meta_0_are_on_cpu_and_meta() {
    for (text, plain) in [("cpu:0", Device::CPU), ("meta:0", Device::META)] {
        let indexed: Device = text.parse().unwrap();
        assert_eq!(indexed.to_string(), text, "the device keeps its index");
        assert_ne!(indexed, plain);
        let made = [
            ops::ones_with(&[2, 3], ops::OnesOptions::default().device(indexed)).unwrap(),
            ops::zeros_with(&[2, 3], ops::ZerosOptions::default().device(indexed)).unwrap(),
            ops::_to_copy_with(
                &ops::ones(&[2, 3]).unwrap(),
                ops::ToCopyOptions::default().device(indexed),
            )
            .unwrap(),
            Tensor::zeros_on(&[2, 3], ScalarType::Float, indexed).unwrap(),
            Tensor::empty_strided(&[2, 3], &[3, 1], ScalarType::Float, indexed).unwrap(),
        ];
        let other = ops::ones_with(&[2, 3], ops::OnesOptions::default().device(plain)).unwrap();
        for t in &made {
            assert_eq!(t.device(), plain, "{text}");
            assert_eq!(t.storage().device(), plain, "{text}");
            // Mixes with tensors made on the index-less device, in every order.
            assert_eq!(ops::add(t, &other).unwrap().device(), plain);
            assert_eq!(ops::mm(&other, &t.t().unwrap()).unwrap().device(), plain);
        }
    }
    let meta0 = Device::with_index(DeviceType::Meta, 0);
    let spec = DatalessTensor {
        sizes: &[2],
        strides: &[1],
        storage_offset: 0,
        dtype: ScalarType::Float,
        device: meta0,
        key_set: meta0.dense_key_set().unwrap(),
        storage_nbytes: 8,
        payload_tag: 0,
    };
    assert_eq!(
        Tensor::without_data(&spec, None, None).unwrap().device(),
        Device::META
    );
}

//! End-to-end uses of the public API, as the dispatcher and kernels will use it.

use std::sync::Arc;
use switchboard_tensor::RawOps;

use switchboard_keys::{DispatchKey, DispatchKeySet};
use switchboard_tensor::{
    Access, Device, MemoryFormat, Scalar, ScalarType, Tensor, TensorBuilder, TensorError,
    VersionCounter,
};

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn handles_are_send_sync_and_cheap() {
    assert_send_sync::<Tensor>();
    assert_send_sync::<switchboard_tensor::Storage>();
    // One pointer.
    assert_eq!(std::mem::size_of::<Tensor>(), std::mem::size_of::<usize>());
    assert_eq!(
        std::mem::size_of::<Option<Tensor>>(),
        std::mem::size_of::<usize>()
    );
}

#[test]
fn concurrent_readers_and_a_writer_never_overlap() {
    let t = Tensor::zeros(&[64], ScalarType::Long).unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            let t = t.clone();
            s.spawn(move || {
                for _ in 0..200 {
                    if let Ok(d) = t.data::<i64>() {
                        // A writer fills all elements at once: a reader sees them all equal.
                        assert!(d.iter().all(|x| *x == d[0]));
                    }
                }
            });
        }
        let w = t.clone();
        s.spawn(move || {
            for i in 0..200 {
                if let Ok(mut d) = w.data_mut::<i64>() {
                    d.fill(i);
                }
            }
        });
    });
}

#[test]
fn dispatcher_style_tensors_with_arbitrary_keys() {
    let t = Tensor::zeros(&[2], ScalarType::Float).unwrap();
    let batched = t.with_extra_keys(DispatchKeySet::from_keys(&[
        DispatchKey::FuncTorchBatched,
        DispatchKey::Python,
    ]));
    assert_eq!(
        batched.key_set().highest_priority_type_id(),
        DispatchKey::FuncTorchBatched
    );
    let only = TensorBuilder::new(t.storage().clone(), ScalarType::Float)
        .sizes(&[2])
        .key_set(DispatchKeySet::from_key(DispatchKey::PrivateUse1))
        .payload(Arc::new(vec![1u8, 2, 3]))
        .build()
        .unwrap();
    assert_eq!(only.key_set().to_string(), "DispatchKeySet(PrivateUse1)");
    assert_eq!(only.payload_as::<Vec<u8>>().unwrap(), &[1, 2, 3]);
    assert!(only.payload_as::<String>().is_none());
    let replaced = only.with_payload(Arc::new("x".to_string()));
    assert_eq!(replaced.payload_as::<String>().unwrap(), "x");
    // Shallow copies share storage and version counter, not identity.
    assert!(replaced.is_alias_of(&t) && !Tensor::ptr_eq(&replaced, &t));
    replaced.bump_version();
    assert_eq!(t.version(), 1);
}

#[test]
fn in_place_kernel_on_a_view() {
    // x[:, 1] += 10 through an Access on the view (same storage read and written).
    let x = Tensor::arange(0, 6, 1, Some(ScalarType::Int))
        .unwrap()
        .view(&[3, 2])
        .unwrap();
    let col = x.select(1, 1).unwrap();
    {
        let access = Access::new(&[&col], &[&col]).unwrap();
        assert!(access.can_write(&x));
        let p = col.mut_data_ptr_as::<i32>().unwrap();
        for i in 0..col.sizes()[0] {
            // SAFETY: the access holds the storage exclusively; index i < size with the
            // view's stride is in bounds.
            unsafe { *p.add((i * col.strides()[0]) as usize) += 10 };
        }
        col.bump_version();
    }
    assert_eq!(x.to_vec::<i32>().unwrap(), [0, 11, 2, 13, 4, 15]);
    assert_eq!(x.version(), 1);
    // A held read borrow blocks the write, without blocking the thread.
    let r = x.data::<i32>().unwrap();
    assert!(matches!(
        Access::new(&[], &[&col]),
        Err(TensorError::StorageBorrowed(_))
    ));
    drop(r);
}

#[test]
fn meta_and_other_devices_carry_metadata_only() {
    let m = Tensor::empty_with_format(
        &[2, 3, 4, 5],
        ScalarType::Half,
        Device::META,
        MemoryFormat::ChannelsLast,
    )
    .unwrap();
    assert_eq!(m.strides(), &[60, 1, 15, 3]);
    assert!(m.data::<half::f16>().is_err());
    let v = m.permute(&[0, 2, 3, 1]).unwrap();
    assert!(v.is_contiguous());
    assert_eq!(
        m.to_string(),
        "tensor(..., device='meta', size=(2, 3, 4, 5), dtype=torch.float16)"
    );
    let c = Tensor::empty_on(&[3], ScalarType::Float, "cuda:1".parse().unwrap()).unwrap();
    assert_eq!(c.device().index, Some(1));
    assert!(matches!(c.to_vec::<f32>(), Err(TensorError::NoData { .. })));
    assert_eq!(
        c.to_vec::<f32>().unwrap_err().to_string(),
        "Cannot access data of a tensor on device 'cuda:1': it has no storage data"
    );
}

#[test]
fn scalars_and_items() {
    let t = Tensor::scalar_tensor(Scalar::Bool(true), ScalarType::Bool);
    assert_eq!(t.item().unwrap(), Scalar::Bool(true));
    assert_eq!(t.to_string(), "tensor(True)");
    let w = Tensor::wrapped_scalar(1.5);
    assert!(w.is_wrapped_number() && w.dim() == 0);
    assert_eq!(w.to_string(), "tensor(1.5000, dtype=torch.float64)");
    let v = VersionCounter::new();
    let t2 = t.to_builder().version_counter(v.clone()).build().unwrap();
    t2.bump_version();
    assert_eq!(v.current(), 1);
    assert_eq!(t.version(), 0);
}

#[test]
fn autograd_metadata_slot_is_per_tensor() {
    let t = Tensor::zeros(&[1], ScalarType::Float).unwrap();
    let v = t.view(&[1]).unwrap();
    t.set_autograd_meta(Arc::new("grad_fn")).unwrap();
    assert!(v.autograd_meta().is_none());
    assert_eq!(
        t.autograd_meta().unwrap().downcast_ref::<&str>(),
        Some(&"grad_fn")
    );
}

//! `cat` is structured (`cat.out` `structured: True`, as in PyTorch 2.15): its Meta kernel is
//! its meta function, whose geometry is PyTorch's (recorded from torch 2.15 on the meta
//! device); `stack` and `stack.out` are composite over it.

mod common;

use switchboard_dispatcher::Result;
use switchboard_ops as ops;
use switchboard_tensor::{Device, ScalarType as S, Tensor};

use switchboard_cpu as _;
use switchboard_meta as _;

fn meta(sizes: &[i64], dtype: S) -> Tensor {
    Tensor::empty_on(sizes, dtype, Device::META).unwrap()
}

fn geometry(t: &Tensor) -> (Vec<i64>, Vec<i64>, S) {
    (t.sizes().to_vec(), t.strides().to_vec(), t.dtype())
}

#[test]
fn meta_kernels_are_meta_functions() {
    common::assert_meta_kernels_are_meta_functions(["aten::cat", "aten::cat.out"]);
}

#[test]
fn geometry_as_pytorch() -> Result<()> {
    let cl = common::channels_last(&[2, 3, 4, 5]);
    assert_eq!(
        geometry(&ops::cat_with(
            &[cl.clone(), cl.clone()],
            ops::CatOptions::default().dim(1)
        )?),
        (vec![2, 6, 4, 5], vec![120, 1, 30, 6], S::Float)
    );
    let mixed = [cl, meta(&[2, 3, 4, 5], S::Float)];
    assert_eq!(
        geometry(&ops::cat_with(&mixed, ops::CatOptions::default().dim(1))?),
        (vec![2, 6, 4, 5], vec![120, 20, 5, 1], S::Float)
    );
    // A skipped [0] tensor still takes part in the promotion.
    let skipped = [meta(&[0], S::Double), meta(&[2, 3], S::Int)];
    assert_eq!(
        geometry(&ops::cat_with(&skipped, ops::CatOptions::default().dim(1))?),
        (vec![2, 3], vec![3, 1], S::Double)
    );
    let four = vec![meta(&[2, 3], S::Float); 4];
    assert_eq!(
        geometry(&ops::stack_with(
            &four,
            ops::StackOptions::default().dim(1)
        )?),
        (vec![2, 4, 3], vec![12, 3, 1], S::Float)
    );
    let out = meta(&[0], S::Double);
    let r = ops::stack_out(&four[..2], &out)?;
    assert_eq!(geometry(&r), (vec![2, 2, 3], vec![6, 3, 1], S::Double));
    Ok(())
}

#[test]
fn errors_are_the_same_on_meta_and_cpu() {
    for device in [Device::META, Device::CPU] {
        let x = Tensor::zeros_on(&[2, 3], S::Float, device).unwrap();
        let long = Tensor::zeros_on(&[0], S::Long, device).unwrap();
        assert_eq!(
            ops::cat_out(&[x.clone(), x.clone()], &long)
                .unwrap_err()
                .to_string(),
            "torch.cat(): input types can't be cast to the desired output type Long",
            "{device}"
        );
        let y = Tensor::zeros_on(&[3, 2], S::Float, device).unwrap();
        assert_eq!(
            ops::cat_with(&[x.clone(), y], ops::CatOptions::default().dim(1))
                .unwrap_err()
                .to_string(),
            "Sizes of tensors must match except in dimension 1. Expected size 2 but got size 3 \
             for tensor number 1 in the list.",
            "{device}"
        );
    }
}

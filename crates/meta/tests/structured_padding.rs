//! Reflection and replication padding: structured where PyTorch 2.15 marks them
//! (`reflection_pad1d/3d`, `replication_pad2d/3d` and the reflection backwards of 1 and 3
//! dims), and the others' Meta kernels named meta functions (`Meta: structured::NAME`):
//! every Meta kernel of the family is a meta function, never a CPU kernel run without data.

mod common;

use switchboard_ops as ops;
use switchboard_tensor::{Device, MemoryFormat, ScalarType, Tensor};

use switchboard_cpu as _;
use switchboard_meta as _;

#[test]
fn meta_kernels_are_meta_functions() {
    let mut names = Vec::new();
    for pad in [
        "reflection_pad1d",
        "reflection_pad2d",
        "reflection_pad3d",
        "replication_pad2d",
        "replication_pad3d",
    ] {
        names.push(format!("aten::{pad}"));
        names.push(format!("aten::{pad}_backward"));
    }
    for name in [
        "reflection_pad1d",
        "reflection_pad3d",
        "replication_pad2d",
        "replication_pad3d",
    ] {
        names.push(format!("aten::{name}.out"));
    }
    for name in ["reflection_pad1d_backward", "reflection_pad3d_backward"] {
        names.push(format!("aten::{name}.grad_input"));
    }
    common::assert_meta_kernels_are_meta_functions(names);
}

/// Geometry recorded from torch 2.15's CPU kernels (its Python meta functions give contiguous
/// results instead): a channels-last input gives a channels-last result; Bool passes the
/// reflection pads' meta functions, not the replication pads' (as in torch 2.15's).
#[test]
fn geometry_and_bool_as_pytorch() {
    let x = Tensor::empty_with_format(
        &[2, 3, 4, 5],
        ScalarType::Float,
        Device::META,
        MemoryFormat::ChannelsLast,
    )
    .unwrap();
    let y = ops::reflection_pad2d(&x, &[1, 2, 3, 0]).unwrap();
    assert_eq!(
        (y.sizes(), y.strides()),
        (&[2i64, 3, 7, 8][..], &[168i64, 1, 24, 3][..])
    );
    let y = ops::replication_pad2d(&x, &[1, 2, 3, 0]).unwrap();
    assert_eq!(
        (y.sizes(), y.strides()),
        (&[2i64, 3, 7, 8][..], &[168i64, 1, 24, 3][..])
    );
    let x3 = Tensor::empty_with_format(
        &[2, 3, 4, 5, 6],
        ScalarType::Float,
        Device::META,
        MemoryFormat::ChannelsLast3d,
    )
    .unwrap();
    let y = ops::replication_pad3d(&x3, &[1; 6]).unwrap();
    assert_eq!(y.strides(), &[1008, 1, 168, 24, 3]);
    let g = Tensor::empty_with_format(
        &[2, 3, 6, 7, 8],
        ScalarType::Float,
        Device::META,
        MemoryFormat::ChannelsLast3d,
    )
    .unwrap();
    let gi = ops::reflection_pad3d_backward(&g, &x3, &[1; 6]).unwrap();
    assert_eq!(gi.strides(), &[360, 1, 90, 18, 3]);
    let b = Tensor::empty_on(&[1, 3], ScalarType::Bool, Device::META).unwrap();
    assert_eq!(ops::reflection_pad1d(&b, &[1, 1]).unwrap().sizes(), &[1, 5]);
    let b = Tensor::empty_on(&[1, 3, 3], ScalarType::Bool, Device::META).unwrap();
    assert_eq!(
        ops::replication_pad2d(&b, &[1, 1, 1, 1])
            .unwrap_err()
            .to_string(),
        "\"replication_pad2d\" not implemented for 'Bool'"
    );
}

/// On the CPU too: a channels-last input gives the same values in a channels-last result.
#[test]
fn channels_last_on_the_cpu() {
    let x = ops::randn(&[2, 3, 4, 5, 6]).unwrap();
    let x3 = ops::clone_with(
        &x,
        ops::CloneOptions::default().memory_format(MemoryFormat::ChannelsLast3d),
    )
    .unwrap();
    let (a, b) = (
        ops::replication_pad3d(&x, &[1, 2, 0, 1, 2, 0]).unwrap(),
        ops::replication_pad3d(&x3, &[1, 2, 0, 1, 2, 0]).unwrap(),
    );
    assert!(b.is_contiguous_as(MemoryFormat::ChannelsLast3d));
    assert_eq!(a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
}

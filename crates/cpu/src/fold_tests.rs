//! Sliding blocks against values recorded from PyTorch 2.15 (`torch.ops.aten` on the same
//! inputs): padding, dilation and stride in `im2col`, overlapping blocks summed by `col2im`.

use switchboard_tensor::Tensor;

use super::*;

fn ramp(shape: &[i64]) -> Tensor {
    let n: i64 = shape.iter().product();
    Tensor::from_vec((0..n).map(|v| v as f32).collect(), shape).unwrap()
}

#[test]
fn im2col_as_pytorch() {
    let y = im2col(&ramp(&[1, 2, 3, 4]), &[2, 2], &[1, 2], &[1, 0], &[2, 1]).unwrap();
    assert_eq!(y.sizes(), [1, 8, 4]);
    assert_eq!(
        y.to_vec::<f32>().unwrap(),
        [
            0.0, 0.0, 4.0, 5.0, 0.0, 0.0, 6.0, 7.0, 0.0, 1.0, 8.0, 9.0, 2.0, 3.0, 10.0, 11.0, 0.0,
            0.0, 16.0, 17.0, 0.0, 0.0, 18.0, 19.0, 12.0, 13.0, 20.0, 21.0, 14.0, 15.0, 22.0, 23.0
        ]
    );
}

#[test]
fn col2im_sums_overlaps_as_pytorch() {
    let y = col2im(
        &ramp(&[1, 8, 6]),
        &[3, 4],
        &[2, 2],
        &[1, 1],
        &[0, 0],
        &[1, 1],
    )
    .unwrap();
    assert_eq!(y.sizes(), [1, 2, 3, 4]);
    assert_eq!(
        y.to_vec::<f32>().unwrap(),
        [
            0.0, 7.0, 9.0, 8.0, 15.0, 44.0, 48.0, 31.0, 15.0, 37.0, 39.0, 23.0, 24.0, 55.0, 57.0,
            32.0, 63.0, 140.0, 144.0, 79.0, 39.0, 85.0, 87.0, 47.0
        ]
    );
}

#[test]
fn bad_shapes_give_pytorchs_errors() {
    let err = im2col(&ramp(&[2, 3, 5, 6]), &[7, 2], &[1, 1], &[0, 0], &[1, 1])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "Given input with spatial size (5, 6), kernel_size=(7, 2), dilation=(1, 1), \
         padding=(0, 0), calculated shape of the array of sliding blocks as (-1, 5), but its \
         components must be at least one."
    );
    let err = col2im(
        &ramp(&[2, 13, 20]),
        &[5, 6],
        &[2, 2],
        &[1, 1],
        &[0, 0],
        &[1, 1],
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        "Expected size of input's dimension 1 to be divisible by the product of kernel_size, \
         but got input.size(1)=13 and kernel_size=(2, 2)."
    );
}

//! Tests of advanced indexing and the scatter kernels (values checked against PyTorch 2.15).

use super::*;
use switchboard_tensor::{Device, RawOps, Scalar, ScalarType, Tensor};

fn ar(n: i64, sizes: &[i64]) -> Tensor {
    Tensor::arange(0, n, 1, Some(ScalarType::Float))
        .unwrap()
        .view(sizes)
        .unwrap()
}

fn longs(v: &[i64]) -> Tensor {
    Tensor::from_slice(v, &[v.len() as i64]).unwrap()
}

fn floats(v: &[f32]) -> Tensor {
    Tensor::from_slice(v, &[v.len() as i64]).unwrap()
}

fn err(r: Result<Tensor, switchboard_tensor::TensorError>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn index_layouts() {
    let x = ar(60, &[3, 4, 5]);
    // Separated by a slice: the broadcast dimension leads.
    let r = index(&x, &[Some(longs(&[0, 2])), None, Some(longs(&[1, 4]))]).unwrap();
    assert_eq!(r.sizes(), &[2, 4]);
    assert_eq!(
        r.to_vec::<f32>().unwrap(),
        [1., 6., 11., 16., 44., 49., 54., 59.]
    );
    // Adjacent: in place of the indexed dimensions, broadcast [2, 1] with [3].
    let i = longs(&[0, 2]).view(&[2, 1]).unwrap();
    let r = index(&x, &[None, Some(i), Some(longs(&[1, 3, -1]))]).unwrap();
    assert_eq!(
        (r.sizes(), r.strides()),
        (&[3i64, 2, 3][..], &[6i64, 3, 1][..])
    );
    assert_eq!(r.to_vec::<f32>().unwrap()[..6], [1., 3., 4., 11., 13., 14.]);
    // A permuted self: the result follows its layout, as PyTorch's TensorIterator does.
    let p = x.permute(&[2, 0, 1]).unwrap();
    let r = index(&p, &[None, Some(longs(&[0, 2]).view(&[2, 1]).unwrap())]).unwrap();
    assert_eq!(
        (r.sizes(), r.strides()),
        (&[5i64, 2, 1, 4][..], &[1i64, 5, 5, 10][..])
    );
    // A boolean mask covers its dimensions.
    let m = Tensor::from_vec(vec![true, false, true], &[3]).unwrap();
    let r = index(&x, &[Some(m)]).unwrap();
    assert_eq!(r.sizes(), &[2, 4, 5]);
    assert_eq!(r.to_vec::<f32>().unwrap()[20], 40.);
}

#[test]
fn index_errors() {
    let x = ar(12, &[3, 4]);
    assert_eq!(
        err(index(&x, &[None, Some(longs(&[4]))])),
        "index 4 is out of bounds for dimension 0 with size 4"
    );
    assert_eq!(
        err(index(&x, &[Some(longs(&[-4]))])),
        "index -4 is out of bounds for dimension 0 with size 3"
    );
    assert_eq!(
        err(index(&x, &[Some(longs(&[0])), Some(longs(&[0])), None])),
        "too many indices for tensor of dimension 2 (got 3)"
    );
    assert_eq!(err(index(&x, &[])), "at least one index must be provided");
    assert_eq!(
        err(index(&x, &[Some(longs(&[0, 1])), Some(longs(&[0, 1, 2]))])),
        "shape mismatch: indexing tensors could not be broadcast together with shapes [2], [3]"
    );
    assert_eq!(
        err(index(&x, &[Some(floats(&[0.]))])),
        "tensors used as indices must be long, int, byte or bool tensors"
    );
    let m = Tensor::from_vec(vec![true, false], &[2]).unwrap();
    assert_eq!(
        err(index(&x, &[Some(m.clone())])),
        "The shape of the mask [2] at index 0 does not match the shape of the indexed tensor \
         [3, 4] at index 0"
    );
    // A mask's positions need values: on Meta it fails as `nonzero` does.
    let meta = Tensor::zeros_on(&[2], ScalarType::Float, Device::META).unwrap();
    let mm = Tensor::zeros_on(&[2], ScalarType::Bool, Device::META).unwrap();
    assert!(err(index(&meta, &[Some(mm)])).starts_with("The register_meta function"));
    assert_eq!(
        index(&meta, &[Some(longs(&[1, 1, 0]))]).unwrap().sizes(),
        &[3]
    );
}

#[test]
fn index_put_values_and_errors() {
    let z = Tensor::zeros(&[3, 2], ScalarType::Float).unwrap();
    let v = ar(6, &[3, 2]);
    let i = longs(&[0, 2, 0]);
    let r = index_put(&z, &[Some(i.clone())], &v, true).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [4., 6., 0., 0., 2., 3.]);
    assert_eq!(
        z.to_vec::<f32>().unwrap(),
        [0.; 6],
        "functional form copies"
    );
    // Broadcast values, in place, into a transposed self.
    let t = Tensor::zeros(&[2, 3], ScalarType::Float).unwrap();
    let tt = t.t().unwrap();
    index_put_(&tt, &[None, Some(longs(&[1]))], &floats(&[7.]), false).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), [0., 0., 0., 7., 7., 7.]);
    assert_eq!(
        err(index_put(&z, &[Some(longs(&[0, 1]))], &v, false)),
        "shape mismatch: value tensor of shape [3, 2] cannot be broadcast to indexing result \
         of shape [2, 2]"
    );
    assert_eq!(
        err(index_put(
            &z,
            &[Some(i)],
            &Tensor::zeros(&[3, 2], ScalarType::Double).unwrap(),
            false
        )),
        "Index put requires the source and destination dtypes match, got Float for the \
         destination and Double for the source."
    );
    assert_eq!(
        err(index_put(&z, &[Some(longs(&[3]))], &floats(&[1.]), true)),
        "index 3 is out of bounds for dimension 0 with size 3"
    );
}

#[test]
fn scatter_and_reductions() {
    let z = Tensor::zeros(&[3], ScalarType::Float).unwrap();
    let i = longs(&[0, 0, 1, 1]);
    let src = floats(&[1., 2., 3., 4.]);
    let s = ar(3, &[3]);
    let reduce = |how: &str, include_self: bool| {
        scatter_reduce(&s, 0, &i, &src, how, include_self)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    };
    assert_eq!(reduce("sum", true), [3., 8., 2.]);
    assert_eq!(reduce("prod", false), [2., 12., 2.]);
    assert_eq!(reduce("mean", true), [1., 8. / 3., 2.]);
    assert_eq!(reduce("mean", false), [1.5, 3.5, 2.]);
    assert_eq!(reduce("amax", true), [2., 4., 2.]);
    assert_eq!(reduce("amin", false), [1., 3., 2.]);
    let nan = floats(&[1., f32::NAN, 3., 4.]);
    let r = scatter_reduce(&s, 0, &i, &nan, "amax", true).unwrap();
    assert!(
        r.to_vec::<f32>().unwrap()[0].is_nan(),
        "amax propagates NaN"
    );
    // Integer means round down.
    let si = Tensor::from_vec(vec![0i64, 1, 2, 3], &[4]).unwrap();
    let srci = Tensor::from_vec(vec![1i64, 2, -3, 4], &[4]).unwrap();
    let r = scatter_reduce(&si, 0, &i, &srci, "mean", false).unwrap();
    assert_eq!(r.to_vec::<i64>().unwrap(), [1, 0, 2, 3]);
    assert_eq!(
        err(scatter_reduce(&s, 0, &i, &src, "median", true)),
        "reduce argument must be either sum, prod, mean, amax or amin, got median"
    );
    let r = scatter_value(&z, 0, &longs(&[2]), Scalar::from(2.5)).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [0., 0., 2.5]);
    let r = scatter(&z, 0, &longs(&[2, 0]), &src).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [2., 0., 1.]);
    let z2 = Tensor::zeros(&[3, 4], ScalarType::Float).unwrap();
    let wide = Tensor::from_vec(vec![0i64, 1, 2, 1, 0], &[1, 5]).unwrap();
    assert_eq!(
        err(scatter_value(&z2, 0, &wide, Scalar::from(1.0))),
        "Expected index [1, 5] to be no larger than self [3, 4] apart from dimension 0"
    );
    assert_eq!(
        err(scatter(
            &z2,
            0,
            &longs(&[0]).view(&[1, 1]).unwrap(),
            &floats(&[1., 2.])
        )),
        "Dimension out of range (expected to be in range of [-1, 0], but got 1)"
    );
}

#[test]
fn masked_scatter_values_and_errors() {
    let m = Tensor::from_vec(vec![true, false, true, true], &[4]).unwrap();
    let x = Tensor::zeros(&[2, 4], ScalarType::Float).unwrap();
    // The mask broadcasts over `self`; source elements are taken in row-major order.
    let r = masked_scatter(&x, &m, &ar(6, &[2, 3])).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [0., 0., 1., 2., 3., 0., 4., 5.]);
    assert_eq!(
        err(masked_scatter(&x, &m, &floats(&[1., 2.]))),
        "Number of elements of source < number of ones in mask"
    );
    let mf = Tensor::zeros(&[4], ScalarType::Float).unwrap();
    assert_eq!(
        err(masked_scatter(&x, &mf, &floats(&[1.]))),
        "masked_scatter_ only supports boolean masks, but got mask with dtype Float"
    );
    assert_eq!(
        err(masked_scatter(&x, &m, &longs(&[1]))),
        "masked_scatter: expected self and source to have same dtypes but gotFloat and Long"
    );
}

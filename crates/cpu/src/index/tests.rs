//! Tests of the indexing kernels.

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

#[test]
fn index_select_values() {
    let t = ar(12, &[3, 4]);
    let i = longs(&[2, 0]);
    assert_eq!(
        index_select(&t, 1, &i).unwrap().to_vec::<f32>().unwrap(),
        [2., 0., 6., 4., 10., 8.]
    );
    // Strided self, int32 index, negative dim, both loop orders.
    let tt = t.t().unwrap(); // [4, 3]
    let i32s = Tensor::from_vec(vec![1i32, 1, 3], &[3]).unwrap();
    let r = index_select(&tt, -2, &i32s).unwrap();
    assert_eq!(
        r.to_vec::<f32>().unwrap(),
        [1., 5., 9., 1., 5., 9., 3., 7., 11.]
    );
    let r = index_select(&tt, 1, &longs(&[2])).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [8., 9., 10., 11.]);
    // 0-dim self and 0-dim index.
    let s = Tensor::scalar_tensor(5, ScalarType::Long);
    let r = index_select(&s, 0, &Tensor::scalar_tensor(0, ScalarType::Long)).unwrap();
    assert_eq!((r.dim(), r.item().unwrap().to_i64()), (0, 5));
    // Bool and Half elements move unchanged.
    let b = Tensor::from_vec(vec![true, false], &[2]).unwrap();
    assert_eq!(
        index_select(&b, 0, &longs(&[1, 0, 0]))
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        [false, true, true]
    );
    // Meta shapes.
    let m = Tensor::zeros_on(&[3, 4], ScalarType::Half, Device::META).unwrap();
    let mi = Tensor::zeros_on(&[5], ScalarType::Long, Device::META).unwrap();
    let r = index_select(&m, 0, &mi).unwrap();
    assert!(r.is_meta());
    assert_eq!((r.sizes(), r.dtype()), (&[5i64, 4][..], ScalarType::Half));
}

#[test]
fn index_select_errors_and_out() {
    let t = ar(6, &[3, 2]);
    assert_eq!(
        index_select(&t, 0, &longs(&[3])).unwrap_err().to_string(),
        "index out of range in self"
    );
    assert_eq!(
        index_select(&t, 0, &longs(&[-1])).unwrap_err().to_string(),
        "index out of range in self"
    );
    assert_eq!(
        index_select(&t, 0, &ar(2, &[2])).unwrap_err().to_string(),
        "index_select(): Expected dtype int32 or int64 for index"
    );
    let i2 = Tensor::zeros(&[1, 1], ScalarType::Long).unwrap();
    assert_eq!(
        index_select(&t, 0, &i2).unwrap_err().to_string(),
        "index_select(): Index is supposed to be a vector"
    );
    let s = Tensor::scalar_tensor(5, ScalarType::Long);
    assert_eq!(
        index_select(&s, 0, &longs(&[0, 0]))
            .unwrap_err()
            .to_string(),
        "index_select(): Index to scalar can have only 1 value, got 2 value(s)"
    );
    assert!(index_select(&t, 2, &longs(&[0])).is_err());
    let out = Tensor::zeros(&[0], ScalarType::Float).unwrap();
    let r = index_select_out(&t, 1, &longs(&[1, 1, 0]), &out).unwrap();
    assert_eq!(r.sizes(), &[3, 3]);
    assert_eq!(
        r.to_vec::<f32>().unwrap(),
        [1., 1., 0., 3., 3., 2., 5., 5., 4.]
    );
    let wrong = Tensor::zeros(&[3, 1], ScalarType::Double).unwrap();
    assert_eq!(
        index_select_out(&t, 1, &longs(&[0]), &wrong)
            .unwrap_err()
            .to_string(),
        "index_select(): self and result must have the same scalar type"
    );
}

#[test]
fn gather_values_and_errors() {
    let t = ar(6, &[2, 3]);
    let i = Tensor::from_vec(vec![2i64, 0, 1, 1], &[2, 2]).unwrap();
    assert_eq!(
        gather(&t, 1, &i, false).unwrap().to_vec::<f32>().unwrap(),
        [2., 0., 4., 4.]
    );
    assert_eq!(
        gather(
            &t,
            0,
            &i.narrow(1, 0, 1).unwrap().narrow(0, 1, 1).unwrap(),
            false
        )
        .unwrap()
        .to_vec::<f32>()
        .unwrap(),
        [3.]
    );
    // Transposed self and index; longer index along dim.
    let tt = t.t().unwrap(); // [3, 2]: [[0,3],[1,4],[2,5]]
    let it = Tensor::from_vec(vec![0i64, 1, 2, 2, 1, 0, 0, 0], &[2, 4])
        .unwrap()
        .t()
        .unwrap(); // [4, 2]
    let r = gather(&tt, 0, &it, false).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [0., 4., 1., 3., 2., 3., 2., 3.]);
    assert_eq!(
        gather(
            &t,
            1,
            &Tensor::from_vec(vec![3i64], &[1, 1]).unwrap(),
            false
        )
        .unwrap_err()
        .to_string(),
        "index 3 is out of bounds for dimension 1 with size 3"
    );
    assert_eq!(
        gather(&t, 0, &longs(&[0]), false).unwrap_err().to_string(),
        "Index tensor must have the same number of dimensions as input tensor"
    );
    assert_eq!(
        gather(
            &t,
            0,
            &Tensor::zeros(&[1, 4], ScalarType::Long).unwrap(),
            false
        )
        .unwrap_err()
        .to_string(),
        "Size does not match at dimension 1 expected index [1, 4] to be no larger than self \
         [2, 3] apart from dimension 0"
    );
    assert_eq!(
        gather(
            &t,
            0,
            &Tensor::zeros(&[1, 1], ScalarType::Float).unwrap(),
            false
        )
        .unwrap_err()
        .to_string(),
        "gather(): Expected dtype int32/int64 for index"
    );
    let m = Tensor::zeros_on(&[2, 3], ScalarType::Float, Device::META).unwrap();
    let mi = Tensor::zeros_on(&[4, 3], ScalarType::Long, Device::META).unwrap();
    // Meta tensors take the meta functions (the Meta backend's kernels), not these.
    let meta = switchboard_ops::structured::gather(&m, 0, &mi, false, None);
    let r = meta.unwrap().allocate().unwrap();
    assert!(r.is_meta());
    assert_eq!(r.sizes(), &[4, 3]);
}

#[test]
fn scatter_add_values_and_errors() {
    let z = Tensor::zeros(&[2, 3], ScalarType::Long).unwrap();
    let i = Tensor::from_vec(vec![0i64, 1, 0, 1, 1, 1], &[2, 3]).unwrap();
    let s = Tensor::from_vec(vec![1i64, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
    let r = scatter_add(&z, 0, &i, &s).unwrap();
    assert_eq!(r.to_vec::<i64>().unwrap(), [1, 0, 3, 4, 7, 6]);
    assert_eq!(z.to_vec::<i64>().unwrap(), [0; 6], "functional form copies");
    let r = scatter_add(&z, 1, &i, &s).unwrap();
    assert_eq!(r.to_vec::<i64>().unwrap(), [4, 2, 0, 0, 15, 0]);
    // In place, on a strided self, with a smaller index than src.
    let f = Tensor::zeros(&[3, 2], ScalarType::Float).unwrap();
    let ft = f.t().unwrap(); // [2, 3]
    let src = ar(6, &[2, 3]);
    scatter_add_(
        &ft,
        1,
        &Tensor::from_vec(vec![2i64, 2], &[1, 2]).unwrap(),
        &src,
    )
    .unwrap();
    assert_eq!(ft.to_vec::<f32>().unwrap(), [0., 0., 1., 0., 0., 0.]);
    assert_eq!(
        scatter_add(&z, 0, &Tensor::from_vec(vec![2i64], &[1, 1]).unwrap(), &s)
            .unwrap_err()
            .to_string(),
        "index 2 is out of bounds for dimension 0 with size 2"
    );
    assert_eq!(
        scatter_add(&z, 0, &i, &src).unwrap_err().to_string(),
        "scatter(): Expected self.dtype to be equal to src.dtype"
    );
    assert_eq!(
        scatter_add(
            &z,
            0,
            &Tensor::zeros(&[3, 3], ScalarType::Long).unwrap(),
            &s
        )
        .unwrap_err()
        .to_string(),
        "Expected index [3, 3] to be no larger than self [2, 3] apart from dimension 0 and to be \
         no larger size than src [2, 3]"
    );
    assert_eq!(
        scatter_add(&z, 0, &longs(&[0]), &s)
            .unwrap_err()
            .to_string(),
        "Index tensor must have the same number of dimensions as self tensor"
    );
    assert!(scatter_add_(&s, 0, &i, &s).is_err(), "src overlaps self");
    let m = Tensor::zeros_on(&[2, 3], ScalarType::Long, Device::META).unwrap();
    let mi = Tensor::zeros_on(&[2, 3], ScalarType::Long, Device::META).unwrap();
    let meta = switchboard_ops::structured::scatter_add;
    let r = meta(&m, 0, &mi, &m, None).unwrap().allocate().unwrap();
    assert!(r.is_meta());
    assert!(meta(&m, 0, &i, &m, None).is_err(), "mixed devices");
    assert!(scatter_add(&m, 0, &i, &m).is_err(), "mixed devices");
}

#[test]
fn index_add_values_and_errors() {
    let z = Tensor::zeros(&[3, 2], ScalarType::Float).unwrap();
    let src = ar(6, &[3, 2]);
    let i = longs(&[2, 0, 2]);
    let r = index_add(&z, 0, &i, &src, Scalar::Float(0.5)).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [1., 1.5, 0., 0., 2., 3.]);
    // Along the innermost dim of a transposed self (the other loop order).
    let zt = Tensor::zeros(&[2, 3], ScalarType::Float)
        .unwrap()
        .t()
        .unwrap(); // [3, 2]
    let s2 = ar(6, &[3, 2]);
    index_add_(&zt, 1, &longs(&[1, 1]), &s2, Scalar::Int(1)).unwrap();
    assert_eq!(zt.to_vec::<f32>().unwrap(), [0., 1., 0., 5., 0., 9.]);
    // 1-D and 0-dim, ints and bool.
    let v = Tensor::zeros(&[4], ScalarType::Int).unwrap();
    let s = Tensor::from_vec(vec![1i32, 2, 3], &[3]).unwrap();
    index_add_(&v, 0, &longs(&[3, 3, 0]), &s, Scalar::Int(2)).unwrap();
    assert_eq!(v.to_vec::<i32>().unwrap(), [6, 0, 0, 6]);
    let sc = Tensor::scalar_tensor(1.0, ScalarType::Double);
    let r = index_add(&sc, 0, &longs(&[0]), &sc, Scalar::Int(1)).unwrap();
    assert_eq!(r.item().unwrap().to_f64(), 2.0);
    let b = Tensor::zeros(&[2], ScalarType::Bool).unwrap();
    let bs = Tensor::ones(&[1], ScalarType::Bool).unwrap();
    let r = index_add(&b, 0, &longs(&[1]), &bs, Scalar::Bool(true)).unwrap();
    assert_eq!(r.to_vec::<bool>().unwrap(), [false, true]);
    // PyTorch's messages: the 2-D loop's, and the 1-D one's.
    assert_eq!(
        index_add(&z, 0, &longs(&[3, 0, 0]), &src, Scalar::Int(1))
            .unwrap_err()
            .to_string(),
        "index 3 is out of bounds for dimension 0 with size 3"
    );
    assert_eq!(
        index_add(
            &v,
            0,
            &longs(&[4]),
            &s.narrow(0, 0, 1).unwrap(),
            Scalar::Int(1)
        )
        .unwrap_err()
        .to_string(),
        "index out of range in self"
    );
    assert_eq!(
        index_add(&z, 0, &longs(&[0, 1]), &src, Scalar::Int(1))
            .unwrap_err()
            .to_string(),
        "index_add_(): Number of indices (2) should be equal to source.size(dim): (3), for \
         dim: 0"
    );
    assert_eq!(
        index_add(&z, 0, &i, &src.t().unwrap(), Scalar::Int(1))
            .unwrap_err()
            .to_string(),
        "index_add_(): Number of indices (3) should be equal to source.size(dim): (2), for \
         dim: 0"
    );
    assert_eq!(
        index_add(&z, 0, &i, &ar(9, &[3, 3]), Scalar::Int(1))
            .unwrap_err()
            .to_string(),
        "source tensor shape must match self tensor shape, excluding the specified dimension. \
         Got self.shape = [3, 2] source.shape = [3, 3]"
    );
    let d = Tensor::zeros(&[3, 2], ScalarType::Double).unwrap();
    assert_eq!(
        index_add(&d, 0, &i, &src, Scalar::Int(1))
            .unwrap_err()
            .to_string(),
        "index_add_(): self (Double) and source (Float) must have the same scalar type"
    );
    assert_eq!(
        index_add(&z, 0, &ar(3, &[3]), &src, Scalar::Int(1))
            .unwrap_err()
            .to_string(),
        "index_add_(): Expected dtype int32/int64 for index but got: Float"
    );
    let m = Tensor::zeros_on(&[3, 2], ScalarType::Float, Device::META).unwrap();
    let mi = Tensor::zeros_on(&[3], ScalarType::Long, Device::META).unwrap();
    let meta = switchboard_ops::structured::index_add;
    let r = meta(&m, 0, &mi, &m, Scalar::Int(1), None).unwrap();
    assert!(r.allocate().unwrap().is_meta());
    assert!(meta(&m, 0, &mi, &m.clone(), Scalar::Int(1), Some(&m)).is_ok());
}

#[test]
fn index_add_is_index_select_adjoint() {
    // <index_select(x, i), g> == <x, index_add(0, i, g)>: the autograd pairing.
    let x = ar(20, &[4, 5]);
    let i = longs(&[3, 1, 3, 0, 2, 3]);
    let g = Tensor::arange(0, 30, 1, Some(ScalarType::Float))
        .unwrap()
        .view(&[6, 5])
        .unwrap();
    let lhs: f32 = index_select(&x, 0, &i)
        .unwrap()
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .zip(g.to_vec::<f32>().unwrap())
        .map(|(a, b)| a * b)
        .sum();
    let back = index_add(
        &Tensor::zeros(&[4, 5], ScalarType::Float).unwrap(),
        0,
        &i,
        &g,
        Scalar::Int(1),
    )
    .unwrap();
    let rhs: f32 = x
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .zip(back.to_vec::<f32>().unwrap())
        .map(|(a, b)| a * b)
        .sum();
    assert_eq!(lhs, rhs);
}

#[test]
fn large_parallel_paths_match_serial_reference() {
    // Big enough to split across threads in every loop.
    let (rows, cols) = (300i64, 400i64);
    let x = Tensor::arange(0, rows * cols, 1, Some(ScalarType::Long))
        .unwrap()
        .view(&[rows, cols])
        .unwrap();
    let idx: Vec<i64> = (0..500).map(|k| (k * 7919) % rows).collect();
    let r = index_select(&x, 0, &longs(&idx))
        .unwrap()
        .to_vec::<i64>()
        .unwrap();
    for (k, &i) in idx.iter().enumerate().step_by(37) {
        assert_eq!(r[k * cols as usize + 5], i * cols + 5);
    }
    let src = Tensor::ones(&[500, cols], ScalarType::Long).unwrap();
    let acc = index_add(
        &Tensor::zeros(&[rows, cols], ScalarType::Long).unwrap(),
        0,
        &longs(&idx),
        &src,
        Scalar::Int(1),
    )
    .unwrap()
    .to_vec::<i64>()
    .unwrap();
    let mut counts = vec![0i64; rows as usize];
    for &i in &idx {
        counts[i as usize] += 1;
    }
    for row in 0..rows as usize {
        assert_eq!(acc[row * cols as usize + 3], counts[row]);
    }
    let gi: Vec<i64> = (0..rows * cols).map(|k| (k * 31) % cols).collect();
    let gidx = Tensor::from_vec(gi.clone(), &[rows, cols]).unwrap();
    let gathered = gather(&x, 1, &gidx, false)
        .unwrap()
        .to_vec::<i64>()
        .unwrap();
    for k in (0..gi.len()).step_by(101) {
        assert_eq!(gathered[k], (k as i64 / cols) * cols + gi[k]);
    }
    let sc = scatter_add(
        &Tensor::zeros(&[rows, cols], ScalarType::Long).unwrap(),
        1,
        &gidx,
        &Tensor::ones(&[rows, cols], ScalarType::Long).unwrap(),
    )
    .unwrap()
    .to_vec::<i64>()
    .unwrap();
    assert_eq!(sc.iter().sum::<i64>(), rows * cols);
}

//! Tests of the matrix products against a naive f64 reference.

use super::*;
use crate::copy::cast;
use crate::nn_testutil::{assert_close, ramp};

/// The naive product of row-major `m×k` and `k×n` matrices.
fn naive(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    c
}

fn check_mm(a: &Tensor, b: &Tensor, tol: f64) {
    let (m, k, n) = (
        a.sizes()[0] as usize,
        a.sizes()[1] as usize,
        b.sizes()[1] as usize,
    );
    let c = mm(a, b).unwrap();
    assert_eq!(c.sizes(), &[m as i64, n as i64]);
    assert_eq!(c.dtype(), a.dtype());
    let want = naive(
        &a.to_vec_as::<f64>().unwrap(),
        &b.to_vec_as::<f64>().unwrap(),
        m,
        k,
        n,
    );
    assert_close(&c.to_vec_as::<f64>().unwrap(), &want, tol);
}

#[test]
fn mm_matches_naive_for_every_layout() {
    for &(m, k, n) in &[(3, 4, 5), (1, 7, 1), (17, 33, 9), (70, 80, 90)] {
        let a = ramp(&[m, k], ScalarType::Float);
        let b = ramp(&[k, n], ScalarType::Float);
        check_mm(&a, &b, 1e-4);
        // Transposed operands go to the kernel without copies.
        let at = ramp(&[k, m], ScalarType::Float).t().unwrap();
        let bt = ramp(&[n, k], ScalarType::Float).t().unwrap();
        check_mm(&at, &bt, 1e-4);
        // Sliced (non-unit inner stride) and expanded (stride 0) operands.
        let big = ramp(&[m, 2 * k], ScalarType::Double);
        let sl = big.slice(1, None, None, 2).unwrap();
        let row = ramp(&[1, n], ScalarType::Double)
            .expand(&[k as i64, n as i64])
            .unwrap();
        check_mm(&sl, &row, 1e-9);
    }
}

#[test]
fn mm_dtypes() {
    for dt in [
        ScalarType::Double,
        ScalarType::Half,
        ScalarType::BFloat16,
        ScalarType::Long,
        ScalarType::Int,
        ScalarType::Short,
        ScalarType::Char,
        ScalarType::Byte,
    ] {
        let a = ramp(&[5, 6], dt);
        let b = ramp(&[6, 4], dt)
            .t()
            .unwrap()
            .contiguous()
            .unwrap()
            .t()
            .unwrap();
        let tol = match dt {
            ScalarType::Half => 2e-2,
            ScalarType::BFloat16 => 1e-1,
            _ => 1e-9,
        };
        if dt.is_floating_point() {
            check_mm(&a, &b, tol);
        } else {
            // Wrapping arithmetic agrees with the exact product reduced modulo 2^bits.
            let c = mm(&a, &b).unwrap();
            let av = a.to_vec_as::<f64>().unwrap();
            let bv = b.to_vec_as::<f64>().unwrap();
            let exact: Vec<i64> = naive(&av, &bv, 5, 6, 4).iter().map(|&x| x as i64).collect();
            let want = cast(&Tensor::from_vec(exact, &[5, 4]).unwrap(), dt).unwrap();
            assert_eq!(
                c.to_vec_as::<i64>().unwrap(),
                want.to_vec_as::<i64>().unwrap(),
                "{dt:?}"
            );
        }
    }
    let b = Tensor::zeros(&[2, 2], ScalarType::Bool).unwrap();
    assert_eq!(
        mm(&b, &b).unwrap_err().to_string(),
        "\"addmm_impl_cpu_\" not implemented for 'Bool'"
    );
}

#[test]
fn mm_errors_and_meta() {
    let a = ramp(&[2, 3], ScalarType::Float);
    let b = ramp(&[4, 5], ScalarType::Float);
    assert_eq!(
        mm(&a, &b).unwrap_err().to_string(),
        "mm: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"
    );
    let v = ramp(&[3], ScalarType::Float);
    assert_eq!(
        mm(&v, &a).unwrap_err().to_string(),
        "mm: self must be a matrix, got 1-D tensor"
    );
    assert_eq!(
        mm(&a, &v).unwrap_err().to_string(),
        "mm: mat2 must be a matrix, got 1-D tensor"
    );
    let d = ramp(&[3, 2], ScalarType::Double);
    assert_eq!(
        mm(&a, &d).unwrap_err().to_string(),
        "expected m1 and m2 to have the same dtype, but got: float != double"
    );
    let m1 = Tensor::empty_on(&[2, 3], ScalarType::Float, Device::META).unwrap();
    let m2 = Tensor::empty_on(&[3, 7], ScalarType::Float, Device::META).unwrap();
    // Meta tensors take the meta function (the Meta backend's kernel), not this one.
    let meta = |a: &Tensor, b: &Tensor| switchboard_ops::structured::mm(a, b, None);
    let c = meta(&m1, &m2).unwrap().allocate().unwrap();
    assert!(c.is_meta());
    assert_eq!(c.sizes(), &[2, 7]);
    assert!(mm(&m1, &ramp(&[3, 7], ScalarType::Float))
        .unwrap_err()
        .to_string()
        .contains("same device"));
    let bad = Tensor::empty_on(&[4, 7], ScalarType::Float, Device::META).unwrap();
    assert!(meta(&m1, &bad).is_err());
}

#[test]
fn empty_and_zero_k() {
    let a = Tensor::zeros(&[3, 0], ScalarType::Float).unwrap();
    let b = Tensor::zeros(&[0, 2], ScalarType::Float).unwrap();
    assert_eq!(mm(&a, &b).unwrap().to_vec::<f32>().unwrap(), [0.0; 6]);
    let s = Tensor::full(&[3, 2], 2.0, ScalarType::Float).unwrap();
    let r = addmm(&s, &a, &b, Scalar::Float(0.5), Scalar::Int(1)).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [1.0; 6]);
    let e = mm(
        &Tensor::zeros(&[0, 4], ScalarType::Float).unwrap(),
        &ramp(&[4, 2], ScalarType::Float),
    )
    .unwrap();
    assert_eq!(e.sizes(), &[0, 2]);
}

#[test]
fn addmm_forms() {
    let bias = ramp(&[4], ScalarType::Double);
    let m1 = ramp(&[3, 5], ScalarType::Double);
    let m2 = ramp(&[5, 4], ScalarType::Double);
    let prod = naive(
        &m1.to_vec::<f64>().unwrap(),
        &m2.to_vec::<f64>().unwrap(),
        3,
        5,
        4,
    );
    let bv = bias.to_vec::<f64>().unwrap();
    let want: Vec<f64> = (0..12).map(|i| 0.5 * bv[i % 4] + 2.0 * prod[i]).collect();
    let r = addmm(&bias, &m1, &m2, Scalar::Float(0.5), Scalar::Int(2)).unwrap();
    assert_close(&r.to_vec::<f64>().unwrap(), &want, 1e-12);

    // out= with a transposed out tensor.
    let out = Tensor::zeros(&[4, 3], ScalarType::Double)
        .unwrap()
        .t()
        .unwrap();
    addmm_out(&bias, &m1, &m2, Scalar::Float(0.5), Scalar::Int(2), &out).unwrap();
    assert_close(&out.to_vec::<f64>().unwrap(), &want, 1e-12);

    // In place, and beta = 0 ignores NaNs in self.
    let s = Tensor::full(&[3, 4], f64::NAN, ScalarType::Double).unwrap();
    addmm_(&s, &m1, &m2, Scalar::Int(0), Scalar::Int(1)).unwrap();
    assert_close(&s.to_vec::<f64>().unwrap(), &prod, 1e-12);
    let s2 = bias.expand(&[3, 4]).unwrap().contiguous().unwrap();
    addmm_(&s2, &m1, &m2, Scalar::Float(0.5), Scalar::Int(2)).unwrap();
    assert_close(&s2.to_vec::<f64>().unwrap(), &want, 1e-12);

    // mat1 aliasing self (square): computed through a temporary.
    let sq = ramp(&[4, 4], ScalarType::Double);
    let sqv = sq.to_vec::<f64>().unwrap();
    let want_sq: Vec<f64> = naive(&sqv, &sqv, 4, 4, 4)
        .iter()
        .zip(&sqv)
        .map(|(p, s)| p + s)
        .collect();
    addmm_(&sq, &sq, &sq.clone(), Scalar::Int(1), Scalar::Int(1)).unwrap();
    assert_close(&sq.to_vec::<f64>().unwrap(), &want_sq, 1e-12);

    // Integer addmm.
    let i1 = Tensor::from_vec(vec![1i64, 2, 3, 4], &[2, 2]).unwrap();
    let r = addmm(
        &Tensor::from_vec(vec![10i64], &[1]).unwrap(),
        &i1,
        &i1,
        Scalar::Int(2),
        Scalar::Int(3),
    )
    .unwrap();
    assert_eq!(r.to_vec::<i64>().unwrap(), [41, 50, 65, 86]);
}

#[test]
fn addmm_errors() {
    let m = ramp(&[2, 2], ScalarType::Float);
    let d = ramp(&[2, 2], ScalarType::Double);
    assert_eq!(
        addmm(&d, &m, &m, Scalar::Int(1), Scalar::Int(1))
            .unwrap_err()
            .to_string(),
        "self and mat2 must have the same dtype, but got Double and Float"
    );
    assert_eq!(
        addmm(&m, &d, &m, Scalar::Int(1), Scalar::Int(1))
            .unwrap_err()
            .to_string(),
        "mat1 and mat2 must have the same dtype, but got Double and Float"
    );
    let v = ramp(&[2], ScalarType::Float);
    assert_eq!(
        addmm(&m, &v, &m, Scalar::Int(1), Scalar::Int(1))
            .unwrap_err()
            .to_string(),
        "addmm: self must be a matrix, got 1-D tensor"
    );
    assert!(addmm(
        &ramp(&[3], ScalarType::Float),
        &m,
        &m,
        Scalar::Int(1),
        Scalar::Int(1)
    )
    .is_err());
    let s = ramp(&[2, 1], ScalarType::Float);
    assert_eq!(
        addmm_(&s, &m, &m, Scalar::Int(1), Scalar::Int(1))
            .unwrap_err()
            .to_string(),
        "Bad in-place call: input tensor size [2, 1] and output tensor size [2, 2] should match"
    );
    // An out tensor of another shape is resized (Note [Functional resize]): the returned
    // tensor holds the product.
    let out = Tensor::zeros(&[2, 3], ScalarType::Float).unwrap();
    let r = mm_out(&m, &m, &out).unwrap();
    assert_eq!(r.sizes(), &[2, 2]);
    assert_eq!(
        r.to_vec::<f32>().unwrap(),
        mm(&m, &m).unwrap().to_vec::<f32>().unwrap()
    );
    let out = Tensor::zeros(&[2, 2], ScalarType::Double).unwrap();
    assert_eq!(
        mm_out(&m, &m, &out).unwrap_err().to_string(),
        "Expected out tensor to have dtype float, but got double instead"
    );
    let e = Tensor::zeros(&[1, 2], ScalarType::Float)
        .unwrap()
        .expand(&[2, 2])
        .unwrap();
    assert!(mm_out(&m, &m, &e)
        .unwrap_err()
        .to_string()
        .contains("more than one element"));
}

#[test]
fn bmm_forms() {
    for &(bs, m, k, n) in &[(3, 4, 5, 6), (1, 40, 50, 70), (64, 2, 3, 2)] {
        let a = ramp(&[bs, m, k], ScalarType::Float);
        let b = ramp(&[bs, n, k], ScalarType::Float)
            .transpose(1, 2)
            .unwrap();
        let c = bmm(&a, &b).unwrap();
        assert_eq!(c.sizes(), &[bs as i64, m as i64, n as i64]);
        let (av, bv) = (
            a.to_vec_as::<f64>().unwrap(),
            b.contiguous().unwrap().to_vec_as::<f64>().unwrap(),
        );
        let cv = c.to_vec_as::<f64>().unwrap();
        for i in 0..bs {
            let want = naive(
                &av[i * m * k..(i + 1) * m * k],
                &bv[i * k * n..(i + 1) * k * n],
                m,
                k,
                n,
            );
            assert_close(&cv[i * m * n..(i + 1) * m * n], &want, 1e-4);
        }
        let out = Tensor::zeros(&[bs as i64, m as i64, n as i64], ScalarType::Float).unwrap();
        bmm_out(&a, &b, &out).unwrap();
        assert_eq!(out.to_vec::<f32>().unwrap(), c.to_vec::<f32>().unwrap());
    }
    let i = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6, 7, 8], &[2, 2, 2]).unwrap();
    assert_eq!(
        bmm(&i, &i).unwrap().to_vec::<i32>().unwrap(),
        [7, 10, 15, 22, 67, 78, 91, 106]
    );
    let a = ramp(&[2, 3, 4], ScalarType::Float);
    assert_eq!(
        bmm(&a, &ramp(&[2, 5, 4], ScalarType::Float))
            .unwrap_err()
            .to_string(),
        "Expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [2, 5]."
    );
    assert_eq!(
        bmm(&ramp(&[3, 4], ScalarType::Float), &a)
            .unwrap_err()
            .to_string(),
        "batch1 must be a 3D tensor"
    );
    assert_eq!(
        bmm(&a, &ramp(&[2, 4, 1], ScalarType::Double))
            .unwrap_err()
            .to_string(),
        "expected scalar type Float but found Double"
    );
    let ma = Tensor::empty_on(&[2, 3, 4], ScalarType::Half, Device::META).unwrap();
    let mb = Tensor::empty_on(&[2, 4, 6], ScalarType::Half, Device::META).unwrap();
    let mc = switchboard_ops::structured::bmm(&ma, &mb, None)
        .unwrap()
        .allocate()
        .unwrap();
    assert!(mc.is_meta());
    assert_eq!(mc.sizes(), &[2, 3, 6]);
    let h = bmm(
        &cast(&a, ScalarType::Half).unwrap(),
        &cast(&a.transpose(1, 2).unwrap(), ScalarType::Half).unwrap(),
    )
    .unwrap();
    let f = bmm(&a, &a.transpose(1, 2).unwrap()).unwrap();
    assert_close(
        &h.to_vec_as::<f64>().unwrap(),
        &f.to_vec_as::<f64>().unwrap(),
        5e-2,
    );
}

#[test]
fn large_mm_is_parallel_and_correct() {
    let a = ramp(&[130, 257], ScalarType::Float);
    let b = ramp(&[257, 129], ScalarType::Float);
    check_mm(&a, &b, 1e-3);
}

#[test]
fn split_blocks_are_aligned_disjoint_and_cover_the_range() {
    for (len, parts) in [(9216, 2), (129, 2), (17, 2), (5, 3), (64, 4), (1, 2)] {
        let mut next = 0;
        for i in 0..parts {
            let (s, e) = gemm_core::split_block(len, parts, i);
            assert_eq!(s, next, "{len} {parts} {i}");
            assert!(s <= e && e <= len);
            assert!(e == len || (e - s) % 16 == 0, "{len} {parts} {i}: {s}..{e}");
            next = e;
        }
        assert_eq!(next, len, "{len} {parts}");
    }
}

#[test]
fn products_split_over_threads_match_naive() {
    // Above PAR_FLOPS, so run as column blocks (wide outputs) or row blocks (tall ones) on
    // a multi-threaded pool (Note [Splitting a product over the threads]), with transposed
    // and sliced operands and an accumulating addmm.
    for &(m, k, n) in &[(64, 300, 130), (131, 300, 40), (33, 1000, 33)] {
        let a = ramp(&[m, k], ScalarType::Float);
        let b = ramp(&[k, n], ScalarType::Float);
        check_mm(&a, &b, 1e-3);
        let at = ramp(&[k, m], ScalarType::Float).t().unwrap();
        let bt = ramp(&[n, 2 * k], ScalarType::Float)
            .slice(1, None, None, 2)
            .unwrap()
            .t()
            .unwrap();
        check_mm(&at, &bt, 1e-3);
        let bias = ramp(&[n], ScalarType::Float);
        let y = addmm(&bias, &at, &bt, Scalar::Int(1), Scalar::Float(0.5)).unwrap();
        let prod = naive(
            &at.to_vec_as::<f64>().unwrap(),
            &bt.to_vec_as::<f64>().unwrap(),
            m,
            k,
            n,
        );
        let bv = bias.to_vec_as::<f64>().unwrap();
        let want: Vec<f64> = prod
            .iter()
            .enumerate()
            .map(|(i, p)| bv[i % n] + 0.5 * p)
            .collect();
        assert_close(&y.to_vec_as::<f64>().unwrap(), &want, 1e-3);
    }
}

//! Tests of the losses against hand-computed values and finite differences.

use super::*;
use crate::copy::cast;
use crate::nn_testutil::{assert_close, dot, numeric_grad, ramp};
use switchboard_tensor::Device;

fn long(v: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len() as i64]).unwrap()
}

#[test]
fn nll_forward_values() {
    let x = ramp(&[4, 3], ScalarType::Double);
    let xv = x.to_vec::<f64>().unwrap();
    let t = long(&[2, 0, 1, 2]);
    let w = Tensor::from_vec(vec![0.5f64, 2.0, 1.5], &[3]).unwrap();
    let wv = [0.5, 2.0, 1.5];
    let picks = [xv[2], xv[3], xv[7], xv[11]];
    let cls = [2usize, 0, 1, 2];
    // none
    let (o, tw) = nll_loss_forward(&x, &t, Some(&w), 0, -100).unwrap();
    let want: Vec<f64> = (0..4).map(|i| -picks[i] * wv[cls[i]]).collect();
    assert_close(&o.to_vec::<f64>().unwrap(), &want, 1e-12);
    assert_eq!(tw.sizes(), &[] as &[i64]);
    assert_eq!(tw.to_vec::<f64>().unwrap(), [0.0]);
    // sum and mean, with one target ignored.
    let ti = long(&[2, 0, -100, 2]);
    let (s, tw) = nll_loss_forward(&x, &ti, Some(&w), 2, -100).unwrap();
    let want_sum = -(picks[0] * 1.5 + picks[1] * 0.5 + picks[3] * 1.5);
    assert_close(&s.to_vec::<f64>().unwrap(), &[want_sum], 1e-12);
    assert_close(&tw.to_vec::<f64>().unwrap(), &[3.5], 1e-12);
    let (m, _) = nll_loss_forward(&x, &ti, Some(&w), 1, -100).unwrap();
    assert_close(&m.to_vec::<f64>().unwrap(), &[want_sum / 3.5], 1e-12);
    let (m, tw) = nll_loss_forward(&x, &ti, None, 1, -100).unwrap();
    assert_close(
        &m.to_vec::<f64>().unwrap(),
        &[-(picks[0] + picks[1] + picks[3]) / 3.0],
        1e-12,
    );
    assert_eq!(tw.to_vec::<f64>().unwrap(), [3.0]);
    // 1-d input with a 0-d target; Byte targets; Float; transposed input.
    let x1 = x.select(0, 1).unwrap();
    let (o, _) = nll_loss_forward(
        &x1,
        &Tensor::from_vec(vec![0u8], &[]).unwrap(),
        None,
        0,
        -100,
    )
    .unwrap();
    assert_eq!(o.sizes(), &[] as &[i64]);
    assert_close(&o.to_vec::<f64>().unwrap(), &[-xv[3]], 1e-12);
    let xf = cast(&x, ScalarType::Float)
        .unwrap()
        .t()
        .unwrap()
        .contiguous()
        .unwrap()
        .t()
        .unwrap();
    let (o, _) = nll_loss_forward(&xf, &t, None, 2, -100).unwrap();
    assert_close(
        &o.to_vec_as::<f64>().unwrap(),
        &[-picks.iter().sum::<f64>()],
        1e-6,
    );
    // All ignored: mean is NaN; empty batch: NaN mean, 0 sum.
    let (m, _) = nll_loss_forward(&x, &long(&[-1, -1, -1, -1]), None, 1, -1).unwrap();
    assert!(m.to_vec::<f64>().unwrap()[0].is_nan());
    let e = Tensor::zeros(&[0, 3], ScalarType::Float).unwrap();
    let (m, _) = nll_loss_forward(&e, &long(&[]), None, 1, -100).unwrap();
    assert!(m.to_vec::<f32>().unwrap()[0].is_nan());
    let (s, _) = nll_loss_forward(&e, &long(&[]), None, 2, -100).unwrap();
    assert_eq!(s.to_vec::<f32>().unwrap(), [0.0]);
}

#[test]
fn nll_errors_and_meta() {
    let x = ramp(&[2, 3], ScalarType::Float);
    let e = |x: &Tensor, t: &Tensor, w: Option<&Tensor>| {
        nll_loss_forward(x, t, w, 1, -100).unwrap_err().to_string()
    };
    assert_eq!(e(&x, &long(&[0, 5]), None), "Target 5 is out of bounds.");
    assert_eq!(e(&x, &long(&[0, -3]), None), "Target -3 is out of bounds.");
    assert_eq!(
        e(&x, &long(&[0, 1, 2]), None),
        "size mismatch (got input: [2, 3], target: [3])"
    );
    assert_eq!(
        e(&ramp(&[2, 3, 4], ScalarType::Float), &long(&[0, 1]), None),
        "input tensor should be 1D or 2D"
    );
    assert_eq!(
        e(&x, &long(&[0, 1]), Some(&ramp(&[4], ScalarType::Float))),
        "weight tensor should be defined either for all 3 classes or no classes but got weight \
         tensor of shape: [4]"
    );
    assert_eq!(
        e(&x, &cast(&long(&[0, 1]), ScalarType::Int).unwrap(), None),
        "expected target dtype to be Long or Byte, but got Int"
    );
    assert_eq!(
        e(&cast(&x, ScalarType::Long).unwrap(), &long(&[0, 1]), None),
        "\"nll_loss_out_frame\" not implemented for 'Long'"
    );
    assert!(nll_loss_forward(&x, &long(&[0, 1]), None, 3, -100).is_err());
    let m = Tensor::empty_on(&[5, 3], ScalarType::Half, Device::META).unwrap();
    let mt = Tensor::empty_on(&[5], ScalarType::Long, Device::META).unwrap();
    // Meta tensors take the meta functions (the Meta backend's kernels), not these.
    let [o, tw] = switchboard_ops::structured::nll_loss_forward(&m, &mt, None, 0, -100, None)
        .unwrap()
        .map(|m| m.allocate().unwrap());
    assert!(o.is_meta() && tw.is_meta());
    assert_eq!(o.sizes(), &[5]);
    let meta = switchboard_ops::structured::nll_loss_backward;
    let g = meta(&o, &m, &mt, None, 0, -100, &tw, None)
        .unwrap()
        .allocate()
        .unwrap();
    assert!(g.is_meta());
    assert_eq!(g.sizes(), &[5, 3]);
    let go = Tensor::scalar_tensor(1.0, ScalarType::Float);
    let (_, tw) = nll_loss_forward(&x, &long(&[0, 1]), None, 1, -100).unwrap();
    assert_eq!(
        nll_loss_backward(
            &ramp(&[2], ScalarType::Float),
            &x,
            &long(&[0, 1]),
            None,
            1,
            -100,
            &tw
        )
        .unwrap_err()
        .to_string(),
        "Expected a single element grad_output tensor, but got: [2]"
    );
    assert!(nll_loss_backward(
        &go,
        &x,
        &long(&[0, 1]),
        None,
        1,
        -100,
        &ramp(&[2], ScalarType::Float)
    )
    .is_err());
}

#[test]
fn nll_backward_matches_finite_differences() {
    let x = ramp(&[5, 4], ScalarType::Double);
    let t = long(&[3, 0, -1, 2, 3]);
    let w = Tensor::from_vec(vec![0.5f64, 2.0, 1.5, 0.25], &[4]).unwrap();
    for red in [0i64, 1, 2] {
        for wt in [None, Some(&w)] {
            let f = |x: &Tensor| nll_loss_forward(x, &t, wt, red, -1).unwrap();
            let (o, tw) = f(&x);
            let g = if red == 0 {
                ramp(&[5], ScalarType::Double)
            } else {
                Tensor::scalar_tensor(0.7, ScalarType::Double)
            };
            let gi = nll_loss_backward(&g, &x, &t, wt, red, -1, &tw).unwrap();
            assert_eq!(gi.sizes(), x.sizes());
            let num = numeric_grad(&x, |x| dot(&f(x).0, &g));
            assert_close(&gi.to_vec::<f64>().unwrap(), &num, 1e-6);
            let _ = o;
        }
    }
}

#[test]
fn mse_forward_backward() {
    let a = ramp(&[3, 4], ScalarType::Double);
    let b = ramp(&[4], ScalarType::Double)
        .unsqueeze(0)
        .unwrap()
        .expand(&[3, 4])
        .unwrap();
    let (av, bv) = (a.to_vec::<f64>().unwrap(), b.to_vec::<f64>().unwrap());
    let sq: Vec<f64> = av.iter().zip(&bv).map(|(x, y)| (x - y) * (x - y)).collect();
    let none = mse_loss(&a, &b, 0).unwrap();
    assert_close(&none.to_vec::<f64>().unwrap(), &sq, 1e-12);
    let total: f64 = sq.iter().sum();
    assert_close(
        &mse_loss(&a, &b, 2).unwrap().to_vec::<f64>().unwrap(),
        &[total],
        1e-12,
    );
    assert_close(
        &mse_loss(&a, &b, 1).unwrap().to_vec::<f64>().unwrap(),
        &[total / 12.0],
        1e-12,
    );
    for red in [0i64, 1, 2] {
        let f = |x: &Tensor| mse_loss(x, &b, red).unwrap();
        let y = f(&a);
        let g = if red == 0 {
            ramp(&[3, 4], ScalarType::Double)
        } else {
            Tensor::scalar_tensor(1.3, ScalarType::Double)
        };
        let gi = mse_loss_backward(&g, &a, &b, red).unwrap();
        assert_eq!(gi.sizes(), a.sizes());
        let num = numeric_grad(&a, |x| dot(&f(x), &g));
        assert_close(&gi.to_vec::<f64>().unwrap(), &num, 1e-6);
        let _ = y;
    }
    // Float with a broadcast target; integer inputs fail; meta.
    let af = cast(&a, ScalarType::Float).unwrap();
    let r = mse_loss(&af, &Tensor::scalar_tensor(1.0, ScalarType::Float), 1).unwrap();
    assert_eq!(r.dtype(), ScalarType::Float);
    let i = cast(&a, ScalarType::Long).unwrap();
    assert_eq!(
        mse_loss(&i, &i, 1).unwrap_err().to_string(),
        "\"mse_cpu\" not implemented for 'Long'"
    );
    let m = Tensor::empty_on(&[2, 3], ScalarType::Float, Device::META).unwrap();
    let meta = switchboard_ops::structured::mse_loss(&m, &m, 1, None).unwrap();
    assert!(meta.device.is_meta());
    assert_eq!(&meta.sizes[..], &[] as &[i64]);
    let r = meta.allocate().unwrap();
    let g = mse_loss_backward(&r, &m, &m, 1).unwrap();
    assert!(g.is_meta());
    assert_eq!(g.sizes(), &[2, 3]);
}

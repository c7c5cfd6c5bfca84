//! Tests of `random.rs`: PyTorch's values for fixed seeds, statistics, orders, errors.

use super::*;
use switchboard_tensor::{manual_seed, Device, RawOps};

fn zeros(sizes: &[i64], dtype: ScalarType) -> Tensor {
    Tensor::zeros(sizes, dtype).unwrap()
}

fn close(a: &[f32], b: &[f32], tol: f32) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= tol, "{a:?} vs {b:?}");
    }
}

#[test]
fn pytorch_values_seed_0() {
    let g = Generator::new(0);
    let t = zeros(&[2], ScalarType::Float);
    uniform_(&t, 0.0, 1.0, Some(&g)).unwrap();
    assert_eq!(
        t.to_vec::<f32>().unwrap(),
        [8325804.0 / 16777216.0, 12888623.0 / 16777216.0]
    );

    // torch.randn(2, 3): under 16 elements, the double Box-Muller with its cache.
    g.manual_seed(0);
    let t = zeros(&[2, 3], ScalarType::Float);
    normal_(&t, 0.0, 1.0, Some(&g)).unwrap();
    close(
        &t.to_vec::<f32>().unwrap(),
        &[1.5410, -0.2934, -2.1788, 0.5684, -1.0845, -1.3986],
        1e-4,
    );
    // torch.randn(4, 4): `normal_fill`.
    g.manual_seed(0);
    let t = zeros(&[4, 4], ScalarType::Float);
    normal_(&t, 0.0, 1.0, Some(&g)).unwrap();
    close(
        &t.to_vec::<f32>().unwrap(),
        &[
            -1.1258, -1.1524, -0.2506, -0.4339, 0.8487, 0.6920, -0.3160, -2.1152, 0.3223, -1.2633,
            0.3500, 0.3081, 0.1198, 1.2377, 1.1168, -0.2473,
        ],
        1e-4,
    );
    g.manual_seed(0);
    let t = zeros(&[5], ScalarType::Long);
    random_from_(&t, 0, Some(10), Some(&g)).unwrap();
    assert_eq!(t.to_vec::<i64>().unwrap(), [4, 9, 3, 0, 3]);
}

#[test]
fn pytorch_stream_positions_seed_1234() {
    // randint consumes one 32-bit draw per element below a range of 2^28, two from there on:
    // both ways the following randn sees the same stream.
    let g = Generator::new(1234);
    let t = zeros(&[6], ScalarType::Long);
    random_from_(&t, 0, Some(100), Some(&g)).unwrap();
    assert_eq!(t.to_vec::<i64>().unwrap(), [75, 71, 6, 65, 16, 64]);
    let after = [-0.854_475_14, 0.509_842_2, -0.082_054_55, 0.660_731_7];
    let n = zeros(&[4], ScalarType::Float);
    normal_(&n, 0.0, 1.0, Some(&g)).unwrap();
    close(&n.to_vec::<f32>().unwrap(), &after, 1e-6);

    g.manual_seed(1234);
    let t = zeros(&[3], ScalarType::Long);
    random_from_(&t, 0, Some(1 << 40), Some(&g)).unwrap();
    assert_eq!(
        t.to_vec::<i64>().unwrap(),
        [204_000_912_083, 166_721_346_613, 878_802_328_948]
    );
    normal_(&n, 0.0, 1.0, Some(&g)).unwrap();
    close(&n.to_vec::<f32>().unwrap(), &after, 1e-6);

    // randn(3) leaves its cached sample behind; randint and rand then continue the stream.
    g.manual_seed(1234);
    let n3 = zeros(&[3], ScalarType::Float);
    normal_(&n3, 0.0, 1.0, Some(&g)).unwrap();
    close(
        &n3.to_vec::<f32>().unwrap(),
        &[0.046_130_46, 0.402_402_82, -1.011_529_1],
        1e-6,
    );
    let t = zeros(&[4], ScalarType::Long);
    random_from_(&t, 0, Some(100), Some(&g)).unwrap();
    assert_eq!(t.to_vec::<i64>().unwrap(), [75, 29, 43, 41]);
    let r2 = zeros(&[2], ScalarType::Float);
    uniform_(&r2, 0.0, 1.0, Some(&g)).unwrap();
    close(
        &r2.to_vec::<f32>().unwrap(),
        &[0.774_850_5, 0.820_802_6],
        1e-7,
    );

    g.manual_seed(1234);
    let r = zeros(&[4], ScalarType::Float);
    uniform_(&r, 0.0, 1.0, Some(&g)).unwrap();
    close(
        &r.to_vec::<f32>().unwrap()[..2],
        &[0.028_979, 0.401_899],
        1e-6,
    );
}

#[test]
fn fill_order_is_memory_order_and_thread_independent() {
    let g = Generator::new(7);
    let a = zeros(&[3, 4], ScalarType::Double);
    uniform_(&a, -1.0, 1.0, Some(&g)).unwrap();
    g.manual_seed(7);
    let b = zeros(&[4, 3], ScalarType::Double);
    uniform_(&b.t().unwrap(), -1.0, 1.0, Some(&g)).unwrap();
    assert_eq!(a.to_vec::<f64>().unwrap(), b.to_vec::<f64>().unwrap());
    // Same values on one thread as on many.
    let big = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let g = Generator::new(3);
            let t = zeros(&[100_000], ScalarType::Float);
            normal_(&t, 0.0, 1.0, Some(&g)).unwrap();
            let u = zeros(&[100_001], ScalarType::Int);
            random_from_(&u, -5, Some(5), Some(&g)).unwrap();
            (t.to_vec::<f32>().unwrap(), u.to_vec::<i32>().unwrap())
        })
    };
    assert_eq!(big(1), big(2));
}

#[test]
fn statistics() {
    let g = Generator::new(42);
    let n = 200_000;
    let t = zeros(&[n], ScalarType::Double);
    normal_(&t, 3.0, 2.0, Some(&g)).unwrap();
    let v = t.to_vec::<f64>().unwrap();
    let mean = v.iter().sum::<f64>() / n as f64;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
    assert!(
        (mean - 3.0).abs() < 0.02 && (var.sqrt() - 2.0).abs() < 0.02,
        "{mean} {var}"
    );
    for dtype in [ScalarType::Float, ScalarType::Half, ScalarType::BFloat16] {
        let t = zeros(&[n], dtype);
        uniform_(&t, -2.0, 6.0, Some(&g)).unwrap();
        let v = t.to_vec_as::<f64>().unwrap();
        assert!(v.iter().all(|&x| (-2.0..6.0).contains(&x)) || dtype != ScalarType::Float);
        let mean = v.iter().sum::<f64>() / n as f64;
        assert!((mean - 2.0).abs() < 0.05, "{dtype:?} {mean}");
        let t = zeros(&[1000], dtype);
        normal_(&t, 0.0, 1.0, Some(&g)).unwrap();
        assert!(t.to_vec_as::<f64>().unwrap().iter().all(|x| x.abs() < 7.0));
    }
    let b = zeros(&[n], ScalarType::Bool);
    bernoulli_float_(&b, 0.3, Some(&g)).unwrap();
    let frac = b.to_vec::<bool>().unwrap().iter().filter(|&&x| x).count() as f64 / n as f64;
    assert!((frac - 0.3).abs() < 0.01, "{frac}");
    let i = zeros(&[n], ScalarType::Char);
    random_from_(&i, -3, Some(4), Some(&g)).unwrap();
    let v = i.to_vec::<i8>().unwrap();
    assert!(v.iter().all(|x| (-3..4).contains(x)));
    assert!((-3..4).all(|k| v.contains(&k)));
}

#[test]
fn random_ranges_and_errors() {
    let g = Generator::new(0);
    // `to = None`: up to the dtype's maximum (bool: 1; float: 2^24).
    let b = zeros(&[64], ScalarType::Bool);
    random_from_(&b, 0, None, Some(&g)).unwrap();
    let v = b.to_vec::<bool>().unwrap();
    assert!(v.contains(&true) && v.contains(&false));
    let u = zeros(&[64], ScalarType::Byte);
    random_from_(&u, 250, None, Some(&g)).unwrap();
    assert!(u.to_vec::<u8>().unwrap().iter().all(|&x| x >= 250));
    let f = zeros(&[64], ScalarType::Float);
    random_from_(&f, 0, None, Some(&g)).unwrap();
    assert!(f
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .all(|&x| (0.0..=16_777_216.0).contains(&x)));
    let l = zeros(&[8], ScalarType::Long);
    random_from_(&l, i64::MIN, None, Some(&g)).unwrap();
    // The float rounding of bounds (`update_to`): [0, 2^33) in float32 ends at 2^33 - 512.
    assert_eq!(update_to(1 << 33, ScalarType::Float), (1 << 33) - 512);
    assert_eq!(update_from(-(1 << 33) - 701, ScalarType::Float), -(1 << 33));
    assert_eq!(update_to(10, ScalarType::Float), 10);
    let msg = |r: Result<Tensor>| r.unwrap_err().to_string();
    assert_eq!(
        msg(random_from_(&l, 5, Some(5), Some(&g))),
        "random_ expects 'from' to be less than 'to', but got from=5 >= to=5"
    );
    assert_eq!(
        msg(random_from_(
            &zeros(&[1], ScalarType::Char),
            0,
            Some(200),
            Some(&g)
        )),
        "to - 1 is out of bounds for signed char"
    );
    assert_eq!(
        msg(random_from_(
            &zeros(&[1], ScalarType::Byte),
            -1,
            Some(2),
            Some(&g)
        )),
        "from is out of bounds for unsigned char"
    );
    assert_eq!(
        msg(random_from_(&b, 0, Some(3), Some(&g))),
        "to - 1 is out of bounds for bool"
    );
    assert_eq!(
        msg(random_from_(
            &zeros(&[1], ScalarType::Half),
            1_000_000_000,
            Some(1_000_000_007),
            Some(&g)
        )),
        "from is out of bounds for c10::Half"
    );
    assert_eq!(
        msg(random_from_(
            &zeros(&[1], ScalarType::Int),
            i64::MIN,
            None,
            Some(&g)
        )),
        "random_full_64_bits_range_kernel_cpu handles only int64, double, float and bfloat16"
    );
    // Checks come before the empty early exit, as in PyTorch.
    assert!(random_from_(&zeros(&[0], ScalarType::Int), 0, Some(1 << 32), Some(&g)).is_err());
}

#[test]
fn uniform_normal_bernoulli_errors_and_meta() {
    let g = Generator::new(0);
    let t = zeros(&[3], ScalarType::Float);
    let msg = |r: Result<Tensor>| r.unwrap_err().to_string();
    assert_eq!(
        msg(uniform_(&t, 2.0, 1.0, Some(&g))),
        "uniform_ expects to return a [from, to) range, but found from=2 > to=1"
    );
    assert_eq!(
        msg(uniform_(&zeros(&[1], ScalarType::Half), 0.0, 1e6, Some(&g))),
        "to is out of bounds for c10::Half"
    );
    assert_eq!(
        msg(uniform_(&t, -3e38, 3e38, Some(&g))),
        "uniform_ expects to-from <= std::numeric_limits<Float>::max(), but found to=3e+38 and \
         from=-3e+38 which result in to-from to exceed the limit"
    );
    assert_eq!(
        msg(uniform_(&zeros(&[1], ScalarType::Long), 0.0, 1.0, Some(&g))),
        "\"check_uniform_bounds\" not implemented for 'Long'"
    );
    assert_eq!(
        msg(normal_(&t, 0.0, -1.0, Some(&g))),
        "normal expects std >= 0.0, but found std -1"
    );
    assert_eq!(
        msg(normal_(&zeros(&[1], ScalarType::Int), 0.0, 1.0, Some(&g))),
        "\"normal_kernel_cpu\" not implemented for 'Int'"
    );
    assert_eq!(
        msg(bernoulli_float_(&t, 1.5, Some(&g))),
        "bernoulli_ expects p to be in [0, 1], but got p=1.5"
    );
    let ex = zeros(&[1], ScalarType::Float).expand(&[3]).unwrap();
    assert!(msg(uniform_(&ex, 0.0, 1.0, Some(&g))).contains("more than one element"));
    let m = Tensor::zeros_on(&[2, 2], ScalarType::Float, Device::META).unwrap();
    let before = g.state();
    for r in [
        uniform_(&m, 0.0, 1.0, Some(&g)),
        normal_(&m, 0.0, 1.0, Some(&g)),
        random_from_(&m, 0, Some(3), Some(&g)),
        bernoulli_float_(&m, 0.5, Some(&g)),
    ] {
        assert!(r.unwrap().is_meta());
    }
    assert!(normal_(&m, 0.0, -1.0, Some(&g)).is_err());
    let mut after = g.state();
    assert_eq!(
        after.random(),
        before.clone().random(),
        "meta draws nothing"
    );
    let i = zeros(&[4], ScalarType::Int);
    bernoulli_float_(&i, 1.0, Some(&g)).unwrap();
    assert_eq!(i.to_vec::<i32>().unwrap(), [1; 4]);
}

/// Everything drawing from the default generator, in one test so that no other test
/// interleaves its draws.
#[test]
fn default_generator_and_dropout() {
    let g = manual_seed(0);
    assert_eq!(g.initial_seed(), 0);
    let t = zeros(&[2], ScalarType::Float);
    uniform_(&t, 0.0, 1.0, None).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap()[0], 8325804.0 / 16777216.0);

    let x = Tensor::ones(&[1000], ScalarType::Float);
    let x = x.unwrap();
    let (out, mask) = native_dropout(&x, 0.25, Some(true)).unwrap();
    assert_eq!(mask.dtype(), ScalarType::Bool);
    let (o, m) = (out.to_vec::<f32>().unwrap(), mask.to_vec::<bool>().unwrap());
    for (a, b) in o.iter().zip(&m) {
        assert_eq!(*a, if *b { 1.0 / 0.75 } else { 0.0 });
    }
    let kept = m.iter().filter(|&&b| b).count();
    assert!((700..800).contains(&kept), "{kept}");
    // Same seed, same mask.
    manual_seed(5);
    let (_, m1) = native_dropout(&x, 0.5, None).unwrap();
    manual_seed(5);
    let (_, m2) = native_dropout(&x, 0.5, None).unwrap();
    assert_eq!(m1.to_vec::<bool>().unwrap(), m2.to_vec::<bool>().unwrap());
    // Backward: grad * mask * scale.
    let grad = Tensor::full(&[1000], 2.0, ScalarType::Float).unwrap();
    let gi = native_dropout_backward(&grad, &mask, 1.0 / 0.75).unwrap();
    for (a, b) in gi.to_vec::<f32>().unwrap().iter().zip(&m) {
        assert_eq!(*a, if *b { 2.0 / 0.75 } else { 0.0 });
    }
    // Eval: identity and an all-true mask; p = 1 drops everything.
    let (out, mask) = native_dropout(&x, 0.5, Some(false)).unwrap();
    assert!(!out.is_same(&x));
    assert_eq!(out.to_vec::<f32>().unwrap(), x.to_vec::<f32>().unwrap());
    assert!(mask.to_vec::<bool>().unwrap().iter().all(|&b| b));
    let (out, _) = native_dropout(&x, 1.0, Some(true)).unwrap();
    assert!(out.to_vec::<f32>().unwrap().iter().all(|&v| v == 0.0));
    // Empty and meta inputs.
    let e = zeros(&[0, 3], ScalarType::Float);
    let (o, m) = native_dropout(&e, 0.5, Some(true)).unwrap();
    assert!(o.is_same(&e));
    assert_eq!((m.sizes(), m.dtype()), (&[0i64, 3][..], ScalarType::Float));
    let meta = Tensor::zeros_on(&[2, 3], ScalarType::Half, Device::META).unwrap();
    let (o, m) = native_dropout(&meta, 0.1, Some(true)).unwrap();
    assert!(o.is_meta() && m.is_meta());
    assert_eq!((o.dtype(), m.dtype()), (ScalarType::Half, ScalarType::Bool));
    assert!(native_dropout(&x, 1.5, Some(true)).is_err());
}

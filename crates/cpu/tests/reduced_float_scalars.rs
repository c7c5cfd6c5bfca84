//! Scalar operands of float16/bfloat16 kernels (Note [Reduced-precision scalar operands] in
//! switchboard-cpu): which kernels read the scalar in float and which narrow it to the element
//! type first. Every expected value was recorded from PyTorch 2.15 on the CPU.

use switchboard_dispatcher::PackedScalar;
use switchboard_ops::handles;
use switchboard_tensor::{bf16, f16, Scalar, ScalarType, Tensor};

use switchboard_cpu as _;

fn pk(s: f64) -> PackedScalar {
    Scalar::Float(s).into()
}

fn values(dtype: ScalarType, v: &[f64]) -> Tensor {
    let n = [v.len() as i64];
    match dtype {
        ScalarType::Half => Tensor::from_vec(v.iter().map(|x| f16::from_f64(*x)).collect(), &n),
        _ => Tensor::from_vec(v.iter().map(|x| bf16::from_f64(*x)).collect(), &n),
    }
    .unwrap()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_vec_as::<f64>().unwrap()
}

const INF: f64 = f64::INFINITY;

#[test]
fn mul_reads_a_scalar_operand_in_float() {
    let h = values(ScalarType::Half, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    let r = handles::mul_scalar().call((&h, pk(70000.0))).unwrap();
    assert_eq!(f64s(&r), [0.0, INF, INF, INF, INF, INF]);
    let z = values(ScalarType::Half, &[0.0, 0.0]);
    handles::mul_scalar_().call((&z, pk(70000.0))).unwrap();
    assert_eq!(f64s(&z), [0.0, 0.0]);
    // Any one-value second operand (here a 0-dim float32 tensor); PyTorch's path is
    // asymmetric, so a first operand is cast to float16 (70000 -> inf, 0 * inf = NaN).
    let s = Tensor::from_vec(vec![70000.0f32], &[]).unwrap();
    let z = values(ScalarType::Half, &[0.0, 0.0]);
    assert_eq!(f64s(&handles::mul().call((&z, &s)).unwrap()), [0.0, 0.0]);
    let r = handles::mul().call((&s, &z)).unwrap();
    assert!(f64s(&r).iter().all(|v| v.is_nan()));
    let b = values(ScalarType::BFloat16, &[3.0, 7.0, 100.0]);
    let r = handles::mul_scalar().call((&b, pk(0.3))).unwrap();
    assert_eq!(f64s(&r), [0.8984375, 2.09375, 30.0]);
    let h = values(ScalarType::Half, &[3.0, 7.0, 100.0]);
    let r = handles::mul_scalar().call((&h, pk(0.3))).unwrap();
    assert_eq!(f64s(&r), [0.89990234375, 2.099609375, 30.0]);
}

#[test]
fn div_reads_a_scalar_operand_in_float() {
    let h = values(ScalarType::Half, &[0.0, 1.0]);
    // 1e-8 is 0 in float16: dividing by it would give NaN at 0.
    let r = handles::div_scalar().call((&h, pk(1e-8))).unwrap();
    assert_eq!(f64s(&r), [0.0, INF]);
    for mode in ["trunc", "floor"] {
        let r = handles::div_scalar_mode()
            .call((&h, pk(1e-8), Some(mode)))
            .unwrap();
        assert_eq!(f64s(&r), [0.0, INF], "{mode}");
    }
    let ones = values(ScalarType::Half, &[1.0, 1.0]);
    let r = handles::div_scalar().call((&ones, pk(0.3))).unwrap();
    assert_eq!(f64s(&r), [3.333984375, 3.333984375]);
    let ones = values(ScalarType::BFloat16, &[1.0]);
    let r = handles::div_scalar().call((&ones, pk(0.3))).unwrap();
    assert_eq!(f64s(&r), [3.328125]);
}

#[test]
fn add_narrows_its_scalar_and_alpha() {
    // `other` goes through the common dtype (0.3 -> 0.30078125), `alpha` through
    // `alpha.to<scalar_t>()`; the sum is then computed in float.
    let h = values(ScalarType::Half, &[3.0, 7.0, 100.0]);
    let one = Scalar::Int(1).into();
    let r = handles::add_scalar().call((&h, pk(0.3), one)).unwrap();
    assert_eq!(f64s(&r), [3.30078125, 7.30078125, 100.3125]);
    let a = values(ScalarType::Half, &[1.0, 1.0, 1.0]);
    let b = values(ScalarType::Half, &[3.0, 7.0, 333.0]);
    for (alpha, expected) in [
        (0.7, [3.1015625, 5.90234375, 234.125]),
        (1.1, [4.296875, 8.6953125, 367.25]),
    ] {
        let r = handles::add().call((&a, &b, pk(alpha))).unwrap();
        assert_eq!(f64s(&r), expected, "alpha {alpha}");
    }
}

#[test]
fn threshold_backward_compares_in_float() {
    // 2.4999 rounds to 2.5 in float16; PyTorch compares 2.5 <= 2.4999f (false): the
    // gradient passes.
    for dtype in [ScalarType::Half, ScalarType::BFloat16] {
        let g = values(dtype, &[1.0, 1.0]);
        let x = values(dtype, &[2.5, 3.0]);
        let r = handles::threshold_backward()
            .call((&g, &x, pk(2.4999)))
            .unwrap();
        assert_eq!(f64s(&r), [1.0, 1.0], "{dtype:?}");
    }
    // Integer tensors compare in their own type: 2.5 is 2 in int8.
    let g = Tensor::from_vec(vec![1i8, 1], &[2]).unwrap();
    let x = Tensor::from_vec(vec![2i8, 3], &[2]).unwrap();
    let r = handles::threshold_backward()
        .call((&g, &x, pk(2.5)))
        .unwrap();
    assert_eq!(r.to_vec::<i8>().unwrap(), [0, 1]);
}

//! `pow.Tensor_Scalar` with the exponents PyTorch computes without `pow` (Note [Special scalar
//! exponents] in switchboard-cpu). Expected values recorded from PyTorch 2.15 on the CPU.

use switchboard_dispatcher::PackedScalar;
use switchboard_ops::handles;
use switchboard_tensor::{bf16, Scalar, Tensor};

use switchboard_cpu as _;

fn pow(x: &Tensor, e: Scalar) -> Vec<f64> {
    let e: PackedScalar = e.into();
    let r = handles::pow_tensor_scalar().call((x, e)).unwrap();
    r.to_vec_as::<f64>().unwrap()
}

#[test]
fn cube_and_inverse_square_round_each_product() {
    // float32: x * x * x, not the correctly rounded cube (254.0045166015625).
    let x = Tensor::from_vec(vec![f32::from_bits(0x40caa874)], &[1]).unwrap();
    assert_eq!(pow(&x, Scalar::Int(3)), [254.004_531_860_351_56]);
    let x = Tensor::from_vec(vec![f32::from_bits(0x404563ff)], &[1]).unwrap();
    assert_eq!(pow(&x, Scalar::Float(-2.0)), [0.105_125_226_080_417_63]);
    // bfloat16 multiplies in bfloat16: 7.78125 ** 3 is 470, not 472.
    let b = |v: &[f32]| {
        Tensor::from_vec(
            v.iter().map(|x| bf16::from_f32(*x)).collect(),
            &[v.len() as i64],
        )
        .unwrap()
    };
    assert_eq!(pow(&b(&[7.78125, 5.90625]), Scalar::Int(3)), [470.0, 207.0]);
    assert_eq!(
        pow(&b(&[5.90625, 2.953125]), Scalar::Int(-2)),
        [0.028564453125, 0.1142578125]
    );
}

#[test]
fn half_and_square_root() {
    // x ** 0.5 is sqrt(x).
    let x = Tensor::from_vec(vec![2.0f32, 9.0], &[2]).unwrap();
    let sqrt = switchboard_ops::sqrt(&x)
        .unwrap()
        .to_vec_as::<f64>()
        .unwrap();
    assert_eq!(pow(&x, Scalar::Float(0.5)), sqrt);
    // float16 keeps pow in float: 7.78125 ** 3 rounds once.
    let h = Tensor::from_vec(vec![switchboard_tensor::f16::from_f32(7.78125)], &[1]).unwrap();
    assert_eq!(pow(&h, Scalar::Int(3)), [471.25]);
}

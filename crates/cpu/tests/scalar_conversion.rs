//! Scalar arguments converted to a tensor's dtype (Note [Checked scalar conversion] in
//! switchboard-tensor), through the dispatcher as a user calls them. Every expected value and
//! message was recorded from PyTorch 2.15 on the CPU.

use switchboard_dispatcher::{PackedScalar, Result};
use switchboard_ops::handles;
use switchboard_tensor::{Scalar, ScalarType, Tensor};

use switchboard_cpu as _;

/// A scalar argument of a typed call.
fn pk(s: Scalar) -> PackedScalar {
    s.into()
}

fn err(r: Result<Tensor>) -> String {
    match r {
        Ok(t) => panic!("expected an error, got {t:?}"),
        Err(e) => e.to_string(),
    }
}

fn overflow(cpp_type: &str) -> String {
    format!("value cannot be converted to type {cpp_type} without overflow")
}

fn i8s(v: &[i8]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len() as i64]).unwrap()
}

fn u8s(v: &[u8]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len() as i64]).unwrap()
}

fn mask() -> Tensor {
    Tensor::from_vec(vec![true, false], &[2]).unwrap()
}

fn typed(dtype: ScalarType) -> Tensor {
    Tensor::ones(&[2], dtype).unwrap()
}

#[test]
fn clamp_bounds_outside_an_integer_dtype() {
    // A bound that cannot change any element is dropped: uint8 is left unchanged.
    let u = u8s(&[0, 5, 200]);
    let some = |v: i64| Some(Scalar::Int(v));
    handles::clamp_().call((&u, some(-1), some(300))).unwrap();
    assert_eq!(u.to_vec::<u8>().unwrap(), [0, 5, 200]);
    let i = i8s(&[0, 5, -100]);
    let r = handles::clamp().call((&i, some(-300), None)).unwrap();
    assert_eq!(r.to_vec::<i8>().unwrap(), [0, 5, -100]);
    let r = handles::clamp_max()
        .call((&i, pk(Scalar::Int(300))))
        .unwrap();
    assert_eq!(r.to_vec::<i8>().unwrap(), [0, 5, -100]);
    let r = handles::clamp_min()
        .call((&u, pk(Scalar::Int(-1))))
        .unwrap();
    assert_eq!(r.to_vec::<u8>().unwrap(), [0, 5, 200]);
    // A bound that would force every element out of range is an error.
    assert_eq!(
        err(handles::clamp().call((&i, some(300), None))),
        "Clamp min value 300 is outside the representable range of Char"
    );
    assert_eq!(
        err(handles::clamp().call((&i, None, some(-300)))),
        "Clamp max value -300 is outside the representable range of Char"
    );
    assert_eq!(
        err(handles::clamp_min().call((&i, pk(Scalar::Int(300))))),
        "Clamp min value 300 is outside the representable range of Char"
    );
    assert_eq!(
        err(handles::clamp_max().call((&u, pk(Scalar::Int(-1))))),
        "Clamp max value -1 is outside the representable range of Byte"
    );
    // A float bound promotes an integer tensor (not in place); floating dtypes convert with
    // the check.
    assert_eq!(
        err(handles::clamp_().call((&i, Some(Scalar::Float(1.5)), None))),
        "result type Float can't be cast to the desired output type signed char"
    );
    assert_eq!(
        err(handles::clamp_min_().call((&i, pk(Scalar::Float(1.5))))),
        "result type Float can't be cast to the desired output type signed char"
    );
    let r = handles::clamp()
        .call((&i, Some(Scalar::Float(1.5)), None))
        .unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [1.5, 5.0, 1.5]);
    let big = Some(Scalar::Float(1e308));
    assert_eq!(
        err(handles::clamp().call((&typed(ScalarType::Float), big, None))),
        overflow("float")
    );
    let h = Some(Scalar::Float(70000.0));
    assert_eq!(
        err(handles::clamp().call((&typed(ScalarType::Half), None, h))),
        overflow("c10::Half")
    );
}

#[test]
fn masked_fill_and_fill_check_the_value() {
    // (dtype, value, expected message) for each element type.
    let cases = [
        (ScalarType::Byte, Scalar::Int(300), "uint8_t"),
        (ScalarType::Byte, Scalar::Float(-0.5), "uint8_t"),
        (ScalarType::Char, Scalar::Int(300), "int8_t"),
        (ScalarType::Short, Scalar::Int(70000), "int16_t"),
        (ScalarType::Int, Scalar::Int(1 << 40), "int"),
        (ScalarType::Long, Scalar::Float(f64::NAN), "int64_t"),
        (ScalarType::Half, Scalar::Float(70000.0), "c10::Half"),
        (ScalarType::BFloat16, Scalar::Float(1e308), "c10::BFloat16"),
        (ScalarType::Float, Scalar::Float(1e308), "float"),
    ];
    for (dtype, value, name) in cases {
        let t = typed(dtype);
        assert_eq!(
            err(handles::masked_fill().call((&t, &mask(), pk(value)))),
            overflow(name),
            "masked_fill {dtype:?} {value:?}"
        );
        assert_eq!(err(handles::fill_().call((&t, pk(value)))), overflow(name));
        let full = handles::full().call((&[2][..], pk(value), Some(dtype), None, None, None));
        assert_eq!(err(full), overflow(name));
    }
    // In range, a negative integer wraps into uint8, and bool takes anything.
    let r = handles::masked_fill()
        .call((&u8s(&[0, 0]), &mask(), pk(Scalar::Int(-1))))
        .unwrap();
    assert_eq!(r.to_vec::<u8>().unwrap(), [255, 0]);
    let b = typed(ScalarType::Bool);
    let r = handles::masked_fill()
        .call((&b, &mask(), pk(Scalar::Float(f64::NAN))))
        .unwrap();
    assert_eq!(r.to_vec::<bool>().unwrap(), [true, true]);
    let r = handles::masked_fill()
        .call((&i8s(&[0, 0]), &mask(), pk(Scalar::Float(-0.5))))
        .unwrap();
    assert_eq!(r.to_vec::<i8>().unwrap(), [0, 0]);
}

#[test]
fn alphas_are_checked_in_the_result_dtype() {
    let i = i8s(&[1, 2]);
    let a300 = Scalar::Int(300);
    assert_eq!(
        err(handles::add().call((&i, &i, pk(a300)))),
        overflow("int8_t")
    );
    assert_eq!(
        err(handles::sub().call((&i, &i, pk(a300)))),
        overflow("int8_t")
    );
    assert_eq!(
        err(handles::rsub().call((&i, &i, pk(a300)))),
        overflow("int8_t")
    );
    assert_eq!(
        err(handles::add_scalar().call((&i, pk(Scalar::Int(1)), pk(a300)))),
        overflow("int8_t")
    );
    // `sub` negates alpha first: -(-128) does not fit int8.
    assert_eq!(
        err(handles::sub().call((&i, &i, pk(Scalar::Int(-128))))),
        overflow("int8_t")
    );
    let f = typed(ScalarType::Float);
    let big = Scalar::Float(1e308);
    assert_eq!(
        err(handles::add().call((&f, &f, pk(big)))),
        overflow("float")
    );
    let h = typed(ScalarType::Half);
    assert_eq!(
        err(handles::add().call((&h, &h, pk(Scalar::Int(70000))))),
        overflow("c10::Half")
    );
    let idx = Tensor::from_vec(vec![0i64], &[1]).unwrap();
    let src = i8s(&[1]);
    assert_eq!(
        err(handles::index_add().call((&i, 0, &idx, &src, pk(a300)))),
        overflow("int8_t")
    );
    // addmm converts alpha and beta to the op math type: float for float16/bfloat16.
    let m = |dt| Tensor::ones(&[1, 1], dt).unwrap();
    let (i8m, one) = (m(ScalarType::Char), Scalar::Int(1));
    assert_eq!(
        err(handles::addmm().call((&i8m, &i8m, &i8m, pk(a300), pk(one)))),
        overflow("int8_t")
    );
    let bf = m(ScalarType::BFloat16);
    assert_eq!(
        err(handles::addmm().call((&bf, &bf, &bf, pk(one), pk(big)))),
        overflow("float")
    );
    let hm = m(ScalarType::Half);
    let r = handles::addmm()
        .call((&hm, &hm, &hm, pk(one), pk(Scalar::Float(70000.0))))
        .unwrap();
    assert_eq!(r.to_vec_as::<f64>().unwrap(), [f64::INFINITY]);
    // The in-range uint8 wrap: alpha -1 is 255.
    let u = u8s(&[1, 2]);
    let r = handles::add().call((&u, &u, pk(Scalar::Int(-1)))).unwrap();
    assert_eq!(r.to_vec::<u8>().unwrap(), [0, 0]);
}

#[test]
fn other_checked_scalars() {
    let i = i8s(&[1, 2]);
    let a300 = Scalar::Int(300);
    assert_eq!(
        err(handles::threshold_backward().call((&i, &i, pk(a300)))),
        overflow("int8_t")
    );
    let bf = typed(ScalarType::BFloat16);
    assert_eq!(
        err(handles::threshold_backward().call((&bf, &bf, pk(Scalar::Float(1e308))))),
        overflow("float")
    );
    assert_eq!(
        err(handles::pow_tensor_scalar().call((&i, pk(a300)))),
        overflow("int8_t")
    );
    let h = typed(ScalarType::Half);
    assert_eq!(
        err(handles::pow_tensor_scalar().call((&h, pk(Scalar::Float(70000.0))))),
        overflow("c10::Half")
    );
    let f = typed(ScalarType::Float);
    let r = handles::pow_tensor_scalar()
        .call((&f, pk(Scalar::Float(1e308))))
        .unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [1.0, 1.0]);
    // `where` makes the scalar a tensor of the result dtype: checked except into
    // float16/bfloat16.
    assert_eq!(
        err(handles::where_scalar_other().call((&mask(), &i, pk(a300)))),
        overflow("int8_t")
    );
    assert_eq!(
        err(handles::where_scalar_self().call((&mask(), pk(a300), &i))),
        overflow("int8_t")
    );
    let longs = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
    assert_eq!(
        err(handles::where_scalar_other().call((&mask(), &longs, pk(Scalar::Float(1e308))))),
        overflow("float")
    );
    assert_eq!(
        err(handles::where_scalar().call((&mask(), pk(Scalar::Float(1e308)), pk(Scalar::Int(2))))),
        overflow("float")
    );
    let r = handles::where_scalar_other()
        .call((&mask(), &h, pk(Scalar::Float(70000.0))))
        .unwrap();
    assert_eq!(r.to_vec_as::<f64>().unwrap(), [1.0, f64::INFINITY]);
}

#[test]
fn wrapped_number_operands_stay_unchecked() {
    // PyTorch casts these through the common dtype (a C++ static_cast): they wrap.
    let i = i8s(&[1, 2]);
    let a300 = Scalar::Int(300);
    let one = Scalar::Int(1);
    let r = handles::add_scalar().call((&i, pk(a300), pk(one))).unwrap();
    assert_eq!(r.to_vec::<i8>().unwrap(), [45, 46]);
    let r = handles::mul_scalar().call((&i, pk(a300))).unwrap();
    assert_eq!(r.to_vec::<i8>().unwrap(), [44, 88]);
    let x = i8s(&[44, -56]);
    let r = handles::eq_scalar().call((&x, pk(a300))).unwrap();
    assert_eq!(r.to_vec::<bool>().unwrap(), [true, false]);
    let f = typed(ScalarType::Float);
    let r = handles::add_scalar()
        .call((&f, pk(Scalar::Float(1e308)), pk(one)))
        .unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [f32::INFINITY; 2]);
}

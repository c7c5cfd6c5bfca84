//! The complex dtypes in the tensor data model: element access, creation, copies between
//! complex and real tensors as PyTorch's `copy_` does them, and safetensors' `C64`.

use switchboard_tensor::{
    copy_strided, load_safetensors, save_safetensors, Complex32, Complex64, RawOps, ScalarType,
    Tensor,
};

fn c32(v: &[(f32, f32)]) -> Vec<Complex32> {
    v.iter().map(|&(re, im)| Complex32::new(re, im)).collect()
}

#[test]
fn dtype_facts() {
    let (cf, cd) = (ScalarType::ComplexFloat, ScalarType::ComplexDouble);
    assert_eq!((cf as i8, cd as i8), (9, 10));
    assert_eq!((cf.element_size(), cd.element_size()), (8, 16));
    assert_eq!(cf.to_string(), "torch.complex64");
    assert_eq!("cdouble".parse::<ScalarType>().unwrap(), cd);
    assert!(cf.is_complex() && !cf.is_floating_point() && !cf.is_integral(true));
    assert_eq!(cd.to_real_value_type(), ScalarType::Double);
    assert_eq!(ScalarType::Float.to_complex_type().unwrap(), cf);
    assert_eq!(
        ScalarType::Long.to_complex_type().unwrap_err().to_string(),
        "Unknown Complex ScalarType for Long"
    );
}

#[test]
fn create_and_read() {
    let t = Tensor::from_vec(c32(&[(1.0, 2.0), (3.0, -4.0)]), &[2]).unwrap();
    assert_eq!(t.dtype(), ScalarType::ComplexFloat);
    assert_eq!(
        t.to_vec::<Complex32>().unwrap(),
        c32(&[(1.0, 2.0), (3.0, -4.0)])
    );
    assert_eq!(t.to_vec_as::<f64>().unwrap(), [1.0, 3.0]);
    assert_eq!(
        t.to_vec::<f32>().unwrap_err().to_string(),
        "expected scalar type Float but found ComplexFloat"
    );
    let f = Tensor::full(&[2], 1.5, ScalarType::ComplexDouble).unwrap();
    assert_eq!(
        f.to_vec::<Complex64>().unwrap(),
        [Complex64::new(1.5, 0.0); 2]
    );
    assert!(Tensor::zeros(&[3], ScalarType::ComplexFloat)
        .unwrap()
        .to_vec::<Complex32>()
        .unwrap()
        .iter()
        .all(|z| *z == Complex32::new(0.0, 0.0)));
    assert!(t.narrow(0, 0, 1).unwrap().item().is_err());
}

/// Real to complex sets the real part; complex to real keeps it (PyTorch warns there), complex
/// to bool is "either part non-zero".
#[test]
fn copies_between_complex_and_real() {
    let src = Tensor::from_vec(vec![1i64, -2, 3], &[3]).unwrap();
    let dst = Tensor::zeros(&[3], ScalarType::ComplexFloat).unwrap();
    copy_strided(&src, &dst).unwrap();
    assert_eq!(
        dst.to_vec::<Complex32>().unwrap(),
        c32(&[(1.0, 0.0), (-2.0, 0.0), (3.0, 0.0)])
    );
    let z = Tensor::from_vec(c32(&[(1.7, 2.0), (0.0, 1.0), (0.0, 0.0)]), &[3]).unwrap();
    let ints = Tensor::zeros(&[3], ScalarType::Int).unwrap();
    copy_strided(&z, &ints).unwrap();
    assert_eq!(ints.to_vec::<i32>().unwrap(), [1, 0, 0]);
    let bools = Tensor::zeros(&[3], ScalarType::Bool).unwrap();
    copy_strided(&z, &bools).unwrap();
    assert_eq!(bools.to_vec::<bool>().unwrap(), [true, true, false]);
    let wide = Tensor::zeros(&[3], ScalarType::ComplexDouble).unwrap();
    copy_strided(&z, &wide).unwrap();
    assert_eq!(
        wide.to_vec::<Complex64>().unwrap()[1],
        Complex64::new(0.0, 1.0)
    );
    // Strided: a transposed complex source.
    let m = Tensor::from_vec(
        c32(&[(1.0, 1.0), (2.0, 2.0), (3.0, 3.0), (4.0, 4.0)]),
        &[2, 2],
    )
    .unwrap();
    let mt = m.t().unwrap().contiguous().unwrap();
    assert_eq!(
        mt.to_vec::<Complex32>().unwrap(),
        c32(&[(1.0, 1.0), (3.0, 3.0), (2.0, 2.0), (4.0, 4.0)])
    );
}

#[test]
fn safetensors_complex64_round_trip() {
    let t = Tensor::from_vec(c32(&[(1.0, 2.0), (3.0, -4.0)]), &[2]).unwrap();
    let bytes = save_safetensors(&[("z", &t)], None).unwrap();
    let back = load_safetensors(&bytes).unwrap();
    assert_eq!(back["z"].dtype(), ScalarType::ComplexFloat);
    assert_eq!(
        back["z"].to_vec::<Complex32>().unwrap(),
        t.to_vec::<Complex32>().unwrap()
    );
    let d = Tensor::zeros(&[1], ScalarType::ComplexDouble).unwrap();
    assert_eq!(
        save_safetensors(&[("d", &d)], None)
            .unwrap_err()
            .to_string(),
        "safetensors has no dtype for complex128 (its only complex dtype, C64, is complex64)"
    );
}

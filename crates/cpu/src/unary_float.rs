//! The float unary operators of PyTorch's `UnaryOps.cpp` beyond `exp`/`log`/`sqrt`: the
//! trigonometric and hyperbolic functions and their inverses, `erf`, `expm1`, `log1p`,
//! `log10`, `log2` and `reciprocal`, each with its `out=` (`sin_out`) and in-place (`sin_`)
//! forms. Integer and bool inputs compute in the default float dtype, as PyTorch's
//! `build_borrowing_unary_float_op` makes them.

use crate::unary::float_unary_op;

float_unary_op!(
    /// `acos(Tensor self)`: the arc cosine (NaN outside `[-1, 1]`).
    Acos, acos, acos_out, acos_, "acos_vml_cpu", |x| x.acos()
);
float_unary_op!(
    /// `asin(Tensor self)`: the arc sine (NaN outside `[-1, 1]`).
    Asin, asin, asin_out, asin_, "asin_vml_cpu", |x| x.asin()
);
float_unary_op!(
    /// `atan(Tensor self)`: the arc tangent.
    Atan, atan, atan_out, atan_, "atan_vml_cpu", |x| x.atan()
);
float_unary_op!(
    /// `cos(Tensor self)`.
    ///
    /// ```
    /// use switchboard_cpu::cos;
    /// use switchboard_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![0i64], &[1]).unwrap();
    /// assert_eq!(cos(&t).unwrap().to_vec::<f32>().unwrap(), [1.0]);
    /// ```
    Cos, cos, cos_out, cos_, "cos_vml_cpu", |x| x.cos()
);
float_unary_op!(
    /// `sin(Tensor self)`.
    Sin, sin, sin_out, sin_, "sin_vml_cpu", |x| x.sin()
);
float_unary_op!(
    /// `tan(Tensor self)`.
    Tan, tan, tan_out, tan_, "tan_vml_cpu", |x| x.tan()
);
float_unary_op!(
    /// `cosh(Tensor self)`.
    Cosh, cosh, cosh_out, cosh_, "cosh_vml_cpu", |x| x.cosh()
);
float_unary_op!(
    /// `sinh(Tensor self)`.
    Sinh, sinh, sinh_out, sinh_, "sinh_vml_cpu", |x| x.sinh()
);
float_unary_op!(
    /// `acosh(Tensor self)`: NaN below 1.
    Acosh, acosh, acosh_out, acosh_, "acosh_vml_cpu", |x| x.acosh()
);
float_unary_op!(
    /// `asinh(Tensor self)`.
    Asinh, asinh, asinh_out, asinh_, "asinh_vml_cpu", |x| x.asinh()
);
float_unary_op!(
    /// `atanh(Tensor self)`: infinite at ±1, NaN outside `[-1, 1]`.
    Atanh, atanh, atanh_out, atanh_, "atanh_vml_cpu", |x| x.atanh()
);
float_unary_op!(
    /// `erf(Tensor self)`: the error function.
    Erf, erf, erf_out, erf_, "erf_vml_cpu", |x| x.erf()
);
float_unary_op!(
    /// `expm1(Tensor self)`: `e^x - 1`, exact near 0.
    Expm1, expm1, expm1_out, expm1_, "expm1_vml_cpu", |x| x.exp_m1()
);
float_unary_op!(
    /// `log1p(Tensor self)`: `ln(1 + x)`, exact near 0.
    Log1p, log1p, log1p_out, log1p_, "log1p_vml_cpu", |x| x.ln_1p()
);
float_unary_op!(
    /// `log10(Tensor self)`.
    Log10, log10, log10_out, log10_, "log10_vml_cpu", |x| x.log10()
);
float_unary_op!(
    /// `log2(Tensor self)`.
    Log2, log2, log2_out, log2_, "log2_vml_cpu", |x| x.log2()
);
float_unary_op!(
    /// `reciprocal(Tensor self)`: `1 / x` (infinite at 0).
    Reciprocal, reciprocal, reciprocal_out, reciprocal_, "reciprocal_cpu", |x| F::ONE.div(x)
);

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_tensor::{ScalarType, Tensor};

    #[test]
    fn values_and_domains() {
        let t = Tensor::from_vec(vec![-2.0f64, -1.0, 0.0, 0.5, 1.0], &[5]).unwrap();
        let v = |r: Tensor| r.to_vec::<f64>().unwrap();
        let acos = v(acos(&t).unwrap());
        assert!(acos[0].is_nan());
        assert_eq!(acos[1], std::f64::consts::PI);
        assert_eq!(v(atanh(&t).unwrap())[4], f64::INFINITY);
        assert_eq!(v(reciprocal(&t).unwrap())[2], f64::INFINITY);
        assert!(v(acosh(&t).unwrap())[3].is_nan());
        assert_eq!(v(log2(&t).unwrap())[3], -1.0);
        assert_eq!(v(expm1(&t).unwrap())[2], 0.0);
        let tiny = Tensor::from_vec(vec![1e-20f64], &[1]).unwrap();
        assert_eq!(v(log1p(&tiny).unwrap()), [1e-20]);
        assert_eq!(v(expm1(&tiny).unwrap()), [1e-20]);
    }

    #[test]
    fn integers_compute_in_float() {
        let i = Tensor::from_vec(vec![1i32, 10, 100], &[3]).unwrap();
        let r = log10(&i).unwrap();
        assert_eq!(r.dtype(), ScalarType::Float);
        assert_eq!(r.to_vec::<f32>().unwrap(), [0.0, 1.0, 2.0]);
        let b = Tensor::from_vec(vec![true, false], &[2]).unwrap();
        assert_eq!(
            reciprocal(&b).unwrap().to_vec::<f32>().unwrap(),
            [1.0, f32::INFINITY]
        );
        // In place, the float result cannot be cast back to the integer `self`.
        assert!(sin_(&i).is_err());
    }
}

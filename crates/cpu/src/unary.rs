//! Unary pointwise ops: `neg`, `abs`, `relu`, and the floating ones (`exp`, `log`, `sqrt`,
//! `rsqrt`, `sigmoid`, `tanh`, `silu`, `gelu`), each with `out=` (`exp_out`) and in-place
//! (`exp_`) forms. Floating ops promote integer and bool inputs to the default float dtype.

use switchboard_tensor::{ScalarType, Tensor};

use crate::dispatch_dtype::{CpuElement, Float, FloatElement, Num};
use crate::error::{invalid, Result};
use crate::iter::{IterConfig, TensorIter};
use crate::{dispatch_all_types, dispatch_all_types_and_bool, dispatch_floating_types};

/// A pointwise function on floating compute types (`f32`, `f64`).
pub trait FloatUnary: Sync {
    /// Applies the function.
    fn apply<F: Float>(&self, x: F) -> F;
}

/// A pointwise function on every compute type.
pub trait NumUnary: Sync {
    /// Applies the function.
    fn apply<N: Num>(&self, x: N) -> N;
}

/// Runs a [`FloatUnary`] over an iterator whose dtypes are the floating type `T`.
pub(crate) fn float_unary_loop<T: FloatElement>(
    iter: &TensorIter,
    op: &impl FloatUnary,
) -> Result<()> {
    iter.for_each1(move |a: T| T::from_acc(op.apply(a.to_acc())))
}

fn num_unary_loop<T: CpuElement>(iter: &TensorIter, op: &impl NumUnary) -> Result<()> {
    iter.for_each1(move |a: T| T::from_acc(op.apply(a.to_acc())))
}

pub(crate) fn float_unary(
    name: &'static str,
    self_: &Tensor,
    out: Option<&Tensor>,
    op: &impl FloatUnary,
) -> Result<Tensor> {
    // PyTorch's `build_borrowing_unary_float_op` computes integers in the default float
    // dtype; silu is a plain unary op (`build_unary_op`), whose float-only kernel then refuses
    // them ("silu_cpu" not implemented for 'Long').
    let iter = IterConfig::new(name)
        .maybe_out(out)
        .input(self_)
        .int_to_float(name != "silu_cpu")
        .all_same_dtype(name == "silu_cpu")
        .build()?;
    dispatch_floating_types!(iter.common_dtype(), name, T => float_unary_loop::<T>(&iter, op))?;
    iter.finish()
}

pub(crate) fn num_unary(
    name: &'static str,
    self_: &Tensor,
    out: Option<&Tensor>,
    op: &impl NumUnary,
    with_bool: bool,
) -> Result<Tensor> {
    let iter = IterConfig::new(name)
        .maybe_out(out)
        .input(self_)
        .all_same_dtype(true)
        .build()?;
    if with_bool {
        dispatch_all_types_and_bool!(iter.common_dtype(), name, T => num_unary_loop::<T>(&iter, op))?;
    } else {
        dispatch_all_types!(iter.common_dtype(), name, T => num_unary_loop::<T>(&iter, op))?;
    }
    iter.finish()
}

/// Defines a float unary operator: its function (a [`FloatUnary`]) and its functional,
/// `out=` and in-place kernels, which compute integer and bool inputs in the default float
/// dtype.
macro_rules! float_unary_op {
    ($(#[$doc:meta])* $Op:ident, $f:ident, $f_out:ident, $f_:ident, $kname:literal, |$x:ident| $body:expr) => {
        #[doc = concat!("The function of `", stringify!($f), "`.")]
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $Op;
        impl $crate::unary::FloatUnary for $Op {
            #[inline(always)]
            fn apply<F: $crate::dispatch_dtype::Float>(&self, $x: F) -> F {
                $body
            }
        }
        $(#[$doc])*
        pub fn $f(self_: &switchboard_tensor::Tensor) -> $crate::error::Result<switchboard_tensor::Tensor> {
            $crate::unary::float_unary($kname, self_, None, &$Op)
        }
        #[doc = concat!("`", stringify!($f), ".out(Tensor self, *, Tensor(a!) out)`.")]
        pub fn $f_out(
            self_: &switchboard_tensor::Tensor,
            out: &switchboard_tensor::Tensor,
        ) -> $crate::error::Result<switchboard_tensor::Tensor> {
            $crate::unary::float_unary($kname, self_, Some(out), &$Op)
        }
        #[doc = concat!("`", stringify!($f), "_(Tensor(a!) self)`.")]
        pub fn $f_(self_: &switchboard_tensor::Tensor) -> $crate::error::Result<switchboard_tensor::Tensor> {
            $crate::unary::float_unary($kname, self_, Some(self_), &$Op)
        }
    };
}
pub(crate) use float_unary_op;

float_unary_op!(
    /// `exp(Tensor self)`: `e^x`.
    Exp, exp, exp_out, exp_, "exp_vml_cpu", |x| x.exp()
);
float_unary_op!(
    /// `log(Tensor self)`: the natural logarithm.
    Log, log, log_out, log_, "log_vml_cpu", |x| x.ln()
);
float_unary_op!(
    /// `sqrt(Tensor self)`.
    Sqrt, sqrt, sqrt_out, sqrt_, "sqrt_vml_cpu", |x| x.sqrt()
);
float_unary_op!(
    /// `rsqrt(Tensor self)`: `1 / sqrt(x)`.
    Rsqrt, rsqrt, rsqrt_out, rsqrt_, "rsqrt_cpu", |x| x.rsqrt()
);
float_unary_op!(
    /// `sigmoid(Tensor self)`: `1 / (1 + e^-x)`.
    ///
    /// ```
    /// use switchboard_cpu::sigmoid;
    /// use switchboard_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![0i64], &[1]).unwrap();
    /// assert_eq!(sigmoid(&t).unwrap().to_vec::<f32>().unwrap(), [0.5]);
    /// ```
    Sigmoid, sigmoid, sigmoid_out, sigmoid_, "sigmoid_cpu", |x| F::ONE.div(F::ONE.add(x.neg().exp()))
);
float_unary_op!(
    /// `tanh(Tensor self)`.
    Tanh, tanh, tanh_out, tanh_, "tanh_vml_cpu", |x| x.tanh()
);
float_unary_op!(
    /// `silu(Tensor self)`: `x * sigmoid(x)`.
    Silu, silu, silu_out, silu_, "silu_cpu", |x| x.div(F::ONE.add(x.neg().exp()))
);

/// The `approximate` argument of `gelu`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeluApproximate {
    /// `x * Φ(x)` with the exact normal CDF (erf).
    None,
    /// The tanh approximation.
    Tanh,
}

impl GeluApproximate {
    /// Parses PyTorch's `approximate` string (`'none'` or `'tanh'`).
    pub fn parse(s: &str) -> Result<GeluApproximate> {
        match s {
            "none" => Ok(GeluApproximate::None),
            "tanh" => Ok(GeluApproximate::Tanh),
            _ => Err(invalid("approximate argument must be either none or tanh.")),
        }
    }
}

/// The function of `gelu`.
#[derive(Clone, Copy, Debug)]
pub struct Gelu(pub GeluApproximate);

/// `sqrt(2 / pi)`.
pub(crate) const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
/// `1 / sqrt(2)`.
pub(crate) const FRAC_1_SQRT_2: f64 = std::f64::consts::FRAC_1_SQRT_2;

impl FloatUnary for Gelu {
    #[inline(always)]
    fn apply<F: Float>(&self, x: F) -> F {
        let half = F::from_f64(0.5);
        match self.0 {
            GeluApproximate::None => x
                .mul(half)
                .mul(F::ONE.add(x.mul(F::from_f64(FRAC_1_SQRT_2)).erf_vectorized())),
            GeluApproximate::Tanh => {
                let inner = F::from_f64(SQRT_2_OVER_PI)
                    .mul(x.add(F::from_f64(0.044715).mul(x).mul(x).mul(x)));
                half.mul(x).mul(F::ONE.add(inner.tanh()))
            }
        }
    }
}

/// `gelu(Tensor self, *, str approximate='none')`.
pub fn gelu(self_: &Tensor, approximate: &str) -> Result<Tensor> {
    let op = Gelu(GeluApproximate::parse(approximate)?);
    gelu_impl(self_, None, &op)
}

/// `gelu.out(Tensor self, *, str approximate='none', Tensor(a!) out)`.
pub fn gelu_out(self_: &Tensor, approximate: &str, out: &Tensor) -> Result<Tensor> {
    let op = Gelu(GeluApproximate::parse(approximate)?);
    gelu_impl(self_, Some(out), &op)
}

/// `gelu_(Tensor(a!) self, *, str approximate='none')`.
pub fn gelu_(self_: &Tensor, approximate: &str) -> Result<Tensor> {
    let op = Gelu(GeluApproximate::parse(approximate)?);
    gelu_impl(self_, Some(self_), &op)
}

fn gelu_impl(self_: &Tensor, out: Option<&Tensor>, op: &Gelu) -> Result<Tensor> {
    // No integer promotion: gelu of an integer tensor fails as in PyTorch.
    let iter = IterConfig::new("gelu")
        .maybe_out(out)
        .input(self_)
        .all_same_dtype(true)
        .build()?;
    // Fused: the exact form's erf vectorises (Note [Vectorized erf and exp]); one loop per
    // form, so that the loop body has no branch on it.
    dispatch_floating_types!(iter.common_dtype(), "GeluKernelImpl", T => match op.0 {
        GeluApproximate::None => iter.for_each1_fused(
            #[inline(always)]
            |a: T| T::from_acc(Gelu(GeluApproximate::None).apply(a.to_acc())),
        ),
        GeluApproximate::Tanh => iter.for_each1_fused(
            #[inline(always)]
            |a: T| T::from_acc(Gelu(GeluApproximate::Tanh).apply(a.to_acc())),
        ),
    })?;
    iter.finish()
}

struct Neg;
impl NumUnary for Neg {
    #[inline(always)]
    fn apply<N: Num>(&self, x: N) -> N {
        x.neg()
    }
}

struct Abs;
impl NumUnary for Abs {
    #[inline(always)]
    fn apply<N: Num>(&self, x: N) -> N {
        x.abs()
    }
}

pub(crate) struct Sgn;
impl NumUnary for Sgn {
    #[inline(always)]
    fn apply<N: Num>(&self, x: N) -> N {
        // (0 < x) - (x < 0): NaN and both zeros give 0, bool is unchanged.
        if x > N::ZERO {
            N::ONE
        } else if x < N::ZERO {
            N::ONE.neg()
        } else {
            N::ZERO
        }
    }
}

struct Relu;
impl NumUnary for Relu {
    #[inline(always)]
    fn apply<N: Num>(&self, x: N) -> N {
        // clamp_min(x, 0), keeping NaN.
        if x < N::ZERO {
            N::ZERO
        } else {
            x
        }
    }
}

fn neg_check(self_: &Tensor) -> Result<()> {
    if self_.dtype() == ScalarType::Bool {
        return Err(invalid(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying \
             to invert a mask, use the `~` or `logical_not()` operator instead.",
        ));
    }
    Ok(())
}

/// `neg(Tensor self)`: `-x` (bool tensors are rejected, as in PyTorch).
pub fn neg(self_: &Tensor) -> Result<Tensor> {
    neg_check(self_)?;
    num_unary("neg_cpu", self_, None, &Neg, false)
}

/// `neg.out(Tensor self, *, Tensor(a!) out)`.
pub fn neg_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
    neg_check(self_)?;
    num_unary("neg_cpu", self_, Some(out), &Neg, false)
}

/// `neg_(Tensor(a!) self)`.
pub fn neg_(self_: &Tensor) -> Result<Tensor> {
    neg_out(self_, self_)
}

/// `abs(Tensor self)`: `|x|` (identity on bool).
pub fn abs(self_: &Tensor) -> Result<Tensor> {
    num_unary("abs_cpu", self_, None, &Abs, false)
}

/// `abs.out(Tensor self, *, Tensor(a!) out)`.
pub fn abs_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
    num_unary("abs_cpu", self_, Some(out), &Abs, false)
}

/// `abs_(Tensor(a!) self)`.
pub fn abs_(self_: &Tensor) -> Result<Tensor> {
    abs_out(self_, self_)
}

/// `sgn(Tensor self)`: the sign of `x` (-1, 0 or 1; 0 for NaN; identity on bool).
pub fn sgn(self_: &Tensor) -> Result<Tensor> {
    num_unary("sgn_cpu", self_, None, &Sgn, true)
}

/// `sgn.out(Tensor self, *, Tensor(a!) out)`.
pub fn sgn_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
    num_unary("sgn_cpu", self_, Some(out), &Sgn, true)
}

/// `sgn_(Tensor(a!) self)`.
pub fn sgn_(self_: &Tensor) -> Result<Tensor> {
    sgn_out(self_, self_)
}

/// `relu(Tensor self)`: `max(x, 0)` (NaN stays NaN; bool is not supported).
///
/// ```
/// use switchboard_cpu::relu;
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![-1i32, 0, 3], &[3]).unwrap();
/// assert_eq!(relu(&t).unwrap().to_vec::<i32>().unwrap(), [0, 0, 3]);
/// ```
pub fn relu(self_: &Tensor) -> Result<Tensor> {
    check_relu_dtype(self_)?;
    num_unary("clamp_min_scalar_cpu", self_, None, &Relu, false)
}

/// `relu_(Tensor(a!) self)`.
pub fn relu_(self_: &Tensor) -> Result<Tensor> {
    check_relu_dtype(self_)?;
    num_unary("clamp_min_scalar_cpu", self_, Some(self_), &Relu, false)
}

/// PyTorch's `relu` refuses bools before its kernel (`clamp_min`) is reached.
fn check_relu_dtype(self_: &Tensor) -> Result<()> {
    if self_.dtype() == ScalarType::Bool {
        return Err(invalid("Boolean inputs not supported for relu"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_tensor::f16;

    fn close(a: &[f32], b: &[f32], tol: f32) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn float_functions() {
        let t = Tensor::from_vec(vec![-1.0f32, 0.0, 1.0, 2.0], &[4]).unwrap();
        close(
            &exp(&t).unwrap().to_vec::<f32>().unwrap(),
            &[0.367_879_4, 1.0, std::f32::consts::E, 7.389_056],
            1e-6,
        );
        close(
            &tanh(&t).unwrap().to_vec::<f32>().unwrap(),
            &[-0.761_594_2, 0.0, 0.761_594_2, 0.964_027_6],
            1e-6,
        );
        close(
            &silu(&t).unwrap().to_vec::<f32>().unwrap(),
            &[-0.268_941_4, 0.0, 0.731_058_6, 1.761_594_2],
            1e-6,
        );
        close(
            &gelu(&t, "none").unwrap().to_vec::<f32>().unwrap(),
            &[-0.158_655_3, 0.0, 0.841_344_7, 1.954_5],
            1e-5,
        );
        close(
            &gelu(&t, "tanh").unwrap().to_vec::<f32>().unwrap(),
            &[-0.158_808, 0.0, 0.841_192, 1.954_597_7],
            1e-5,
        );
        assert!(gelu(&t, "fast").is_err());
        let i = Tensor::from_vec(vec![4i64, 9], &[2]).unwrap();
        let s = sqrt(&i).unwrap();
        assert_eq!(s.dtype(), ScalarType::Float);
        assert_eq!(s.to_vec::<f32>().unwrap(), [2.0, 3.0]);
        assert_eq!(
            gelu(&i, "none").unwrap_err().to_string(),
            "\"GeluKernelImpl\" not implemented for 'Long'"
        );
        assert!(exp_(&i).is_err());
        let h = Tensor::from_vec(vec![f16::from_f32(4.0)], &[1]).unwrap();
        assert_eq!(
            rsqrt(&h).unwrap().to_vec::<f16>().unwrap(),
            [f16::from_f32(0.5)]
        );
    }

    #[test]
    fn integer_functions() {
        let t = Tensor::from_vec(vec![-3i8, 0, 5, i8::MIN], &[4]).unwrap();
        assert_eq!(
            neg(&t).unwrap().to_vec::<i8>().unwrap(),
            [3, 0, -5, i8::MIN]
        );
        assert_eq!(abs(&t).unwrap().to_vec::<i8>().unwrap(), [3, 0, 5, i8::MIN]);
        assert_eq!(sgn(&t).unwrap().to_vec::<i8>().unwrap(), [-1, 0, 1, -1]);
        let f =
            Tensor::from_vec(vec![f32::NAN, -0.0, 0.0, -2.0, 3.0, f32::INFINITY], &[6]).unwrap();
        assert_eq!(
            sgn(&f).unwrap().to_vec::<f32>().unwrap(),
            [0.0, 0.0, 0.0, -1.0, 1.0, 1.0]
        );
        relu_(&t).unwrap();
        assert_eq!(t.to_vec::<i8>().unwrap(), [0, 0, 5, 0]);
        let b = Tensor::from_vec(vec![true], &[1]).unwrap();
        assert!(neg(&b).unwrap_err().to_string().starts_with("Negation"));
        let f = Tensor::from_vec(vec![f32::NAN, -1.0], &[2]).unwrap();
        assert!(relu(&f).unwrap().to_vec::<f32>().unwrap()[0].is_nan());
    }
}

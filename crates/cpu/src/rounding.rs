//! Rounding and sign: `ceil`, `floor`, `round` (and `round.decimals`), `trunc` and `sign`,
//! each with its `out=` and in-place forms. Rounding an integer tensor copies it, as in
//! PyTorch; a bool tensor has no rounding kernel ("ceil_vml_cpu" not implemented for 'Bool').

use switchboard_tensor::Tensor;

use crate::dispatch_dtype::Float;
use crate::error::Result;
use crate::iter::IterConfig;
use crate::unary::{float_unary_loop, num_unary, FloatUnary, Sgn};
use crate::{dispatch_all_types, dispatch_floating_types};

/// Runs a rounding function: integers (bool aside) are copied, floats rounded.
fn rounding(
    name: &'static str,
    self_: &Tensor,
    out: Option<&Tensor>,
    op: &impl FloatUnary,
) -> Result<Tensor> {
    let iter = IterConfig::new(name)
        .maybe_out(out)
        .input(self_)
        .all_same_dtype(true)
        .build()?;
    let dtype = iter.common_dtype();
    if dtype.is_integral(false) {
        dispatch_all_types!(dtype, name, T => iter.for_each1(|a: T| a))?;
    } else {
        dispatch_floating_types!(dtype, name, T => float_unary_loop::<T>(&iter, op))?;
    }
    iter.finish()
}

macro_rules! rounding_op {
    ($(#[$doc:meta])* $Op:ident, $f:ident, $f_out:ident, $f_:ident, $kname:literal, $method:ident) => {
        #[doc = concat!("The function of `", stringify!($f), "`.")]
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $Op;
        impl FloatUnary for $Op {
            #[inline(always)]
            fn apply<F: Float>(&self, x: F) -> F {
                x.$method()
            }
        }
        $(#[$doc])*
        pub fn $f(self_: &Tensor) -> Result<Tensor> {
            rounding($kname, self_, None, &$Op)
        }
        #[doc = concat!("`", stringify!($f), ".out(Tensor self, *, Tensor(a!) out)`.")]
        pub fn $f_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
            rounding($kname, self_, Some(out), &$Op)
        }
        #[doc = concat!("`", stringify!($f), "_(Tensor(a!) self)`.")]
        pub fn $f_(self_: &Tensor) -> Result<Tensor> {
            rounding($kname, self_, Some(self_), &$Op)
        }
    };
}

rounding_op!(
    /// `ceil(Tensor self)`: rounds toward positive infinity.
    Ceil, ceil, ceil_out, ceil_, "ceil_vml_cpu", ceil
);
rounding_op!(
    /// `floor(Tensor self)`: rounds toward negative infinity.
    Floor, floor, floor_out, floor_, "floor_vml_cpu", floor
);
rounding_op!(
    /// `round(Tensor self)`: rounds half to even (`round(2.5) == 2`), as C's `nearbyint`.
    ///
    /// ```
    /// use switchboard_cpu::round;
    /// use switchboard_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![0.5f32, 1.5, 2.5, -2.5], &[4]).unwrap();
    /// assert_eq!(round(&t).unwrap().to_vec::<f32>().unwrap(), [0.0, 2.0, 2.0, -2.0]);
    /// ```
    Round, round, round_out, round_, "round_vml_cpu", round_ties_even
);
rounding_op!(
    /// `trunc(Tensor self)`: rounds toward zero.
    Trunc, trunc, trunc_out, trunc_, "trunc_vml_cpu", trunc
);

/// The function of `round.decimals`: PyTorch's `round_decimals_kernel`, which scales by
/// `10^|decimals|` in the compute type, rounds half to even and scales back.
#[derive(Clone, Copy, Debug)]
struct RoundDecimals {
    decimals: i64,
}

impl FloatUnary for RoundDecimals {
    #[inline(always)]
    fn apply<F: Float>(&self, x: F) -> F {
        // `std::pow(10, decimals)` in double, then the compute type (infinite when huge).
        let exponent = i32::try_from(self.decimals.unsigned_abs()).unwrap_or(i32::MAX);
        let scale = F::from_f64(10f64.powi(exponent));
        if self.decimals < 0 {
            x.div(scale).round_ties_even().mul(scale)
        } else {
            x.mul(scale).round_ties_even().div(scale)
        }
    }
}

/// `round.decimals` without the integer copy of `round`: integers have no kernel
/// ("round_cpu" not implemented for 'Long'); `decimals == 0` is `round`'s kernel.
fn round_decimals_impl(self_: &Tensor, decimals: i64, out: Option<&Tensor>) -> Result<Tensor> {
    let iter = IterConfig::new("round_cpu")
        .maybe_out(out)
        .input(self_)
        .all_same_dtype(true)
        .build()?;
    let dtype = iter.common_dtype();
    if decimals == 0 {
        dispatch_floating_types!(dtype, "round_vml_cpu", T => float_unary_loop::<T>(&iter, &Round))?;
    } else {
        let op = RoundDecimals { decimals };
        dispatch_floating_types!(dtype, "round_cpu", T => float_unary_loop::<T>(&iter, &op))?;
    }
    iter.finish()
}

/// `round.decimals(Tensor self, *, int decimals)`: rounds to `decimals` decimal places
/// (negative: to tens, hundreds, ...).
pub fn round_decimals(self_: &Tensor, decimals: i64) -> Result<Tensor> {
    round_decimals_impl(self_, decimals, None)
}

/// `round.decimals_out(Tensor self, *, int decimals, Tensor(a!) out)`.
pub fn round_decimals_out(self_: &Tensor, decimals: i64, out: &Tensor) -> Result<Tensor> {
    round_decimals_impl(self_, decimals, Some(out))
}

/// `round_.decimals(Tensor(a!) self, *, int decimals)`.
pub fn round_decimals_(self_: &Tensor, decimals: i64) -> Result<Tensor> {
    round_decimals_impl(self_, decimals, Some(self_))
}

/// `sign(Tensor self)`: -1, 0 or 1 (0 for NaN; identity on bool).
pub fn sign(self_: &Tensor) -> Result<Tensor> {
    num_unary("sign_cpu", self_, None, &Sgn, true)
}

/// `sign.out(Tensor self, *, Tensor(a!) out)`.
pub fn sign_out(self_: &Tensor, out: &Tensor) -> Result<Tensor> {
    num_unary("sign_cpu", self_, Some(out), &Sgn, true)
}

/// `sign_(Tensor(a!) self)`.
pub fn sign_(self_: &Tensor) -> Result<Tensor> {
    num_unary("sign_cpu", self_, Some(self_), &Sgn, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_tensor::ScalarType;

    #[test]
    fn rounding_floats_and_integers() {
        let f =
            Tensor::from_vec(vec![1.5f64, -2.5, 0.5, 2.5, f64::NAN, f64::INFINITY], &[6]).unwrap();
        let v = |r: Tensor| r.to_vec::<f64>().unwrap();
        assert_eq!(&v(ceil(&f).unwrap())[..4], [2.0, -2.0, 1.0, 3.0]);
        assert_eq!(&v(floor(&f).unwrap())[..4], [1.0, -3.0, 0.0, 2.0]);
        assert_eq!(&v(round(&f).unwrap())[..4], [2.0, -2.0, 0.0, 2.0]);
        assert_eq!(&v(trunc(&f).unwrap())[..4], [1.0, -2.0, 0.0, 2.0]);
        assert!(v(round(&f).unwrap())[4].is_nan());
        let i = Tensor::from_vec(vec![1i64, -2, 3], &[3]).unwrap();
        let r = floor(&i).unwrap();
        assert_eq!(r.dtype(), ScalarType::Long);
        assert_eq!(r.to_vec::<i64>().unwrap(), [1, -2, 3]);
        let b = Tensor::from_vec(vec![true], &[1]).unwrap();
        assert_eq!(
            ceil(&b).unwrap_err().to_string(),
            "\"ceil_vml_cpu\" not implemented for 'Bool'"
        );
        assert_eq!(
            round_decimals(&i, 1).unwrap_err().to_string(),
            "\"round_cpu\" not implemented for 'Long'"
        );
        assert_eq!(sign(&b).unwrap().to_vec::<bool>().unwrap(), [true]);
    }

    #[test]
    fn round_to_decimals() {
        let f = Tensor::from_vec(vec![1.25f32, 2.675, -1.35, 1234.5], &[4]).unwrap();
        let r = round_decimals(&f, 1).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(&r[..3], [1.2, 2.7, -1.4]);
        let r = round_decimals(&f, -2).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(r[3], 1200.0);
    }
}

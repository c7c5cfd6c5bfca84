//! Random sampling: `uniform_`, `normal_`, `random_.from`, `bernoulli_.float`,
//! `bernoulli_.Tensor`, and dropout
//! (`native_dropout`, `native_dropout_backward`). `Generator?` arguments arrive as
//! `Option<&Generator>`; `None` draws from [`Generator::default_cpu`].
//!
//! Note [Matching PyTorch's random streams]
//! Kernels hold the generator's lock for the whole op and draw serially, one element after the
//! other in memory order (PyTorch's `cpu_serial_kernel` over a nullary `TensorIterator`), so
//! results depend on the seed only, never on the thread count. With the same seed they match
//! PyTorch's CPU results as follows:
//! - `uniform_`: bit-exact for `[0, 1)` (float: `(random() & (2^24 - 1)) * 2^-24`, double:
//!   53 bits of `random64()`; float16 and bfloat16 draw the float sample, computed in float
//!   with `from`/`to` as floats, and round it); other ranges compute `x * (to - from) + from`
//!   as PyTorch's source does (its compiler may contract it to an FMA, a 1-ulp difference);
//! - `random_.from` (`randint`): exact for every dtype and range, including the switch to
//!   `random64()` for ranges of 2^28 and more;
//! - `normal_`: tensors under 16 elements or non-contiguous ones use the double Box-Muller with
//!   its cached second sample, exact up to libm's last bit; contiguous tensors of 16 or more
//!   use PyTorch's `normal_fill` (uniforms first, then Box-Muller in blocks of 16, the tail
//!   block redrawn): the same stream, but x86 builds of PyTorch compute float32 blocks with
//!   AVX2 approximations of log/sin/cos, so values agree to about 1e-6, not bitwise. float16
//!   and bfloat16 tensors of 16 or more elements are filled as float32 and rounded, which
//!   matches PyTorch 2.15 when the size is a multiple of 16; with a partial last block PyTorch
//!   places the recomputed tail differently (not reproduced: the tail elements differ);
//! - `bernoulli_.float` (and so `native_dropout`'s mask): PyTorch's default kernel (`u < p`
//!   with a double uniform per element), which PyTorch uses on non-Intel CPUs; PyTorch builds
//!   with MKL on Intel CPUs use MKL's own generator instead, which is not reproduced;
//! - `bernoulli_.Tensor`: `u < p` per element, `u` a double uniform for a float64 `p` and a
//!   float one (24 bits of `random()`) for any other `p`, compared as float: exact.

use switchboard_tensor::{
    bf16, f16, Access, Element, Generator, GeneratorState, RawOps, Scalar, ScalarType, Tensor,
};

use crate::copy::empty_like_layout;
use crate::dispatch_all_types_and_bool;
use crate::dispatch_dtype::{CpuElement, Float, FloatElement, Num};
use crate::error::{check_cpu_or_meta, invalid, not_implemented, Result};
use crate::iter::{broadcast_strides, check_internal_overlap, coalesce, reorder_dims};
use crate::loops::for_each_row;
use crate::{clone, mul_scalar, mul_scalar_, mul_tensor};

/// The generator to draw from.
fn generator_or_default(g: Option<&Generator>) -> Generator {
    g.cloned().unwrap_or_else(Generator::default_cpu)
}

/// Writes `f()` into every element of `t`, serially, in memory order (Note [Matching
/// PyTorch's random streams]). `t` must have data and dtype `T`.
fn serial_fill<T: Element>(t: &Tensor, mut f: impl FnMut() -> T) -> Result<()> {
    if t.numel() == 0 {
        return Ok(());
    }
    check_internal_overlap(t)?;
    let shape = t.sizes();
    let st = broadcast_strides(t, shape);
    let perm = reorder_dims(shape, &[&st[..]]);
    let geom = coalesce(shape, std::slice::from_ref(&st), &perm);
    let _access = Access::new(&[], &[t])?;
    let p = t.mut_data_ptr_as::<T>()?;
    let s0 = geom.strides[0][0] as isize;
    for_each_row::<1>(&geom, 0, geom.numel(), |n, [o]| {
        for i in 0..n as isize {
            // SAFETY: `_access` holds `t`'s storage exclusively; offsets come from `t`'s own
            // sizes and strides, so they are in bounds (Note [Tensor bounds invariant]).
            unsafe { *p.offset(o + i * s0) = f() };
        }
    });
    Ok(())
}

/// The C++ type name `caffe2::TypeMeta` prints for a dtype (in `random_`'s messages).
fn type_meta_name(dtype: ScalarType) -> &'static str {
    use ScalarType::*;
    match dtype {
        Byte => "unsigned char",
        Char => "signed char",
        Short => "short",
        Int => "int",
        Long => "long",
        Half => "c10::Half",
        Float => "float",
        Double => "double",
        ComplexFloat => "c10::complex<float>",
        ComplexDouble => "c10::complex<double>",
        Bool => "bool",
        BFloat16 => "c10::BFloat16",
    }
}

/// `std::numeric_limits<T>::digits` of a floating dtype.
fn float_digits(dtype: ScalarType) -> u32 {
    match dtype {
        ScalarType::Half => 11,
        ScalarType::BFloat16 => 8,
        ScalarType::Float => 24,
        _ => 53,
    }
}

/// A floating dtype's `uniform_real` on `[0, 1)` from the generator, as `f64` (called with
/// a constant `dtype`, it is inlined and the match folds away).
#[inline(always)]
fn unit_uniform(dtype: ScalarType, g: &mut GeneratorState) -> f64 {
    match dtype {
        ScalarType::Double => (g.random64() & ((1 << 53) - 1)) as f64 * (1.0 / (1u64 << 53) as f64),
        d => {
            let bits = float_digits(d);
            (g.random() & ((1 << bits) - 1)) as f64 / (1u64 << bits) as f64
        }
    }
}

/// `uniform_(Tensor(a!) self, float from=0, float to=1, *, Generator? generator=None) ->
/// Tensor(a!)`
///
/// Fills `self` (floating) with samples of the uniform distribution on `[from, to)`.
///
/// ```
/// use switchboard_cpu::uniform_;
/// use switchboard_tensor::{Generator, ScalarType, Tensor};
/// let t = Tensor::zeros(&[2], ScalarType::Float).unwrap();
/// uniform_(&t, 0.0, 1.0, Some(&Generator::new(0))).unwrap();
/// assert_eq!(t.to_vec::<f32>().unwrap(), [0.49625659, 0.76822180]); // torch.rand(2) after manual_seed(0)
/// ```
pub fn uniform_(
    self_: &Tensor,
    from: f64,
    to: f64,
    generator: Option<&Generator>,
) -> Result<Tensor> {
    check_cpu_or_meta("uniform_", self_.device())?;
    let dtype = self_.dtype();
    if !dtype.is_floating_point() {
        return Err(not_implemented("check_uniform_bounds", dtype));
    }
    let (lo, hi) = dtype.finite_range();
    for (v, name) in [(from, "from"), (to, "to")] {
        if !(v >= lo && v <= hi) {
            return Err(invalid(format!(
                "{name} is out of bounds for {}",
                type_meta_name(dtype)
            )));
        }
    }
    if from > to {
        return Err(invalid(format!(
            "uniform_ expects to return a [from, to) range, but found from={} > to={}",
            Scalar::Float(from),
            Scalar::Float(to)
        )));
    }
    if to - from > hi {
        return Err(invalid(format!(
            "uniform_ expects to-from <= std::numeric_limits<{}>::max(), but found to={} and \
             from={} which result in to-from to exceed the limit",
            dtype.c10_name(),
            Scalar::Float(to),
            Scalar::Float(from)
        )));
    }
    if !self_.has_data() || self_.numel() == 0 {
        return Ok(self_.clone());
    }
    let gen = generator_or_default(generator);
    let mut g = gen.lock();
    match dtype {
        ScalarType::Double => serial_fill::<f64>(self_, || {
            unit_uniform(ScalarType::Double, &mut g) * (to - from) + from
        }),
        ScalarType::Float => {
            let (f, t) = (from as f32, to as f32);
            serial_fill::<f32>(self_, || {
                unit_uniform(ScalarType::Float, &mut g) as f32 * (t - f) + f
            })
        }
        // Reduced floats draw a float sample and round it (Note [Matching PyTorch's random
        // streams]).
        ScalarType::Half => {
            let (f, t) = (from as f32, to as f32);
            serial_fill::<f16>(self_, || {
                f16::from_f32(unit_uniform(ScalarType::Float, &mut g) as f32 * (t - f) + f)
            })
        }
        _ => {
            let (f, t) = (from as f32, to as f32);
            serial_fill::<bf16>(self_, || {
                bf16::from_f32(unit_uniform(ScalarType::Float, &mut g) as f32 * (t - f) + f)
            })
        }
    }?;
    Ok(self_.clone())
}

/// One sample of `at::normal_distribution<double>(mean, std)`: Box-Muller on two double
/// uniforms, the second result cached in the generator for the next call.
fn normal_double(g: &mut GeneratorState, mean: f64, std: f64) -> f64 {
    if let Some(cached) = g.take_next_double_normal_sample() {
        return cached * std + mean;
    }
    let u1 = unit_uniform(ScalarType::Double, g);
    let u2 = unit_uniform(ScalarType::Double, g);
    let r = (-2.0 * (-u2).ln_1p()).sqrt();
    let theta = 2.0 * std::f64::consts::PI * u1;
    g.set_next_double_normal_sample(Some(r * theta.sin()));
    r * theta.cos() * std + mean
}

/// `normal_fill_16`: Box-Muller on 16 uniforms in place (the first 8 give the radii, the
/// last 8 the angles), rounding to `T` where PyTorch's `scalar_t` temporaries do.
fn normal_fill_16<T: FloatElement>(d: &mut [T], mean: T, std: T) {
    let (mean, std) = (mean.to_acc(), std.to_acc());
    for j in 0..8 {
        let u1 = T::from_acc(T::F::ONE.sub(d[j].to_acc())).to_acc();
        let u2 = d[j + 8].to_acc();
        let radius = T::from_acc(T::F::from_f64(-2.0).mul(u1.ln()).sqrt()).to_acc();
        let theta = T::from_acc(T::F::from_f64(2.0 * std::f64::consts::PI * u2.to_f64())).to_acc();
        d[j] = T::from_acc(radius.mul(theta.cos()).mul(std).add(mean));
        d[j + 8] = T::from_acc(radius.mul(theta.sin()).mul(std).add(mean));
    }
}

/// PyTorch's `normal_fill` for a contiguous tensor of at least 16 elements.
fn normal_fill<T: FloatElement>(
    t: &Tensor,
    mean: f64,
    std: f64,
    g: &mut GeneratorState,
) -> Result<()> {
    let dtype = T::DTYPE;
    let mut data = t.data_mut::<T>()?;
    let n = data.len();
    let (mean, std) = (
        T::from_acc(T::F::from_f64(mean)),
        T::from_acc(T::F::from_f64(std)),
    );
    for x in data.iter_mut() {
        *x = T::from_acc(T::F::from_f64(unit_uniform(dtype, g)));
    }
    for chunk in data.chunks_exact_mut(16) {
        normal_fill_16(chunk, mean, std);
    }
    if n % 16 != 0 {
        // Redraw and recompute the last 16 values (overlapping the last full block).
        let tail = &mut data[n - 16..];
        for x in tail.iter_mut() {
            *x = T::from_acc(T::F::from_f64(unit_uniform(dtype, g)));
        }
        normal_fill_16(tail, mean, std);
    }
    Ok(())
}

/// `normal_(Tensor(a!) self, float mean=0, float std=1, *, Generator? generator=None) ->
/// Tensor(a!)`
///
/// Fills `self` (floating) with samples of the normal distribution (Box-Muller; see Note
/// [Matching PyTorch's random streams]).
///
/// ```
/// use switchboard_cpu::normal_;
/// use switchboard_tensor::{Generator, ScalarType, Tensor};
/// let t = Tensor::zeros(&[3], ScalarType::Float).unwrap();
/// normal_(&t, 0.0, 1.0, Some(&Generator::new(0))).unwrap();
/// let v = t.to_vec::<f32>().unwrap(); // torch.randn(3) after manual_seed(0)
/// assert!((v[0] - 1.5410).abs() < 1e-4 && (v[1] + 0.2934).abs() < 1e-4);
/// ```
pub fn normal_(
    self_: &Tensor,
    mean: f64,
    std: f64,
    generator: Option<&Generator>,
) -> Result<Tensor> {
    check_cpu_or_meta("normal_", self_.device())?;
    if std.is_nan() || std < 0.0 {
        return Err(invalid(format!(
            "normal expects std >= 0.0, but found std {}",
            Scalar::Float(std)
        )));
    }
    let dtype = self_.dtype();
    if !dtype.is_floating_point() {
        return Err(not_implemented("normal_kernel_cpu", dtype));
    }
    if !self_.has_data() || self_.numel() == 0 {
        return Ok(self_.clone());
    }
    let gen = generator_or_default(generator);
    let mut g = gen.lock();
    let g = &mut *g;
    if self_.numel() >= 16 && self_.is_contiguous() {
        if matches!(dtype, ScalarType::Half | ScalarType::BFloat16) {
            // Drawn as float32 and rounded (Note [Matching PyTorch's random streams]).
            let drawn = Tensor::empty(self_.sizes(), ScalarType::Float)?;
            normal_fill::<f32>(&drawn, mean, std, g)?;
            crate::copy_(self_, &drawn, false)?;
            return Ok(self_.clone());
        }
        crate::dispatch_floating_types!(dtype, "normal_kernel_cpu", T => {
            normal_fill::<T>(self_, mean, std, g)
        })?;
    } else {
        crate::dispatch_floating_types!(dtype, "normal_kernel_cpu", T => {
            serial_fill::<T>(self_, || T::from_acc(Num::from_f64(normal_double(g, mean, std))))
        })?;
    }
    Ok(self_.clone())
}

/// `update_from`: the lowest `from` a floating dtype can represent exactly above `from`.
fn update_from(from: i64, dtype: ScalarType) -> i64 {
    let from_plus_1 = round_through(from.wrapping_add(1), dtype);
    if from_plus_1 < from {
        let mut a = from.wrapping_add(1).unsigned_abs();
        let mut n = 0i64;
        while {
            a >>= 1;
            a != 0
        } {
            n += 1;
        }
        return from_plus_1.wrapping_add(1i64 << (n - float_digits(dtype) as i64 + 1));
    }
    from
}

/// `update_to`: the highest exclusive `to` a floating dtype can represent below `to`.
fn update_to(to: i64, dtype: ScalarType) -> i64 {
    let to_minus_1 = round_through(to.wrapping_sub(1), dtype);
    if to_minus_1 >= to {
        let mut a = to.wrapping_sub(1).unsigned_abs();
        let mut n = 0i64;
        while {
            a >>= 1;
            a != 0
        } {
            n += 1;
        }
        return to_minus_1.wrapping_sub(1i64 << (n - float_digits(dtype) as i64 + 1));
    }
    to
}

/// `static_cast<int64_t>(static_cast<scalar_t>(v))` (saturating, as on aarch64).
fn round_through(v: i64, dtype: ScalarType) -> i64 {
    match dtype {
        ScalarType::Half => f16::from_f32(v as f32).to_f64() as i64,
        ScalarType::BFloat16 => bf16::from_f32(v as f32).to_f64() as i64,
        ScalarType::Float => v as f32 as i64,
        _ => v as f64 as i64,
    }
}

/// `check_from_to_in_range`.
fn check_from_to(from: i64, to_inc: i64, dtype: ScalarType) -> Result<()> {
    let (lo, hi) = dtype.finite_range();
    let out = |v: i64| (v as f64) < lo || (v as f64) > hi;
    let name = type_meta_name(dtype);
    if out(from) {
        return Err(invalid(format!("from is out of bounds for {name}")));
    }
    if out(to_inc) {
        return Err(invalid(format!("to - 1 is out of bounds for {name}")));
    }
    Ok(())
}

/// `random_.from(Tensor(a!) self, int from, int? to, *, Generator? generator=None) ->
/// Tensor(a!)`
///
/// Fills `self` with integers drawn uniformly from `[from, to)` (`to = None`: up to the
/// dtype's largest value, or `2^digits` for floating dtypes) by PyTorch's modulo method.
///
/// ```
/// use switchboard_cpu::random_from_;
/// use switchboard_tensor::{Generator, ScalarType, Tensor};
/// let t = Tensor::zeros(&[5], ScalarType::Long).unwrap();
/// random_from_(&t, 0, Some(10), Some(&Generator::new(0))).unwrap();
/// assert_eq!(t.to_vec::<i64>().unwrap(), [4, 9, 3, 0, 3]); // torch.randint(10, (5,)), seed 0
/// ```
pub fn random_from_(
    self_: &Tensor,
    mut from: i64,
    to: Option<i64>,
    generator: Option<&Generator>,
) -> Result<Tensor> {
    check_cpu_or_meta("random_", self_.device())?;
    let dtype = self_.dtype();
    let is_float = dtype.is_floating_point();
    let (from, range) = match to {
        Some(to) => {
            if from >= to {
                return Err(invalid(format!(
                    "random_ expects 'from' to be less than 'to', but got from={from} >= to={to}"
                )));
            }
            let mut to = to;
            if is_float {
                from = update_from(from, dtype);
                to = update_to(to, dtype);
                if from >= to {
                    return Err(invalid(format!(
                        "random_ expects 'from' casted to dtype to be less than 'to' casted to \
                         dtype, but got from={from} >= to={to}"
                    )));
                }
            }
            check_from_to(from, to.wrapping_sub(1), dtype)?;
            (from, Some((to as u64).wrapping_sub(from as u64)))
        }
        None if from != i64::MIN => {
            let to_inc = if is_float {
                let max = 1i64 << float_digits(dtype);
                from = update_from(from, dtype);
                if from >= max {
                    return Err(invalid(format!(
                        "random_ expects 'from' casted to dtype to be less than or equal to \
                         'to_inc' casted to dtype, but got from={from} > to_inc={max}"
                    )));
                }
                max
            } else {
                dtype.finite_range().1 as i64
            };
            check_from_to(from, to_inc, dtype)?;
            (
                from,
                Some((to_inc as u64).wrapping_sub(from as u64).wrapping_add(1)),
            )
        }
        None => {
            use ScalarType::*;
            if !matches!(dtype, Long | Double | Float | BFloat16) {
                return Err(invalid(
                    "random_full_64_bits_range_kernel_cpu handles only int64, double, float and \
                     bfloat16",
                ));
            }
            (from, None)
        }
    };
    if !self_.has_data() || self_.numel() == 0 {
        return Ok(self_.clone());
    }
    let gen = generator_or_default(generator);
    let mut g = gen.lock();
    let base = from as u64;
    dispatch_all_types_and_bool!(dtype, "random_from_to_kernel_cpu", T => {
        serial_fill::<T>(self_, || {
            let v = match range {
                // `uniform_int_from_to`: 32-bit draws unless the range needs more.
                Some(r) if r >= 1 << 28 => (g.random64() % r).wrapping_add(base) as i64,
                Some(r) => (g.random() as u64 % r).wrapping_add(base) as i64,
                None => g.random64() as i64,
            };
            int_to::<T>(v)
        })
    })?;
    Ok(self_.clone())
}

/// `random_.to(Tensor(a!) self, int to, *, Generator? generator=None) -> Tensor(a!)`: integers
/// uniform in `[0, to)`, as `random_.from` with `from=0`.
///
/// ```
/// use switchboard_cpu::random_to_;
/// use switchboard_tensor::{Generator, ScalarType, Tensor};
/// let t = Tensor::zeros(&[5], ScalarType::Float).unwrap();
/// random_to_(&t, 10, Some(&Generator::new(0))).unwrap();
/// assert_eq!(t.to_vec::<f32>().unwrap(), [4.0, 9.0, 3.0, 0.0, 3.0]); // torch, seed 0
/// ```
pub fn random_to_(self_: &Tensor, to: i64, generator: Option<&Generator>) -> Result<Tensor> {
    random_from_(self_, 0, Some(to), generator)
}

/// `random_(Tensor(a!) self, *, Generator? generator=None) -> Tensor(a!)`: integers uniform over
/// the dtype's range as PyTorch's `random_kernel` draws them: `[0, max]` for integer types (a
/// 64-bit draw for int64, 32-bit otherwise), `[0, 2^digits]` for floating types (the
/// integers the type holds exactly; a 64-bit draw for double), a random bit for bool.
///
/// ```
/// use switchboard_cpu::random_;
/// use switchboard_tensor::{Generator, ScalarType, Tensor};
/// let t = Tensor::zeros(&[3], ScalarType::Float).unwrap();
/// random_(&t, Some(&Generator::new(0))).unwrap();
/// assert_eq!(t.to_vec::<f32>().unwrap(), [8325664.0, 12888472.0, 1484222.0]); // torch, seed 0
/// ```
pub fn random_(self_: &Tensor, generator: Option<&Generator>) -> Result<Tensor> {
    check_cpu_or_meta("random_", self_.device())?;
    if !self_.has_data() || self_.numel() == 0 {
        return Ok(self_.clone());
    }
    let dtype = self_.dtype();
    let gen = generator_or_default(generator);
    let mut g = gen.lock();
    dispatch_all_types_and_bool!(dtype, "random_kernel_cpu", T => {
        serial_fill::<T>(self_, || {
            use ScalarType::*;
            let wide = matches!(dtype, Long | Double);
            let v: u64 = if wide { g.random64() } else { g.random() as u64 };
            let bound: u64 = match dtype {
                Bool => 2,
                Half | BFloat16 | Float | Double => (1u64 << float_digits(dtype)) + 1,
                Byte => 1 << 8,
                Char => 1 << 7,
                Short => 1 << 15,
                Int => 1 << 31,
                _ => 1 << 63,
            };
            int_to::<T>((v % bound) as i64)
        })
    })?;
    Ok(self_.clone())
}

/// `static_cast<T>(int64_t)`: wrapping for integers, rounding for floats, `!= 0` for bool.
#[inline]
fn int_to<T: Element>(v: i64) -> T {
    match T::DTYPE {
        ScalarType::Half | ScalarType::BFloat16 => T::from_f64(v as f32 as f64),
        _ => T::from_i64(v),
    }
}

/// `bernoulli_.float(Tensor(a!) self, float p=0.5, *, Generator? generator=None) ->
/// Tensor(a!)`
///
/// Sets each element of `self` (any dtype) to 1 with probability `p`, else 0.
pub fn bernoulli_float_(self_: &Tensor, p: f64, generator: Option<&Generator>) -> Result<Tensor> {
    check_cpu_or_meta("bernoulli_", self_.device())?;
    if !(0.0..=1.0).contains(&p) {
        return Err(invalid(format!(
            "bernoulli_ expects p to be in [0, 1], but got p={}",
            Scalar::Float(p)
        )));
    }
    if !self_.has_data() || self_.numel() == 0 {
        return Ok(self_.clone());
    }
    let gen = generator_or_default(generator);
    let mut g = gen.lock();
    dispatch_all_types_and_bool!(self_.dtype(), "bernoulli_scalar_cpu_", T => {
        serial_fill::<T>(self_, || {
            let u = unit_uniform(ScalarType::Double, &mut g);
            <T as Element>::from_i64((u < p) as i64)
        })
    })?;
    Ok(self_.clone())
}

/// `bernoulli_.Tensor(Tensor(a!) self, Tensor p, *, Generator? generator=None) ->
/// Tensor(a!)`
///
/// Sets each element of `self` (any dtype) to 1 with the probability at the same place in `p`
/// (floating, broadcast to `self`'s shape), else 0: PyTorch's default kernel, a uniform per
/// element (double for a float64 `p`, else float) compared with its `p`, drawn in `self`'s
/// element order.
pub fn bernoulli_tensor_(
    self_: &Tensor,
    p: &Tensor,
    generator: Option<&Generator>,
) -> Result<Tensor> {
    check_cpu_or_meta("bernoulli_", self_.device())?;
    if !p.dtype().is_floating_point() {
        return Err(not_implemented("bernoulli_tensor_cpu_p_", p.dtype()));
    }
    let p = p.expand(self_.sizes())?;
    if !self_.has_data() || self_.numel() == 0 {
        return Ok(self_.clone());
    }
    let probs = p.to_vec_as::<f64>()?;
    // PyTorch checks without a message of its own (and NaN fails too).
    if probs.iter().any(|p| !(0.0..=1.0).contains(p)) {
        return Err(invalid(
            "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error \
             message be improved?  If so, please report an enhancement request to PyTorch.)",
        ));
    }
    // Drawn into a contiguous tensor (memory order is element order), then copied.
    let drawn = Tensor::empty(self_.sizes(), self_.dtype())?;
    let gen = generator_or_default(generator);
    let mut g = gen.lock();
    let mut probs = probs.into_iter();
    // A double `p` compares with a double uniform (`bernoulli_distribution<double>`), any
    // other floating `p` with a float one, as float (`bernoulli_distribution<float>`).
    let double_p = p.dtype() == ScalarType::Double;
    dispatch_all_types_and_bool!(self_.dtype(), "bernoulli_tensor_cpu_self_", T => {
        serial_fill::<T>(&drawn, || {
            let p = probs.next().unwrap_or(0.0);
            let hit = if double_p {
                unit_uniform(ScalarType::Double, &mut g) < p
            } else {
                (unit_uniform(ScalarType::Float, &mut g) as f32) < p as f32
            };
            <T as Element>::from_i64(hit as i64)
        })
    })?;
    drop(g);
    crate::copy_(self_, &drawn, false)
}

/// `native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)`
///
/// Training (`train` true or `None`): a bool `mask` kept with probability `1 - p` (drawn from
/// the default generator) and `output = input * mask / (1 - p)` (0 when `p == 1`).
/// Otherwise `output` is a copy of `input` and `mask` all true. An empty `input` gives
/// `(input, empty_like(input))` as in PyTorch.
pub fn native_dropout(input: &Tensor, p: f64, train: Option<bool>) -> Result<(Tensor, Tensor)> {
    check_cpu_or_meta("native_dropout", input.device())?;
    if input.numel() == 0 {
        return Ok((
            input.clone(),
            empty_like_layout(input, input.dtype(), input.device())?,
        ));
    }
    if train.unwrap_or(true) {
        let p1m = 1.0 - p;
        let scale = if p1m == 0.0 { 0.0 } else { 1.0 / p1m };
        let mask = empty_like_layout(input, ScalarType::Bool, input.device())?;
        bernoulli_float_(&mask, p1m, None)?;
        let output = mul_tensor(input, &mask)?;
        mul_scalar_(&output, Scalar::Float(scale))?;
        Ok((output, mask))
    } else {
        let mask = empty_like_layout(input, ScalarType::Bool, input.device())?;
        crate::fill_scalar_(&mask, Scalar::Bool(true))?;
        Ok((clone(input, None)?, mask))
    }
}

/// `native_dropout_backward(Tensor grad_output, Tensor mask, float scale) -> Tensor`
///
/// `grad_output * mask * scale`.
pub fn native_dropout_backward(grad_output: &Tensor, mask: &Tensor, scale: f64) -> Result<Tensor> {
    mul_scalar(&mul_tensor(grad_output, mask)?, Scalar::Float(scale))
}

#[cfg(test)]
#[path = "random_tests.rs"]
mod tests;

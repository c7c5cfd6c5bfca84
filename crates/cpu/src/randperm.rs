//! `randperm.generator_out`: a random permutation of `0..n`, drawn as PyTorch's CPU kernel
//! draws it, so a seed gives PyTorch's permutation.
//!
//! Note [randperm's shuffles]
//! PyTorch's `randperm_cpu` has two shuffles. For `n < u32::MAX / 20` it writes `0..n` and
//! swaps element `i` with element `i + random() % (n - i)` for `i` in `0..n - 1` (a
//! Fisher-Yates shuffle on 32-bit draws, the modulo bias negligible at these sizes). Larger
//! `n` use the inside-out variant on 64-bit draws: element `i` takes the value at
//! `z = random64() % (i + 1)` and `z` takes `i`. Both are reproduced, draw for draw.

use switchboard_tensor::{Device, Element, Generator, Scalar, ScalarType, Tensor};

use crate::dispatch_all_types;
use crate::error::{check_cpu_or_meta, invalid, Result};

/// PyTorch's `check_supported_max_int_with_precision`: `n - 1` must fit the dtype, and a
/// floating dtype must hold every integer up to `n` exactly.
fn check_supported_max_int_with_precision<T: Element>(n: i64) -> Result<()> {
    Scalar::Int(if n > 0 { n - 1 } else { n }).checked_to::<T>()?;
    let (digits, text) = match T::DTYPE {
        ScalarType::Half => (11, "2049 for Half"),
        ScalarType::Float => (24, "2^24+1 for Float"),
        ScalarType::Double => (53, "2^53+1 for Double"),
        _ => return Ok(()),
    };
    if n > (1i64 << digits) + 1 {
        return Err(invalid(format!("n cannot be greater than {text} type.")));
    }
    Ok(())
}

/// `randperm.generator_out(SymInt n, *, Generator? generator, Tensor(a!) out) ->
/// Tensor(a!)`
///
/// Resizes `out` to `[n]` and fills it with a permutation of `0..n` (Note [randperm's
/// shuffles]); every dtype but bool. On Meta, the checks and the resize only.
///
/// ```
/// use switchboard_cpu::randperm_generator_out;
/// use switchboard_tensor::{Generator, ScalarType, Tensor};
/// let out = Tensor::zeros(&[0], ScalarType::Long).unwrap();
/// let p = randperm_generator_out(10, Some(&Generator::new(0)), &out).unwrap();
/// // torch.randperm(10, generator=torch.Generator().manual_seed(0))
/// assert_eq!(p.to_vec::<i64>().unwrap(), [4, 1, 7, 5, 3, 9, 0, 8, 6, 2]);
/// ```
pub fn randperm_generator_out(
    n: i64,
    generator: Option<&Generator>,
    out: &Tensor,
) -> Result<Tensor> {
    if n < 0 {
        return Err(invalid(format!("n must be non-negative, got{n}")));
    }
    // PyTorch's Meta kernel takes any generator: it draws nothing.
    if let Some(g) = generator.filter(|_| out.device() != Device::META) {
        if g.device() != out.device() {
            return Err(invalid(format!(
                "Expected a '{}' generator device but found '{}'",
                out.device(),
                g.device()
            )));
        }
    }
    check_cpu_or_meta("randperm", out.device())?;
    dispatch_all_types!(out.dtype(), "randperm", T => check_supported_max_int_with_precision::<T>(n))?;
    let result = out.resized(&[n])?;
    if !result.has_data() || n == 0 {
        return Ok(result);
    }
    let perm = shuffle(n, generator)?;
    let values = Tensor::from_vec(perm, &[n])?;
    crate::copy_(&result, &values, false)?;
    Ok(result)
}

/// A permutation of `0..n` drawn from `generator` (the default one when `None`) as PyTorch
/// draws it (Note [randperm's shuffles]). The values are built as int64 and cast once: every
/// value fits the output dtype after the precision check. The buffer is reserved
/// fallibly: a count the machine cannot hold is an error, not an abort.
fn shuffle(n: i64, generator: Option<&Generator>) -> Result<Vec<i64>> {
    let len = usize::try_from(n).map_err(|_| invalid(format!("randperm: n={n} is too large")))?;
    let mut p: Vec<i64> = Vec::new();
    p.try_reserve_exact(len)
        .map_err(|_| invalid(format!("randperm: cannot allocate {n} elements")))?;
    let generator = generator.cloned().unwrap_or_else(Generator::default_cpu);
    let mut g = generator.lock();
    if n < i64::from(u32::MAX / 20) {
        p.extend(0..n);
        for i in 0..len.saturating_sub(1) {
            let z = (i64::from(g.random()) % (n - i as i64)) as usize;
            p.swap(i, i + z);
        }
    } else {
        p.resize(len, 0);
        for i in 0..len {
            let z = (g.random64() % (i as u64 + 1)) as usize;
            p[i] = p[z];
            p[z] = i as i64;
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn perm(n: i64, seed: u64, dtype: ScalarType) -> Result<Tensor> {
        let out = Tensor::zeros(&[0], dtype)?;
        randperm_generator_out(n, Some(&Generator::new(seed)), &out)
    }

    #[test]
    fn seeded_permutations_are_pytorchs() {
        // torch.randperm(40, generator=torch.Generator().manual_seed(7)), torch 2.15.
        let expected: [i64; 40] = [
            15, 26, 35, 6, 2, 37, 7, 24, 36, 13, 38, 4, 28, 12, 3, 20, 34, 17, 11, 16, 8, 21, 27,
            32, 0, 33, 25, 9, 19, 1, 31, 23, 14, 10, 18, 30, 22, 39, 5, 29,
        ];
        assert_eq!(
            perm(40, 7, ScalarType::Long)
                .unwrap()
                .to_vec::<i64>()
                .unwrap(),
            expected
        );
        let float = perm(6, 7, ScalarType::Float).unwrap();
        assert_eq!(
            float.to_vec::<f32>().unwrap(),
            [3.0, 0.0, 1.0, 5.0, 2.0, 4.0]
        );
    }

    #[test]
    fn errors_are_pytorchs() {
        let msg = |r: Result<Tensor>| r.unwrap_err().to_string();
        assert_eq!(
            msg(perm(-1, 0, ScalarType::Long)),
            "n must be non-negative, got-1"
        );
        assert_eq!(
            msg(perm(300, 0, ScalarType::Byte)),
            "value cannot be converted to type uint8_t without overflow"
        );
        assert_eq!(
            msg(perm(3000, 0, ScalarType::Half)),
            "n cannot be greater than 2049 for Half type."
        );
        assert_eq!(
            msg(perm(3, 0, ScalarType::Bool)),
            "\"randperm\" not implemented for 'Bool'"
        );
        // 2049 fits float16 exactly (the last value is 2048).
        assert!(perm(2049, 0, ScalarType::Half).is_ok());
    }
}

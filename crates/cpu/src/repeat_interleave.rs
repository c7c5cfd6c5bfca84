//! `repeat_interleave.Tensor`: each index of `repeats`, repeated as many times as its entry
//! says (the indices `repeat_interleave.self_Tensor` selects with).

use switchboard_tensor::{ScalarType, Tensor};

use crate::error::{invalid, not_implemented, Result};

/// PyTorch's message when the entries do not add up to `output_size`.
const SIZE_MISMATCH: &str = "allocated size does not match required size";

/// `repeat_interleave.Tensor(Tensor repeats, *, SymInt? output_size=None) -> Tensor`: index
/// `i` repeated `repeats[i]` times, in `repeats`' dtype (int32 or int64). The length is the
/// sum of the entries, or `output_size`, which must equal it. On a tensor without data (Meta)
/// only `output_size` can tell the length (Note [Data-dependent output shapes]), as PyTorch's
/// meta registration says.
///
/// ```
/// use switchboard_tensor::Tensor;
/// let r = Tensor::from_vec(vec![1i64, 0, 3], &[3]).unwrap();
/// let i = switchboard_cpu::repeat_interleave_cpu(&r, None).unwrap();
/// assert_eq!(i.to_vec::<i64>().unwrap(), [0, 2, 2, 2]);
/// ```
pub fn repeat_interleave_cpu(repeats: &Tensor, output_size: Option<i64>) -> Result<Tensor> {
    if repeats.dim() != 1 {
        return Err(invalid("repeat_interleave only accept 1D vector as repeat"));
    }
    let dtype = repeats.dtype();
    if !matches!(dtype, ScalarType::Long | ScalarType::Int) {
        return Err(not_implemented("repeat_interleave_cpu", dtype));
    }
    if !repeats.has_data() {
        let Some(size) = output_size else {
            return Err(invalid(
                "cannot repeat_interleave a meta tensor without output_size",
            ));
        };
        return Tensor::empty_on(&[size], dtype, repeats.device());
    }
    if repeats.numel() == 0 {
        return Tensor::empty_on(&[0], dtype, repeats.device());
    }
    let counts = repeats.to_vec_as::<i64>()?;
    let total = match output_size {
        Some(size) => size,
        None => {
            if counts.iter().any(|&c| c < 0) {
                return Err(invalid("repeats can not be negative"));
            }
            counts
                .iter()
                .try_fold(0i64, |a, &c| a.checked_add(c))
                .ok_or_else(|| invalid("repeat_interleave: the output size overflows int64"))?
        }
    };
    // Checked entry by entry, as PyTorch's loop does, before anything is allocated.
    let mut end = 0i64;
    for &c in &counts {
        if c < 0 {
            return Err(invalid("repeats can not be negative"));
        }
        end = end
            .checked_add(c)
            .filter(|&e| e <= total)
            .ok_or_else(|| invalid(SIZE_MISMATCH))?;
    }
    if end != total {
        return Err(invalid(SIZE_MISMATCH));
    }
    // A fallible allocation: the length comes from the data.
    let out = Tensor::empty_on(&[total], dtype, repeats.device())?;
    match dtype {
        ScalarType::Int => fill(&mut out.data_mut::<i32>()?, &counts, |i| i as i32),
        _ => fill(&mut out.data_mut::<i64>()?, &counts, |i| i as i64),
    }
    Ok(out)
}

/// Writes index `i` `counts[i]` times, in order, into `out` (whose length is their sum).
fn fill<T: Copy>(out: &mut [T], counts: &[i64], index: impl Fn(usize) -> T) {
    let mut at = 0;
    for (i, &c) in counts.iter().enumerate() {
        let c = c as usize;
        out[at..at + c].fill(index(i));
        at += c;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn longs(v: &[i64]) -> Tensor {
        Tensor::from_vec(v.to_vec(), &[v.len() as i64]).unwrap()
    }

    #[test]
    fn sizes_that_do_not_add_up_fail_as_pytorchs() {
        let r = longs(&[1, 0, 3]);
        for size in [3, 5] {
            let e = repeat_interleave_cpu(&r, Some(size)).unwrap_err();
            assert_eq!(e.to_string(), SIZE_MISMATCH);
        }
        let ok = repeat_interleave_cpu(&r, Some(4)).unwrap();
        assert_eq!(ok.to_vec::<i64>().unwrap(), [0, 2, 2, 2]);
        let e = repeat_interleave_cpu(&longs(&[1, -1]), None).unwrap_err();
        assert_eq!(e.to_string(), "repeats can not be negative");
        let huge = repeat_interleave_cpu(&longs(&[i64::MAX, 1]), None).unwrap_err();
        assert!(huge.to_string().contains("overflows"), "{huge}");
    }

    #[test]
    fn int32_repeats_give_int32_indices() {
        let r = Tensor::from_vec(vec![2i32, 1], &[2]).unwrap();
        let i = repeat_interleave_cpu(&r, None).unwrap();
        assert_eq!(i.dtype(), ScalarType::Int);
        assert_eq!(i.to_vec::<i32>().unwrap(), [0, 0, 1]);
    }
}

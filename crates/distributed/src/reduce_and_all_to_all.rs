//! [`ProcessGroup::reduce`] (to one rank) and [`ProcessGroup::all_to_all_single`]: the
//! collectives whose ranks do not all end with the same result.

use switchboard_tensor::Tensor;

use crate::backend::Collective;
use crate::buffer::Buffer;
use crate::error::DistError;
use crate::process_group::{check_tensor, numel, write_into, ProcessGroup};
use crate::reduce_op::ReduceOp;
use crate::work::Work;

/// The elements of each rank's share of `t` along its first dimension: `splits` rows each,
/// or equal shares when `splits` is empty (PyTorch's `checkSplitSizes` and its messages).
fn shares(t: &Tensor, splits: &[i64], size: usize) -> Result<Vec<usize>, DistError> {
    let rows = t.sizes().first().copied().unwrap_or(1);
    let row_elems = if rows == 0 {
        0
    } else {
        numel(t) / usize::try_from(rows).unwrap_or(1)
    };
    let rows = usize::try_from(rows).unwrap_or(0);
    if splits.is_empty() {
        if rows % size != 0 {
            return Err(DistError::Invalid(
                "Tensor's dim 0 does not divide equally across group size".into(),
            ));
        }
        return Ok(vec![rows / size * row_elems; size]);
    }
    if splits.len() != size {
        return Err(DistError::Invalid(format!(
            "Number of tensor splits not equal to group size ({} splits, {size} ranks)",
            splits.len()
        )));
    }
    let mut total: usize = 0;
    let mut out = Vec::with_capacity(size);
    for &s in splits {
        let s = usize::try_from(s)
            .map_err(|_| DistError::Invalid(format!("split sizes must be >= 0, but got {s}")))?;
        total = total.checked_add(s).ok_or_else(|| {
            DistError::Invalid("Split sizes doesn't match total dim 0 size".into())
        })?;
        out.push(s.checked_mul(row_elems).ok_or_else(|| {
            DistError::Invalid("Split sizes doesn't match total dim 0 size".into())
        })?);
    }
    if total != rows {
        return Err(DistError::Invalid(
            "Split sizes doesn't match total dim 0 size".into(),
        ));
    }
    Ok(out)
}

impl ProcessGroup {
    /// Reduces `t` over the ranks into rank `root`'s `t`, in place (`dist.reduce`); the other
    /// ranks' `t` is unchanged.
    pub fn reduce(&self, t: &Tensor, root: usize, op: ReduceOp) -> Work {
        Self::or_failed((|| {
            check_tensor("reduce", t)?;
            self.check_rank("root", root)?;
            let (wire_op, size) = self.reduction_on_wire(op, t.dtype())?;
            let data = Buffer::from_tensor(t)?;
            let dst = t.clone();
            let is_root = root == self.rank();
            let then = Box::new(move |mut buf: Buffer| {
                if !is_root {
                    return Ok(());
                }
                if size > 1 {
                    buf.divide(size);
                }
                write_into(&dst, buf)
            });
            self.launch(
                Collective::Reduce {
                    data,
                    op: wire_op,
                    root,
                },
                Some(t),
                Some(root),
                Some(then),
            )
        })())
    }

    /// Scatters `input`'s rows to the ranks and gathers theirs into `output`
    /// (`dist.all_to_all_single`): rank `r` sends `input_split_sizes[r']` rows to each rank
    /// `r'` and receives `output_split_sizes[r']` rows from it, in rank order; empty split
    /// lists mean equal shares.
    pub fn all_to_all_single(
        &self,
        output: &Tensor,
        input: &Tensor,
        output_split_sizes: &[i64],
        input_split_sizes: &[i64],
    ) -> Work {
        Self::or_failed((|| {
            check_tensor("all_to_all_single", input)?;
            check_tensor("all_to_all_single", output)?;
            if output.dtype() != input.dtype() {
                return Err(DistError::Invalid(format!(
                    "output tensor must have the same type as input tensor, but got {} and {}",
                    output.dtype(),
                    input.dtype()
                )));
            }
            let send_counts = shares(input, input_split_sizes, self.size())?;
            let recv_counts = shares(output, output_split_sizes, self.size())?;
            let data = Buffer::from_tensor(input)?;
            let dst = output.clone();
            let then = Box::new(move |buf: Buffer| write_into(&dst, buf));
            // Uneven splits give the ranks tensors of different shapes: only equal shares
            // are compared across ranks.
            let even = input_split_sizes.is_empty() && output_split_sizes.is_empty();
            self.launch(
                Collective::AllToAll {
                    data,
                    send_counts,
                    recv_counts,
                },
                even.then_some(input),
                None,
                Some(then),
            )
        })())
    }
}

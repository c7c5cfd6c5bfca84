//! `triu` and `tril` (TriangularOps.cpp) with their in-place and `out=` forms: the upper or
//! lower triangle of each matrix of the last two dimensions, zeros elsewhere.

use switchboard_ops::structured;
use switchboard_tensor::{Access, DimVec, Tensor};

use crate::dispatch_all_types_and_bool;
use crate::error::{check_cpu_or_meta, Result};
use crate::index::Positions;
use crate::structured_output::structured_output;

/// Writes into `result` the elements of `self_` on the kept side of `diagonal` (column minus
/// row `>= diagonal` for the upper triangle, `<=` for the lower), zeros elsewhere.
fn triangle_into(self_: &Tensor, diagonal: i64, upper: bool, result: &Tensor) -> Result<()> {
    if result.numel() == 0 {
        return Ok(());
    }
    let n = self_.dim();
    let (rows, cols) = (self_.sizes()[n - 2], self_.sizes()[n - 1]);
    let mut matrices = DimVec::from_slice(self_.sizes());
    matrices[n - 2] = 1;
    matrices[n - 1] = 1;
    let pos = Positions::new(&matrices, [self_.strides(), result.strides()]);
    let (sr, sc) = (
        self_.strides()[n - 2] as isize,
        self_.strides()[n - 1] as isize,
    );
    let (rr, rc) = (
        result.strides()[n - 2] as isize,
        result.strides()[n - 1] as isize,
    );
    let _access = Access::new(&[self_], &[result])?;
    let (ps, pr) = (self_.data_ptr() as usize, result.mut_data_ptr() as usize);
    dispatch_all_types_and_bool!(self_.dtype(), if upper { "triu" } else { "tril" }, T => {
        pos.par_run(1, |[os, or]| {
            for i in 0..rows {
                for j in 0..cols {
                    let keep = if upper { j - i >= diagonal } else { j - i <= diagonal };
                    let (i, j) = (i as isize, j as isize);
                    // SAFETY: `_access` holds the borrows; (i, j) is inside the matrix at
                    // `os`/`or` of tensors of `self_`'s shape; each element is read before
                    // its own position is written (in place).
                    unsafe {
                        let v = if keep {
                            *(ps as *const T).offset(os + i * sr + j * sc)
                        } else {
                            T::default()
                        };
                        *(pr as *mut T).offset(or + i * rr + j * rc) = v;
                    }
                }
            }
        });
        Ok::<(), switchboard_tensor::TensorError>(())
    })
}

fn triangle(
    self_: &Tensor,
    diagonal: i64,
    upper: bool,
    out: Option<&Tensor>,
    inplace: bool,
) -> Result<Tensor> {
    check_cpu_or_meta(if upper { "triu" } else { "tril" }, self_.device())?;
    let meta = if upper {
        structured::triu(self_, diagonal, if inplace { Some(self_) } else { out })?
    } else {
        structured::tril(self_, diagonal, if inplace { Some(self_) } else { out })?
    };
    let result = if inplace {
        structured::check_inplace(self_, &meta)?;
        self_.clone()
    } else {
        structured_output(meta, out)?
    };
    triangle_into(self_, diagonal, upper, &result)?;
    Ok(result)
}

/// `triu(Tensor self, SymInt diagonal=0)`: the elements on and above diagonal `diagonal` of
/// each matrix, zeros below.
///
/// ```
/// use switchboard_cpu::{tril, triu};
/// use switchboard_tensor::Tensor;
/// let t = Tensor::from_vec(vec![1i64, 2, 3, 4], &[2, 2]).unwrap();
/// assert_eq!(triu(&t, 0).unwrap().to_vec::<i64>().unwrap(), [1, 2, 0, 4]);
/// assert_eq!(tril(&t, -1).unwrap().to_vec::<i64>().unwrap(), [0, 0, 3, 0]);
/// ```
pub fn triu(self_: &Tensor, diagonal: i64) -> Result<Tensor> {
    triangle(self_, diagonal, true, None, false)
}

/// `triu.out(Tensor self, SymInt diagonal=0, *, Tensor(a!) out)`.
pub fn triu_out(self_: &Tensor, diagonal: i64, out: &Tensor) -> Result<Tensor> {
    triangle(self_, diagonal, true, Some(out), false)
}

/// `triu_(Tensor(a!) self, SymInt diagonal=0)`.
pub fn triu_(self_: &Tensor, diagonal: i64) -> Result<Tensor> {
    triangle(self_, diagonal, true, None, true)
}

/// `tril(Tensor self, SymInt diagonal=0)`: the elements on and below diagonal `diagonal` of
/// each matrix, zeros above.
pub fn tril(self_: &Tensor, diagonal: i64) -> Result<Tensor> {
    triangle(self_, diagonal, false, None, false)
}

/// `tril.out(Tensor self, SymInt diagonal=0, *, Tensor(a!) out)`.
pub fn tril_out(self_: &Tensor, diagonal: i64, out: &Tensor) -> Result<Tensor> {
    triangle(self_, diagonal, false, Some(out), false)
}

/// `tril_(Tensor(a!) self, SymInt diagonal=0)`.
pub fn tril_(self_: &Tensor, diagonal: i64) -> Result<Tensor> {
    triangle(self_, diagonal, false, None, true)
}

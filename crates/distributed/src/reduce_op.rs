//! `ReduceOp`: how a reducing collective combines the ranks' values.

use std::fmt;

use crate::error::DistError;

/// How [`all_reduce`](crate::ProcessGroup::all_reduce) and
/// [`reduce_scatter_tensor`](crate::ProcessGroup::reduce_scatter_tensor) combine the ranks' values
/// (`torch.distributed.ReduceOp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ReduceOp {
    /// The sum (`ReduceOp.SUM`); on `bool`, logical or.
    #[default]
    Sum,
    /// The mean over the ranks (`ReduceOp.AVG`): the sum divided by the group size, truncated
    /// toward zero on integer dtypes; refused on `bool`.
    Avg,
    /// The product (`ReduceOp.PRODUCT`); on `bool`, logical and.
    Product,
    /// The minimum (`ReduceOp.MIN`); on `bool`, logical and.
    Min,
    /// The maximum (`ReduceOp.MAX`); on `bool`, logical or.
    Max,
}

impl ReduceOp {
    /// Every reduction, in PyTorch's order.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Avg,
        ReduceOp::Product,
        ReduceOp::Min,
        ReduceOp::Max,
    ];

    /// The name the functional collectives take (`"sum"`, `"avg"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Avg => "avg",
            ReduceOp::Product => "product",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
        }
    }

    /// Parses the functional collectives' `reduce_op` argument, as c10d's `to_reduce_op`.
    pub fn parse(name: &str) -> Result<ReduceOp, DistError> {
        ReduceOp::ALL
            .into_iter()
            .find(|op| op.name() == name)
            .ok_or_else(|| DistError::Invalid(format!("Unrecognized reduce_op: {name}")))
    }
}

impl fmt::Display for ReduceOp {
    /// `ReduceOp.SUM`, as PyTorch prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let upper = match self {
            ReduceOp::Sum => "SUM",
            ReduceOp::Avg => "AVG",
            ReduceOp::Product => "PRODUCT",
            ReduceOp::Min => "MIN",
            ReduceOp::Max => "MAX",
        };
        write!(f, "ReduceOp.{upper}")
    }
}

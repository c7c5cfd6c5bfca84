//! Advanced indexing (`index.Tensor`, `index_put`) and indexing along a dimension: `index_select` (+`out`), `gather`, `scatter_add` (+in-place)
//! and `index_add` (+in-place). `index_add` and `scatter_add` are what autograd uses for the
//! backward of `index_select` and `gather`.
//!
//! All validate every index before touching data (so an error leaves outputs unwritten) and
//! then run parallel loops whose threads write disjoint elements: over output slices for the
//! copies, and over positions other than `dim` (serially along `dim`) for the accumulations,
//! whose repeated indices would otherwise race.

/// Runs `$body` with `$E` an unsigned integer type of `$size` bytes (to move elements of any
/// dtype without converting them).
macro_rules! by_element_size {
    ($size:expr, $E:ident => $body:expr) => {
        match $size {
            1 => {
                type $E = u8;
                $body
            }
            2 => {
                type $E = u16;
                $body
            }
            4 => {
                type $E = u32;
                $body
            }
            _ => {
                type $E = u64;
                $body
            }
        }
    };
}

mod advanced;
mod common;
mod gather;
mod index_add;
mod masked_scatter;
mod scatter;
mod select;

pub use advanced::*;
pub(crate) use common::Positions;
pub use gather::*;
pub use index_add::*;
pub use masked_scatter::*;
pub use scatter::*;
pub use select::*;

#[cfg(test)]
mod scatter_tests;
#[cfg(test)]
mod tests;

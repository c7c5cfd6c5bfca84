//! Switchboard's `torch.distributed`: data-parallel training across processes and machines.
//!
//! - [`ProcessGroup`]: ranks and collectives (`all_reduce` with every [`ReduceOp`],
//!   `broadcast`, `all_gather`, `reduce_scatter_tensor`, `barrier`, `send`/`recv`) for every
//!   dtype, each returning a [`Work`] to wait on, with a timeout and, on request, a check that
//!   every rank runs the same collective (Note [Collective fingerprints]).
//! - Its backends: MPI (the `mpi` feature; `mpirun` starts the ranks, on one machine or many)
//!   and the single process (a world of one, for code and tests without MPI).
//! - The collectives as dispatcher operators (`_c10d_functional::all_reduce`, ...,
//!   `wait_tensor`), so that the lazy backend, the tracer and dispatch modes see them.
//! - PyTorch's in-place `c10d::*` operators ([`c10d_ops`]: `allreduce_`, `broadcast_`, ...),
//!   taking the process group and the reduction and returning the [`Work`] as custom class
//!   objects.
//! - [`DistributedDataParallel`]: parameters broadcast from rank 0, gradients averaged in
//!   buckets launched from post-accumulate-grad hooks while backward goes on, `no_sync`.
//! - [`DistributedSampler`]: each rank's shard of every epoch.

mod backend;
mod buffer;
pub mod c10d_ops;
pub mod ddp;
mod error;
mod fingerprint;
pub mod functional;
pub mod functional_autograd;
#[cfg(feature = "mpi")]
mod mpi_backend;
mod process_group;
mod reduce_and_all_to_all;
mod reduce_op;
mod registry;
pub mod sampler;
mod work;

pub use backend::{Backend, Collective, SingleProcess};
pub use buffer::Buffer;
pub use ddp::{DistributedDataParallel, DEFAULT_BUCKET_CAP_MIB};
pub use error::DistError;
#[cfg(feature = "mpi")]
pub use mpi_backend::MpiBackend;
pub use process_group::{ProcessGroup, ProcessGroupOptions};
pub use reduce_op::ReduceOp;
pub use registry::{
    destroy_process_group, init_process_group, is_initialized, resolve_process_group, world,
    BackendKind, WORLD,
};
pub use sampler::DistributedSampler;
pub use work::Work;

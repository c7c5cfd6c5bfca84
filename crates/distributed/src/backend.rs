//! [`Backend`]: the engine a [`ProcessGroup`](crate::ProcessGroup) runs its collectives on, and
//! the requests it takes. Backends move elements; the group checks arguments, shapes and
//! dtypes before a request reaches them.

use std::sync::mpsc::Receiver;

use crate::buffer::Buffer;
use crate::reduce_op::ReduceOp;
use crate::work::Completion;

/// One collective, as a backend receives it. Every rank of the group submits the same
/// requests in the same order (a point-to-point pair excepted).
#[derive(Debug)]
pub enum Collective {
    /// Every rank gets the reduction of every rank's `data`. `Avg` never arrives: the group
    /// sums and divides (Note [Average as sum then divide]).
    AllReduce {
        /// This rank's elements.
        data: Buffer,
        /// The reduction (never `Avg`).
        op: ReduceOp,
    },
    /// Every rank gets `root`'s `data` (the others' `data` gives the length and dtype).
    Broadcast {
        /// The root's elements, or a buffer of the same length elsewhere.
        data: Buffer,
        /// The rank whose elements everyone gets.
        root: usize,
    },
    /// Every rank gets every rank's `data`, concatenated in rank order.
    AllGather {
        /// This rank's elements (the same length on every rank).
        data: Buffer,
    },
    /// `data` is `size` equal chunks; rank `r` gets the reduction of every rank's chunk `r`.
    ReduceScatter {
        /// This rank's elements (a multiple of the group size).
        data: Buffer,
        /// The reduction (never `Avg`).
        op: ReduceOp,
    },
    /// `root` gets the reduction of every rank's `data`; the others keep theirs.
    Reduce {
        /// This rank's elements.
        data: Buffer,
        /// The reduction (never `Avg`).
        op: ReduceOp,
        /// The rank that gets the reduction.
        root: usize,
    },
    /// Rank `r` sends `data`'s `send_counts[r']` elements (in order) to each rank `r'`, and
    /// receives `recv_counts[r']` from each, concatenated in rank order.
    AllToAll {
        /// This rank's elements (as many as `send_counts` sums to).
        data: Buffer,
        /// The elements sent to each rank.
        send_counts: Vec<usize>,
        /// The elements received from each rank.
        recv_counts: Vec<usize>,
    },
    /// Completes when every rank reached it.
    Barrier,
    /// Sends `data` to rank `dst`.
    Send {
        /// The elements.
        data: Buffer,
        /// The receiving rank.
        dst: usize,
        /// Matches the receiver's tag.
        tag: i32,
    },
    /// Receives into a buffer like `like` (its length and dtype) from rank `src`.
    Recv {
        /// The length and dtype expected.
        like: Buffer,
        /// The sending rank.
        src: usize,
        /// Matches the sender's tag.
        tag: i32,
    },
}

impl Collective {
    /// c10d's name of the operation (`OpType`), for fingerprints and messages.
    pub fn op_type(&self) -> &'static str {
        match self {
            Collective::AllReduce { .. } => "ALLREDUCE",
            Collective::Broadcast { .. } => "BROADCAST",
            Collective::AllGather { .. } => "ALLGATHER",
            Collective::ReduceScatter { .. } => "REDUCE_SCATTER",
            Collective::Reduce { .. } => "REDUCE",
            Collective::AllToAll { .. } => "ALLTOALL_BASE",
            Collective::Barrier => "BARRIER",
            Collective::Send { .. } => "SEND",
            Collective::Recv { .. } => "RECV",
        }
    }
}

/// A communication engine: MPI (`MpiBackend`, with the `mpi` feature) or
/// the group of one process ([`SingleProcess`]).
pub trait Backend: Send + Sync {
    /// Its name (`"mpi"`, `"single"`), as `get_backend` returns it.
    fn name(&self) -> &'static str;
    /// This process's rank.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn size(&self) -> usize;
    /// Starts `c`; the receiver delivers its completion. Requests complete in the order they
    /// were submitted.
    fn submit(&self, c: Collective) -> Receiver<Completion>;
    /// Stops the engine after the requests already submitted (MPI: finalizes), waiting at
    /// most `wait` for them (a request stuck in a collective that never completes is left
    /// behind). Later requests fail.
    fn shutdown(&self, wait: std::time::Duration);
}

/// The group of one process (a world of size 1): every collective is the identity, so code
/// written for several ranks runs, and is tested, without an MPI installation.
#[derive(Debug, Default)]
pub struct SingleProcess {
    stopped: std::sync::atomic::AtomicBool,
}

impl Backend for SingleProcess {
    fn name(&self) -> &'static str {
        "single"
    }

    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn submit(&self, c: Collective) -> Receiver<Completion> {
        let (tx, rx) = std::sync::mpsc::channel();
        let result = if self.stopped.load(std::sync::atomic::Ordering::Acquire) {
            Err(crate::DistError::Backend(
                "the process group was destroyed".into(),
            ))
        } else {
            match c {
                Collective::AllReduce { data, .. }
                | Collective::Broadcast { data, .. }
                | Collective::AllGather { data }
                | Collective::ReduceScatter { data, .. }
                | Collective::Reduce { data, .. } => Ok(data),
                Collective::AllToAll {
                    data, recv_counts, ..
                } => {
                    if recv_counts.iter().sum::<usize>() == data.len() {
                        Ok(data)
                    } else {
                        Err(crate::DistError::Invalid(format!(
                            "alltoall: a group of one process receives what it sends, but the \
                             output takes {} elements and the input has {}",
                            recv_counts.iter().sum::<usize>(),
                            data.len()
                        )))
                    }
                }
                Collective::Barrier => Ok(Buffer::Byte(Vec::new())),
                // The group refuses a peer other than a rank of the group, and the only rank
                // is this one: sending to oneself is refused before reaching here.
                Collective::Send { .. } | Collective::Recv { .. } => {
                    Err(crate::DistError::Invalid(
                        "a group of one process has no peer to send to or receive from".into(),
                    ))
                }
            }
        };
        let _ = tx.send(result);
        rx
    }

    fn shutdown(&self, _wait: std::time::Duration) {
        self.stopped
            .store(true, std::sync::atomic::Ordering::Release);
    }
}

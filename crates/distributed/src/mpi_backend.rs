//! The MPI backend: Open MPI (or any MPI) through the `mpi` crate, one communication thread per
//! process.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;

use half::{bf16, f16};
use mpi::collective::SystemOperation;
use mpi::datatype::{Equivalence, Partition, PartitionMut};
use mpi::environment::Threading;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::{CommunicatorCollectives, Destination, Root, Source};
use mpi::Count;

use crate::backend::{Backend, Collective};
use crate::buffer::Buffer;
use crate::error::DistError;
use crate::reduce_op::ReduceOp;
use crate::work::Completion;

// Note [One communication thread]
// As PyTorch's ProcessGroupMPI: MPI is initialized on a thread of its own, which runs the
// collectives one after the other in the order they were submitted; callers get a `Work` at
// once and wait on it when they need the result. Every rank submits the same collectives in
// the same order, so the thread's order is the order MPI needs, and the caller's thread is
// free meanwhile (backward goes on while a gradient bucket is on the wire). Only that thread
// calls MPI, so MPI_THREAD_SERIALIZED is all it asks of the library. MPI can be initialized
// once per process: the backend is made once, and `shutdown` finalizes it for good.

type Request = (Collective, Sender<Completion>);

/// The MPI backend of a process group: `MPI_COMM_WORLD` driven from one communication thread
/// (Note [One communication thread]).
pub struct MpiBackend {
    rank: usize,
    size: usize,
    queue: Mutex<Option<Sender<Request>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

static INITIALIZED: OnceLock<()> = OnceLock::new();

impl MpiBackend {
    /// Initializes MPI on a new communication thread. Fails when MPI was initialized before in
    /// this process (it cannot be initialized twice, even after finalizing).
    pub fn init() -> Result<MpiBackend, DistError> {
        if INITIALIZED.set(()).is_err() {
            return Err(DistError::Backend(
                "MPI was already initialized in this process (it can be initialized only once, \
                 even after the process group was destroyed)"
                    .into(),
            ));
        }
        let (ready_tx, ready_rx) = channel();
        let (queue_tx, queue_rx) = channel::<Request>();
        let thread = std::thread::Builder::new()
            .name("switchboard-mpi".into())
            .spawn(move || {
                let Some((universe, _)) = mpi::initialize_with_threading(Threading::Serialized)
                else {
                    let _ = ready_tx.send(Err(DistError::Backend("MPI_Init_thread failed".into())));
                    return;
                };
                let world = universe.world();
                let _ = ready_tx.send(Ok((world.rank() as usize, world.size() as usize)));
                for (c, done) in queue_rx {
                    let _ = done.send(run(&world, c));
                }
                // The queue closed (shutdown): dropping the universe finalizes MPI.
                drop(universe);
            })
            .map_err(|e| DistError::Backend(format!("cannot start the MPI thread: {e}")))?;
        let (rank, size) = ready_rx
            .recv()
            .map_err(|_| DistError::Backend("the MPI thread stopped while starting".into()))??;
        Ok(MpiBackend {
            rank,
            size,
            queue: Mutex::new(Some(queue_tx)),
            thread: Mutex::new(Some(thread)),
        })
    }
}

impl Backend for MpiBackend {
    fn name(&self) -> &'static str {
        "mpi"
    }

    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn submit(&self, c: Collective) -> Receiver<Completion> {
        let (tx, rx) = channel();
        let queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let refused = match &*queue {
            Some(q) => q.send((c, tx)).err().map(|e| e.0 .1),
            None => Some(tx),
        };
        if let Some(tx) = refused {
            let _ = tx.send(Err(DistError::Backend(
                "the process group was destroyed (MPI is finalized)".into(),
            )));
        }
        rx
    }

    fn shutdown(&self, wait: std::time::Duration) {
        // Closing the queue ends the thread's loop after the requests already queued.
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).take();
        let mut thread = self.thread.lock().unwrap_or_else(|e| e.into_inner());
        let start = std::time::Instant::now();
        while thread.as_ref().is_some_and(|t| !t.is_finished()) && start.elapsed() < wait {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        if let Some(t) = thread.take_if(|t| t.is_finished()) {
            let _ = t.join();
        }
    }
}

/// The MPI operation for `op` on numbers, and on `bool` (Note [Reductions on bool]).
fn system_op(op: ReduceOp, logical: bool) -> SystemOperation {
    match (op, logical) {
        (ReduceOp::Sum | ReduceOp::Avg, false) => SystemOperation::sum(),
        (ReduceOp::Product, false) => SystemOperation::product(),
        (ReduceOp::Min, false) => SystemOperation::min(),
        (ReduceOp::Max, false) => SystemOperation::max(),
        (ReduceOp::Sum | ReduceOp::Avg | ReduceOp::Max, true) => SystemOperation::logical_or(),
        (ReduceOp::Product | ReduceOp::Min, true) => SystemOperation::logical_and(),
    }
}

// Note [Reductions on bool]
// As PyTorch's NCCL backend: on bool, SUM and MAX are a logical or, PRODUCT and MIN a logical
// and (MPI's LOR and LAND on C_BOOL); AVG is refused before it gets here.

// Note [Half precision on the wire]
// MPI has no 16-bit float types. Moves (broadcast, gather, send) carry f16 and bf16 as their
// 16-bit patterns; reductions widen to f32, reduce, and round back once, so the result is the
// correctly rounded reduction of the f32 values (a sum of two halves is exact in f32).

/// Runs one collective on the communication thread.
fn run(world: &SimpleCommunicator, c: Collective) -> Completion {
    match c {
        Collective::AllReduce { data, op } => {
            let n = data.len();
            Ok(reduce(world, Reducing::AllReduce, data, n, op))
        }
        Collective::ReduceScatter { data, op } => {
            let chunk = data.len() / world.size() as usize;
            Ok(reduce(world, Reducing::ReduceScatter, data, chunk, op))
        }
        Collective::Reduce { data, op, root } => {
            let n = data.len();
            if world.rank() as usize == root {
                Ok(reduce(world, Reducing::ToRoot(root), data, n, op))
            } else {
                // Only the root's buffer receives: the others keep their elements.
                reduce(world, Reducing::ToRoot(root), data.clone(), 0, op);
                Ok(data)
            }
        }
        Collective::AllToAll {
            data,
            send_counts,
            recv_counts,
        } => all_to_all(world, &data, &send_counts, &recv_counts),
        Collective::Broadcast { mut data, root } => {
            let root = world.process_at_rank(root as i32);
            with_wire_mut(&mut data, |b| b.broadcast(&root));
            Ok(data)
        }
        Collective::AllGather { data } => {
            let mut out = Buffer::zeros(data.dtype(), data.len() * world.size() as usize)?;
            gather(&data, &mut out, world);
            Ok(out)
        }
        Collective::Barrier => {
            world.barrier();
            Ok(Buffer::Byte(Vec::new()))
        }
        Collective::Send { data, dst, tag } => {
            let peer = world.process_at_rank(dst as i32);
            with_wire(&data, |b| b.send(&peer, tag));
            Ok(Buffer::Byte(Vec::new()))
        }
        Collective::Recv { mut like, src, tag } => {
            let peer = world.process_at_rank(src as i32);
            with_wire_mut(&mut like, |b| b.receive(&peer, tag));
            Ok(like)
        }
    }
}

/// A buffer's elements as MPI sees them (Note [Half precision on the wire]).
enum Wire<'a> {
    U8(&'a mut [u8]),
    I8(&'a mut [i8]),
    I16(&'a mut [i16]),
    I32(&'a mut [i32]),
    I64(&'a mut [i64]),
    F32(&'a mut [f32]),
    F64(&'a mut [f64]),
    Bool(&'a mut [bool]),
    U16(&'a mut [u16]),
}

macro_rules! on_wire {
    ($w:expr, $v:ident => $e:expr) => {
        match $w {
            Wire::U8($v) => $e,
            Wire::I8($v) => $e,
            Wire::I16($v) => $e,
            Wire::I32($v) => $e,
            Wire::I64($v) => $e,
            Wire::F32($v) => $e,
            Wire::F64($v) => $e,
            Wire::Bool($v) => $e,
            Wire::U16($v) => $e,
        }
    };
}

impl Wire<'_> {
    fn broadcast(self, root: &mpi::topology::Process<'_>) {
        on_wire!(self, v => root.broadcast_into(v))
    }

    fn send(self, peer: &mpi::topology::Process<'_>, tag: i32) {
        on_wire!(self, v => peer.send_with_tag(&*v, tag))
    }

    fn receive(self, peer: &mpi::topology::Process<'_>, tag: i32) {
        on_wire!(self, v => { peer.receive_into_with_tag(v, tag); })
    }
}

fn with_wire_mut<R>(b: &mut Buffer, f: impl FnOnce(Wire<'_>) -> R) -> R {
    match b {
        Buffer::Byte(v) => f(Wire::U8(v)),
        Buffer::Char(v) => f(Wire::I8(v)),
        Buffer::Short(v) => f(Wire::I16(v)),
        Buffer::Int(v) => f(Wire::I32(v)),
        Buffer::Long(v) => f(Wire::I64(v)),
        Buffer::Float(v) => f(Wire::F32(v)),
        Buffer::Double(v) => f(Wire::F64(v)),
        Buffer::Bool(v) => f(Wire::Bool(v)),
        Buffer::Half(v) => {
            let mut bits: Vec<u16> = v.iter().map(|x| x.to_bits()).collect();
            let r = f(Wire::U16(&mut bits));
            for (x, b) in v.iter_mut().zip(bits) {
                *x = f16::from_bits(b);
            }
            r
        }
        Buffer::BFloat16(v) => {
            let mut bits: Vec<u16> = v.iter().map(|x| x.to_bits()).collect();
            let r = f(Wire::U16(&mut bits));
            for (x, b) in v.iter_mut().zip(bits) {
                *x = bf16::from_bits(b);
            }
            r
        }
    }
}

fn with_wire<R>(b: &Buffer, f: impl FnOnce(Wire<'_>) -> R) -> R {
    // A send only reads; the copy keeps one conversion path for every dtype.
    let mut b = b.clone();
    with_wire_mut(&mut b, f)
}

fn gather(data: &Buffer, out: &mut Buffer, world: &SimpleCommunicator) {
    fn go<T: Equivalence>(world: &SimpleCommunicator, send: &[T], recv: &mut [T]) {
        world.all_gather_into(send, recv);
    }
    match (data, out) {
        (Buffer::Byte(s), Buffer::Byte(r)) => go(world, s, r),
        (Buffer::Char(s), Buffer::Char(r)) => go(world, s, r),
        (Buffer::Short(s), Buffer::Short(r)) => go(world, s, r),
        (Buffer::Int(s), Buffer::Int(r)) => go(world, s, r),
        (Buffer::Long(s), Buffer::Long(r)) => go(world, s, r),
        (Buffer::Float(s), Buffer::Float(r)) => go(world, s, r),
        (Buffer::Double(s), Buffer::Double(r)) => go(world, s, r),
        (Buffer::Bool(s), Buffer::Bool(r)) => go(world, s, r),
        (Buffer::Half(s), Buffer::Half(r)) => {
            let bits: Vec<u16> = s.iter().map(|x| x.to_bits()).collect();
            let mut got = vec![0u16; r.len()];
            go(world, &bits, &mut got);
            for (x, b) in r.iter_mut().zip(got) {
                *x = f16::from_bits(b);
            }
        }
        (Buffer::BFloat16(s), Buffer::BFloat16(r)) => {
            let bits: Vec<u16> = s.iter().map(|x| x.to_bits()).collect();
            let mut got = vec![0u16; r.len()];
            go(world, &bits, &mut got);
            for (x, b) in r.iter_mut().zip(got) {
                *x = bf16::from_bits(b);
            }
        }
        _ => unreachable!("the output buffer is made with the input's dtype"),
    }
}

/// The reducing collectives.
#[derive(Clone, Copy)]
enum Reducing {
    AllReduce,
    ReduceScatter,
    /// To this root rank.
    ToRoot(usize),
}

fn reduce_typed<T: Equivalence>(
    world: &SimpleCommunicator,
    kind: Reducing,
    send: &[T],
    recv: &mut [T],
    op: SystemOperation,
) {
    match kind {
        Reducing::AllReduce => world.all_reduce_into(send, recv, op),
        Reducing::ReduceScatter => world.reduce_scatter_block_into(send, recv, op),
        Reducing::ToRoot(root) => {
            let root = world.process_at_rank(root as i32);
            if world.rank() == root.rank() {
                root.reduce_into_root(send, recv, op)
            } else {
                root.reduce_into(send, op)
            }
        }
    }
}

/// Reduces `data` over the ranks into `out_len` elements (all of them, or this rank's chunk).
fn reduce(
    world: &SimpleCommunicator,
    kind: Reducing,
    data: Buffer,
    out_len: usize,
    op: ReduceOp,
) -> Buffer {
    macro_rules! typed {
        ($v:expr, $variant:ident, $zero:expr, $logical:expr) => {{
            let mut out = vec![$zero; out_len];
            reduce_typed(world, kind, &$v, &mut out, system_op(op, $logical));
            Buffer::$variant(out)
        }};
    }
    match data {
        Buffer::Byte(v) => typed!(v, Byte, 0u8, false),
        Buffer::Char(v) => typed!(v, Char, 0i8, false),
        Buffer::Short(v) => typed!(v, Short, 0i16, false),
        Buffer::Int(v) => typed!(v, Int, 0i32, false),
        Buffer::Long(v) => typed!(v, Long, 0i64, false),
        Buffer::Float(v) => typed!(v, Float, 0f32, false),
        Buffer::Double(v) => typed!(v, Double, 0f64, false),
        Buffer::Bool(v) => typed!(v, Bool, false, true),
        Buffer::Half(v) => {
            let wide: Vec<f32> = v.iter().map(|x| x.to_f32()).collect();
            let mut out = vec![0f32; out_len];
            reduce_typed(world, kind, &wide, &mut out, system_op(op, false));
            Buffer::Half(out.into_iter().map(f16::from_f32).collect())
        }
        Buffer::BFloat16(v) => {
            let wide: Vec<f32> = v.iter().map(|x| x.to_f32()).collect();
            let mut out = vec![0f32; out_len];
            reduce_typed(world, kind, &wide, &mut out, system_op(op, false));
            Buffer::BFloat16(out.into_iter().map(bf16::from_f32).collect())
        }
    }
}

/// Counts and displacements (prefix sums) as MPI takes them; the group checked that they fit
/// (every count and their sum are at most `i32::MAX`).
fn partition(counts: &[usize]) -> Result<(Vec<Count>, Vec<Count>), DistError> {
    let too_many = || DistError::Invalid("alltoall: more than 2^31 - 1 elements".into());
    let counts: Vec<Count> = counts
        .iter()
        .map(|&c| Count::try_from(c).map_err(|_| too_many()))
        .collect::<Result<_, _>>()?;
    let mut displs = Vec::with_capacity(counts.len());
    let mut at: Count = 0;
    for &c in &counts {
        displs.push(at);
        at = at.checked_add(c).ok_or_else(too_many)?;
    }
    Ok((counts, displs))
}

fn all_to_all(
    world: &SimpleCommunicator,
    data: &Buffer,
    send_counts: &[usize],
    recv_counts: &[usize],
) -> Completion {
    fn go<T: Equivalence>(
        world: &SimpleCommunicator,
        send: &[T],
        sent: &(Vec<Count>, Vec<Count>),
        recv: &mut [T],
        received: &(Vec<Count>, Vec<Count>),
    ) {
        let s = Partition::new(send, &sent.0[..], &sent.1[..]);
        let mut r = PartitionMut::new(recv, &received.0[..], &received.1[..]);
        world.all_to_all_varcount_into(&s, &mut r);
    }
    let (sent, received) = (partition(send_counts)?, partition(recv_counts)?);
    let total: usize = recv_counts.iter().sum();
    let mut out = Buffer::zeros(data.dtype(), total)?;
    macro_rules! typed {
        ($s:expr, $r:expr) => {
            go(world, $s, &sent, $r, &received)
        };
    }
    match (data, &mut out) {
        (Buffer::Byte(s), Buffer::Byte(r)) => typed!(s, r),
        (Buffer::Char(s), Buffer::Char(r)) => typed!(s, r),
        (Buffer::Short(s), Buffer::Short(r)) => typed!(s, r),
        (Buffer::Int(s), Buffer::Int(r)) => typed!(s, r),
        (Buffer::Long(s), Buffer::Long(r)) => typed!(s, r),
        (Buffer::Float(s), Buffer::Float(r)) => typed!(s, r),
        (Buffer::Double(s), Buffer::Double(r)) => typed!(s, r),
        (Buffer::Bool(s), Buffer::Bool(r)) => typed!(s, r),
        (Buffer::Half(s), Buffer::Half(r)) => {
            let bits: Vec<u16> = s.iter().map(|x| x.to_bits()).collect();
            let mut got = vec![0u16; r.len()];
            typed!(&bits, &mut got);
            for (x, b) in r.iter_mut().zip(got) {
                *x = f16::from_bits(b);
            }
        }
        (Buffer::BFloat16(s), Buffer::BFloat16(r)) => {
            let bits: Vec<u16> = s.iter().map(|x| x.to_bits()).collect();
            let mut got = vec![0u16; r.len()];
            typed!(&bits, &mut got);
            for (x, b) in r.iter_mut().zip(got) {
                *x = bf16::from_bits(b);
            }
        }
        _ => unreachable!("the output buffer is made with the input's dtype"),
    }
    Ok(out)
}

//! [`ProcessGroup`]: a set of ranks and the collectives among them (c10d's `ProcessGroup`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use switchboard_ops as ops;
use switchboard_tensor::{ScalarType, Tensor};

use crate::backend::{Backend, Collective};
use crate::buffer::Buffer;
use crate::error::DistError;
use crate::fingerprint::{self, FingerPrint};
use crate::reduce_op::ReduceOp;
use crate::work::{Completion, Work};

/// How a group behaves.
#[derive(Debug, Clone)]
pub struct ProcessGroupOptions {
    /// How long a wait on a collective may take before it fails (PyTorch's default: 30 min).
    pub timeout: Duration,
    /// Checks, before each collective, that every rank runs the same one with the same shapes
    /// and dtypes (`TORCH_DISTRIBUTED_DEBUG=DETAIL`, Note [Collective fingerprints]).
    pub check_collectives: bool,
}

impl Default for ProcessGroupOptions {
    fn default() -> Self {
        ProcessGroupOptions {
            timeout: Duration::from_secs(30 * 60),
            check_collectives: false,
        }
    }
}

impl ProcessGroupOptions {
    /// The options with `check_collectives` set when `TORCH_DISTRIBUTED_DEBUG` is `DETAIL`, as
    /// PyTorch reads it.
    pub fn from_env(self) -> Self {
        let detail = std::env::var("TORCH_DISTRIBUTED_DEBUG").is_ok_and(|v| v == "DETAIL");
        ProcessGroupOptions {
            check_collectives: self.check_collectives || detail,
            ..self
        }
    }
}

/// A group of ranks and its collectives. Every collective returns a [`Work`] at once; the
/// tensors it writes hold the result after [`Work::wait`].
pub struct ProcessGroup {
    backend: Box<dyn Backend>,
    name: String,
    options: ProcessGroupOptions,
    seq: AtomicU64,
    aborted: Arc<AtomicBool>,
}

impl std::fmt::Debug for ProcessGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ProcessGroup({}, rank {} of {}, name {:?})",
            self.backend.name(),
            self.rank(),
            self.size(),
            self.name
        )
    }
}

/// Refuses a tensor without values (meta) before anything is launched; one whose values the
/// host cannot read is refused when its elements are copied out (Note [Collective buffers]).
pub(crate) fn check_tensor(what: &str, t: &Tensor) -> Result<(), DistError> {
    if t.is_meta() {
        return Err(DistError::Invalid(format!(
            "{what}: collectives need tensors with data, but got one on {}",
            t.device()
        )));
    }
    Ok(())
}

pub(crate) fn numel(t: &Tensor) -> usize {
    usize::try_from(t.numel()).unwrap_or(0)
}

/// Writes `buf` into `dst` (in place, outside autograd: a collective's result is data, as
/// PyTorch's collectives write under no_grad). A contiguous CPU tensor is written directly,
/// without an operator call (a wait inside a kernel, `wait_tensor`, must not dispatch); any
/// other through `copy_`.
pub(crate) fn write_into(dst: &Tensor, buf: Buffer) -> Result<(), DistError> {
    if buf.write_direct(dst)? {
        return Ok(());
    }
    let _no_grad = switchboard_autograd::no_grad();
    let src = buf.into_tensor(dst.sizes())?;
    ops::copy_(dst, &src)?;
    Ok(())
}

impl ProcessGroup {
    /// A group on `backend`, registered under `name` by the caller.
    pub fn new(backend: Box<dyn Backend>, name: &str, options: ProcessGroupOptions) -> Self {
        ProcessGroup {
            backend,
            name: name.to_string(),
            options,
            seq: AtomicU64::new(0),
            aborted: Arc::new(AtomicBool::new(false)),
        }
    }

    /// This process's rank in the group.
    pub fn rank(&self) -> usize {
        self.backend.rank()
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.backend.size()
    }

    /// The backend's name (`"mpi"`, `"single"`).
    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    /// The name the group is registered under (the functional collectives' `group_name`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The group's options.
    pub fn options(&self) -> &ProcessGroupOptions {
        &self.options
    }

    /// The number of collectives launched so far (c10d's sequence number).
    pub fn sequence_number(&self) -> u64 {
        self.seq.load(Ordering::Relaxed)
    }

    /// Stops the backend after the collectives already launched. After a timeout the
    /// communication thread may be stuck in a collective that never completes: it gets the
    /// group's timeout once more to finish, and is then left for the process to exit.
    pub(crate) fn shutdown(&self) {
        let wait = if self.aborted.load(Ordering::Acquire) {
            self.options.timeout
        } else {
            Duration::MAX
        };
        self.backend.shutdown(wait);
    }

    pub(crate) fn check_rank(&self, what: &str, r: usize) -> Result<(), DistError> {
        if r >= self.size() {
            return Err(DistError::Invalid(format!(
                "Invalid {what} rank: should be within the range of [0, {}), but got {r}.",
                self.size()
            )));
        }
        Ok(())
    }

    fn wait_raw(&self, rx: std::sync::mpsc::Receiver<Completion>, what: &str) -> Completion {
        match rx.recv_timeout(self.options.timeout) {
            Ok(c) => c,
            Err(_) => {
                self.aborted.store(true, Ordering::Release);
                Err(DistError::Timeout(format!(
                    "[Rank {}] {what} timed out after {} ms: a rank died, hangs, or did not \
                     call the same collective",
                    self.rank(),
                    self.options.timeout.as_millis()
                )))
            }
        }
    }

    /// Launches `c` (after the fingerprint check when on), with `then` run on completion.
    pub(crate) fn launch(
        &self,
        c: Collective,
        t: Option<&Tensor>,
        root: Option<usize>,
        then: Option<crate::work::OnComplete>,
    ) -> Result<Work, DistError> {
        if self.aborted.load(Ordering::Acquire) {
            return Err(DistError::Backend(format!(
                "[Rank {}] the process group was aborted after a collective timed out; no \
                 further collective can run",
                self.rank()
            )));
        }
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let op_type = c.op_type();
        let is_p2p = matches!(c, Collective::Send { .. } | Collective::Recv { .. });
        if self.options.check_collectives && !is_p2p {
            let mine = FingerPrint {
                seq,
                op_type,
                dtype: t.map(|t| t.dtype()),
                shape: t.map_or_else(Vec::new, |t| t.sizes().to_vec()),
                root,
            };
            fingerprint::check(&*self.backend, &mine, |rx| {
                self.wait_raw(rx, "the collective fingerprint exchange")
            })?;
        }
        let numel = t.map_or(0, |t| t.numel());
        let description = format!(
            "Work{}(SeqNum={seq}, OpType={op_type}, NumelIn={numel}, Timeout(ms)={})",
            self.backend.name().to_uppercase(),
            self.options.timeout.as_millis()
        );
        let aborted = self.aborted.clone();
        let work = Work::new(
            self.backend.submit(c),
            description,
            self.options.timeout,
            Arc::new(move || aborted.store(true, Ordering::Release)),
        );
        Ok(match then {
            Some(f) => work.then(f),
            None => work,
        })
    }

    /// The reduction a backend runs for `op` on elements of `dtype`, and the divisor of its
    /// result: `Avg` is a sum then a division by the group's size (Note [Average as sum then
    /// divide]), refused for booleans as PyTorch refuses it.
    pub(crate) fn reduction_on_wire(
        &self,
        op: ReduceOp,
        dtype: ScalarType,
    ) -> Result<(ReduceOp, usize), DistError> {
        match op {
            ReduceOp::Avg if dtype == ScalarType::Bool => Err(DistError::Invalid(
                "Cannot use ReduceOp.AVG with boolean inputs".into(),
            )),
            ReduceOp::Avg => Ok((ReduceOp::Sum, self.size())),
            op => Ok((op, 1)),
        }
    }

    pub(crate) fn or_failed(r: Result<Work, DistError>) -> Work {
        r.unwrap_or_else(Work::failed)
    }

    /// Reduces `t` over the ranks, in place on every rank (`dist.all_reduce`).
    pub fn all_reduce(&self, t: &Tensor, op: ReduceOp) -> Work {
        Self::or_failed((|| {
            check_tensor("all_reduce", t)?;
            let (wire_op, size) = self.reduction_on_wire(op, t.dtype())?;
            let data = Buffer::from_tensor(t)?;
            let dst = t.clone();
            let then = Box::new(move |mut buf: Buffer| {
                if size > 1 {
                    buf.divide(size);
                }
                write_into(&dst, buf)
            });
            self.launch(
                Collective::AllReduce { data, op: wire_op },
                Some(t),
                None,
                Some(then),
            )
        })())
    }

    /// Gives every rank `root`'s `t`, in place (`dist.broadcast`).
    pub fn broadcast(&self, t: &Tensor, root: usize) -> Work {
        Self::or_failed((|| {
            check_tensor("broadcast", t)?;
            self.check_rank("root", root)?;
            let data = Buffer::from_tensor(t)?;
            let dst = t.clone();
            let then = Box::new(move |buf: Buffer| write_into(&dst, buf));
            self.launch(
                Collective::Broadcast { data, root },
                Some(t),
                Some(root),
                Some(then),
            )
        })())
    }

    /// Gathers every rank's `input` into `output`, rank after rank along the first dimension
    /// (`dist.all_gather_into_tensor`): `output` has `size` times `input`'s elements.
    pub fn all_gather_into_tensor(&self, output: &Tensor, input: &Tensor) -> Work {
        Self::or_failed((|| {
            check_tensor("all_gather_into_tensor", input)?;
            check_tensor("all_gather_into_tensor", output)?;
            if output.dtype() != input.dtype() {
                return Err(DistError::Invalid(format!(
                    "output tensor must have the same type as input tensor, but got {} and {}",
                    output.dtype(),
                    input.dtype()
                )));
            }
            if numel(output) != numel(input) * self.size() {
                return Err(DistError::Invalid(format!(
                    "output tensor size must be equal to world_size times input tensor size \
                     ({} x {} elements), but got {}",
                    self.size(),
                    numel(input),
                    numel(output)
                )));
            }
            let data = Buffer::from_tensor(input)?;
            let dst = output.clone();
            let then = Box::new(move |buf: Buffer| write_into(&dst, buf));
            self.launch(
                Collective::AllGather { data },
                Some(input),
                None,
                Some(then),
            )
        })())
    }

    /// Gathers every rank's `input` into `outputs[r]` (`dist.all_gather`).
    pub fn all_gather(&self, outputs: &[Tensor], input: &Tensor) -> Work {
        Self::or_failed((|| {
            check_tensor("all_gather", input)?;
            if outputs.len() != self.size() {
                return Err(DistError::Invalid(format!(
                    "all_gather needs one output tensor per rank ({}), but got {}",
                    self.size(),
                    outputs.len()
                )));
            }
            for o in outputs {
                if o.sizes() != input.sizes() || o.dtype() != input.dtype() {
                    return Err(DistError::Invalid(format!(
                        "all_gather's output tensors must have the input's shape {:?} and \
                         dtype {}, but got {:?} and {}",
                        input.sizes(),
                        input.dtype(),
                        o.sizes(),
                        o.dtype()
                    )));
                }
            }
            let data = Buffer::from_tensor(input)?;
            let n = numel(input);
            let dsts = outputs.to_vec();
            let then = Box::new(move |buf: Buffer| {
                for (r, dst) in dsts.iter().enumerate() {
                    write_into(dst, buf.slice(r * n, n))?;
                }
                Ok(())
            });
            self.launch(
                Collective::AllGather { data },
                Some(input),
                None,
                Some(then),
            )
        })())
    }

    /// Reduces `input` (`size` chunks along the first dimension) over the ranks and gives rank
    /// `r` chunk `r` in `output` (`dist.reduce_scatter_tensor`).
    pub fn reduce_scatter_tensor(&self, output: &Tensor, input: &Tensor, op: ReduceOp) -> Work {
        Self::or_failed((|| {
            check_tensor("reduce_scatter_tensor", input)?;
            check_tensor("reduce_scatter_tensor", output)?;
            if output.dtype() != input.dtype() {
                return Err(DistError::Invalid(format!(
                    "output tensor must have the same type as input tensor, but got {} and {}",
                    output.dtype(),
                    input.dtype()
                )));
            }
            if numel(input) != numel(output) * self.size() {
                return Err(DistError::Invalid(format!(
                    "input tensor must be the same size as output size times world size \
                     ({} x {} elements), but got {}",
                    self.size(),
                    numel(output),
                    numel(input)
                )));
            }
            let (wire_op, size) = self.reduction_on_wire(op, input.dtype())?;
            let data = Buffer::from_tensor(input)?;
            let dst = output.clone();
            let then = Box::new(move |mut buf: Buffer| {
                if size > 1 {
                    buf.divide(size);
                }
                write_into(&dst, buf)
            });
            self.launch(
                Collective::ReduceScatter { data, op: wire_op },
                Some(input),
                None,
                Some(then),
            )
        })())
    }

    /// Completes when every rank reached it (`dist.barrier`).
    pub fn barrier(&self) -> Work {
        Self::or_failed(self.launch(Collective::Barrier, None, None, None))
    }

    /// Sends `t` to rank `dst` (`dist.isend`); `tag` matches the receiver's.
    pub fn send(&self, t: &Tensor, dst: usize, tag: i32) -> Work {
        Self::or_failed((|| {
            check_tensor("send", t)?;
            self.check_rank("destination", dst)?;
            if dst == self.rank() {
                return Err(DistError::Invalid(
                    "Invalid destination rank: a rank cannot send to itself".into(),
                ));
            }
            let data = Buffer::from_tensor(t)?;
            self.launch(Collective::Send { data, dst, tag }, Some(t), None, None)
        })())
    }

    /// Receives into `t` from rank `src` (`dist.irecv`); `t`'s shape and dtype must be the
    /// sender's.
    pub fn recv(&self, t: &Tensor, src: usize, tag: i32) -> Work {
        Self::or_failed((|| {
            check_tensor("recv", t)?;
            self.check_rank("source", src)?;
            if src == self.rank() {
                return Err(DistError::Invalid(
                    "Invalid source rank: a rank cannot receive from itself".into(),
                ));
            }
            let like = Buffer::zeros(t.dtype(), numel(t))?;
            let dst = t.clone();
            let then = Box::new(move |buf: Buffer| write_into(&dst, buf));
            self.launch(
                Collective::Recv { like, src, tag },
                Some(t),
                None,
                Some(then),
            )
        })())
    }
}

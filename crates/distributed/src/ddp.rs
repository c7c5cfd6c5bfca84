//! [`DistributedDataParallel`]: the same model on every rank, trained on each rank's shard,
//! gradients averaged over the ranks in buckets while backward goes on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use switchboard_autograd::{no_grad, AutogradTensor};
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{ScalarType, Tensor};

use crate::buffer::Buffer;
use crate::error::DistError;
use crate::process_group::{write_into, ProcessGroup};
use crate::reduce_op::ReduceOp;
use crate::work::Work;

/// PyTorch's `bucket_cap_mb` default.
pub const DEFAULT_BUCKET_CAP_MIB: f64 = 25.0;

/// PyTorch's `first_bucket_bytes_cap`: the first bucket (the last parameters, whose gradients
/// come first) is small, so communication starts early in backward.
const FIRST_BUCKET_BYTES: usize = 1 << 20;

// Note [Gradient buckets]
// As PyTorch's Reducer: the parameters are grouped, in reverse order (backward produces the
// last layer's gradients first), into buckets of one dtype of at most `bucket_cap_mib` (the
// first at most 1 MiB). Each parameter has a post-accumulate-grad hook; when the last gradient
// of a bucket is accumulated, the bucket's gradients are flattened into one buffer and its
// average over the ranks is launched, asynchronously, while backward computes the next
// gradients. `finish_gradient_synchronization` (PyTorch: the engine's final callback) waits for
// every bucket and writes the averages back into the `.grad`s. A parameter that got no
// gradient in this backward counts as a zero gradient, and buckets launch in their order (a
// ready bucket waits for the ones before it), so every rank launches the same collectives in
// the same order (PyTorch's Reducer does both). Under `no_sync` the hooks
// launch nothing and gradients accumulate locally; the next synchronized backward averages the
// accumulated sums.

struct Bucket {
    /// Indices into the parameters, in the order they are flattened.
    params: Vec<usize>,
    dtype: ScalarType,
}

#[derive(Default)]
struct Step {
    /// Per bucket: how many of its parameters have their gradient.
    ready: Vec<usize>,
    /// Per parameter: whether its gradient is accumulated.
    marked: Vec<bool>,
    /// Per bucket: its launched average and the flat buffer it writes.
    launched: Vec<Option<(Work, Tensor)>>,
    /// The next bucket to launch: buckets launch in order, whatever order they become ready
    /// in, so that every rank submits the same collectives in the same order.
    next: usize,
}

struct Inner {
    group: Arc<ProcessGroup>,
    params: Vec<Tensor>,
    buckets: Vec<Bucket>,
    /// Per parameter: its bucket.
    bucket_of: Vec<usize>,
    sync: AtomicBool,
    step: Mutex<Step>,
    /// The first error a hook met (hooks cannot return one), reported by `finish`.
    hook_error: Mutex<Option<DistError>>,
}

/// Data-parallel training of a model's parameters over a process group
/// (`torch.nn.parallel.DistributedDataParallel`, Note [Gradient buckets]).
///
/// ```text
/// let ddp = DistributedDataParallel::new(model.parameters(), world()?, DEFAULT_BUCKET_CAP_MIB)?;
/// loss.backward()?;                         // buckets launched as gradients arrive
/// ddp.finish_gradient_synchronization()?;   // averages in .grad
/// opt.step()?;
/// ```
#[derive(Clone)]
pub struct DistributedDataParallel {
    inner: Arc<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl DistributedDataParallel {
    /// Broadcasts `params` from rank 0 (so every rank starts from the same model), groups them
    /// into buckets of at most `bucket_cap_mib` MiB, and hooks their gradient accumulation.
    pub fn new(
        params: Vec<Tensor>,
        group: Arc<ProcessGroup>,
        bucket_cap_mib: f64,
    ) -> Result<Self, DistError> {
        if !(bucket_cap_mib.is_finite() && bucket_cap_mib >= 0.0) {
            return Err(DistError::Invalid(format!(
                "bucket_cap_mb must be a finite number, at least 0, got {bucket_cap_mib}"
            )));
        }
        for (i, p) in params.iter().enumerate() {
            if !p.requires_grad() {
                return Err(DistError::Invalid(format!(
                    "parameter {i} does not require grad: DistributedDataParallel averages the \
                     gradients of trainable parameters"
                )));
            }
        }
        // Rank 0's values everywhere (PyTorch: `_sync_module_states`).
        {
            let _g = no_grad();
            let works: Vec<Work> = params.iter().map(|p| group.broadcast(p, 0)).collect();
            for w in works {
                w.wait()?;
            }
        }
        let cap = (bucket_cap_mib * (1 << 20) as f64) as usize;
        let buckets = assign_buckets(&params, cap);
        let mut bucket_of = vec![0; params.len()];
        for (b, bucket) in buckets.iter().enumerate() {
            for &p in &bucket.params {
                bucket_of[p] = b;
            }
        }
        let inner = Arc::new(Inner {
            group,
            buckets,
            bucket_of,
            sync: AtomicBool::new(true),
            step: Mutex::new(Step::default()),
            hook_error: Mutex::new(None),
            params,
        });
        inner.reset(&mut lock(&inner.step));
        for (i, p) in inner.params.iter().enumerate() {
            let weak: Weak<Inner> = Arc::downgrade(&inner);
            p.register_post_accumulate_grad_hook(move |_| {
                if let Some(inner) = weak.upgrade() {
                    inner.mark_ready(i);
                }
            })?;
        }
        Ok(DistributedDataParallel { inner })
    }

    /// The parameters' buckets, each as parameter indices (Note [Gradient buckets]).
    pub fn buckets(&self) -> Vec<Vec<usize>> {
        self.inner
            .buckets
            .iter()
            .map(|b| b.params.clone())
            .collect()
    }

    /// The group the gradients are averaged over.
    pub fn group(&self) -> &Arc<ProcessGroup> {
        &self.inner.group
    }

    /// Turns gradient synchronization off until the guard is dropped (`no_sync`): backward
    /// accumulates gradients locally; the first synchronized backward after it averages the
    /// sums.
    pub fn no_sync(&self) -> NoSync<'_> {
        let was = self.inner.sync.swap(false, Ordering::AcqRel);
        NoSync { ddp: self, was }
    }

    /// Waits for every bucket's average and writes it into the parameters' `.grad`; launches
    /// first the buckets some of whose parameters got no gradient (as zeros). Call after each
    /// backward (a no-op under [`no_sync`](Self::no_sync)).
    pub fn finish_gradient_synchronization(&self) -> Result<(), DistError> {
        if let Some(e) = lock(&self.inner.hook_error).take() {
            self.inner.reset(&mut lock(&self.inner.step));
            return Err(e);
        }
        if !self.inner.sync.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut step = lock(&self.inner.step);
        let result = (|| {
            while step.next < self.inner.buckets.len() {
                let b = step.next;
                self.inner.launch(&mut step, b)?;
            }
            for b in 0..self.inner.buckets.len() {
                if let Some((work, flat)) = step.launched[b].take() {
                    work.wait()?;
                    self.inner.unflatten(b, &flat)?;
                }
            }
            Ok(())
        })();
        self.inner.reset(&mut step);
        result
    }
}

/// Re-enables gradient synchronization when dropped (see
/// [`DistributedDataParallel::no_sync`]).
pub struct NoSync<'a> {
    ddp: &'a DistributedDataParallel,
    was: bool,
}

impl Drop for NoSync<'_> {
    fn drop(&mut self) {
        self.ddp.inner.sync.store(self.was, Ordering::Release);
    }
}

/// Buckets in reverse parameter order, one dtype each, the first at most
/// [`FIRST_BUCKET_BYTES`], the others at most `cap` bytes (a parameter larger than the cap is
/// a bucket of its own; a cap of 0 makes one bucket per parameter).
fn assign_buckets(params: &[Tensor], cap: usize) -> Vec<Bucket> {
    let mut buckets: Vec<Bucket> = Vec::new();
    let mut open: Vec<(ScalarType, Vec<usize>, usize)> = Vec::new();
    for i in (0..params.len()).rev() {
        let p = &params[i];
        let bytes = p.nbytes();
        let limit = if buckets.is_empty() {
            cap.min(FIRST_BUCKET_BYTES)
        } else {
            cap
        };
        let slot = match open.iter().position(|(d, _, _)| *d == p.dtype()) {
            Some(s) => s,
            None => {
                open.push((p.dtype(), Vec::new(), 0));
                open.len() - 1
            }
        };
        let (dtype, members, size) = &mut open[slot];
        members.push(i);
        *size += bytes;
        if *size >= limit {
            buckets.push(Bucket {
                params: std::mem::take(members),
                dtype: *dtype,
            });
            *size = 0;
        }
    }
    for (dtype, members, _) in open {
        if !members.is_empty() {
            buckets.push(Bucket {
                params: members,
                dtype,
            });
        }
    }
    buckets
}

impl Inner {
    fn reset(&self, step: &mut Step) {
        step.ready = vec![0; self.buckets.len()];
        step.marked = vec![false; self.params.len()];
        step.launched = (0..self.buckets.len()).map(|_| None).collect();
        step.next = 0;
    }

    /// A parameter's gradient is accumulated: launches its bucket if it was the last one.
    fn mark_ready(&self, i: usize) {
        if !self.sync.load(Ordering::Acquire) {
            return;
        }
        let mut step = lock(&self.step);
        if step.marked[i] {
            return;
        }
        step.marked[i] = true;
        let b = self.bucket_of[i];
        step.ready[b] += 1;
        while step.next < self.buckets.len()
            && step.ready[step.next] == self.buckets[step.next].params.len()
        {
            let next = step.next;
            if let Err(e) = self.launch(&mut step, next) {
                lock(&self.hook_error).get_or_insert(e);
                return;
            }
        }
    }

    /// Flattens bucket `b`'s gradients (zeros for a parameter without one) and launches their
    /// average.
    fn launch(&self, step: &mut Step, b: usize) -> Result<(), DistError> {
        let bucket = &self.buckets[b];
        let mut parts = Vec::with_capacity(bucket.params.len());
        for &i in &bucket.params {
            let p = &self.params[i];
            parts.push(match p.grad() {
                Some(g) => Buffer::from_tensor(&g)?,
                None => Buffer::zeros(bucket.dtype, usize::try_from(p.numel()).unwrap_or(0))?,
            });
        }
        let flat = Buffer::concat(bucket.dtype, &parts)?;
        let n = flat.len() as i64;
        let flat = flat.into_tensor(&[n])?;
        let work = self.group.all_reduce(&flat, ReduceOp::Avg);
        step.launched[b] = Some((work, flat));
        step.next = b + 1;
        Ok(())
    }

    /// Writes bucket `b`'s averaged gradients back into the `.grad`s.
    fn unflatten(&self, b: usize, flat: &Tensor) -> Result<(), DistError> {
        let _g = no_grad();
        let mut offset = 0i64;
        for &i in &self.buckets[b].params {
            let p = &self.params[i];
            let n = p.numel();
            let part = ops::narrow(flat, 0, offset, n)?.reshape(p.sizes())?;
            offset += n;
            match p.grad() {
                Some(g) => write_into(&g, Buffer::from_tensor(&part)?)?,
                None => p.set_grad(Some(ops::clone(&part)?)),
            }
        }
        Ok(())
    }
}

//! `switchboard train --distributed`: data-parallel training, one rank per process started by
//! `mpirun`, through switchboard-distributed.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use switchboard_distributed::{
    init_process_group, is_initialized, sampler, world, BackendKind, DistributedDataParallel,
    ProcessGroup, ProcessGroupOptions, ReduceOp, DEFAULT_BUCKET_CAP_MIB,
};
use switchboard_nn::Module;
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use super::TrainError;

// Note [Data-parallel steps equal to one process's]
// `--batch-size` is the global batch: every rank draws the same shuffled order, and each global
// minibatch is split among the ranks (rank r takes its positions r, r + size, ...). A rank's
// loss is its samples' summed cross-entropy times size / (global batch size): DDP averages the
// gradients over the ranks, so the averaged gradient is the gradient of the global batch's
// mean loss, the one a single process computes, even when the ranks' shares differ (the last
// batch). The ranks start from rank 0's parameters and apply the same averaged gradients with
// the same optimizer, so they stay equal; the epoch's loss and accuracy counts are summed over
// the ranks once per epoch. Only rank 0 prints.

/// How the training loop runs: alone, or as one rank of a data-parallel job.
pub(super) enum Parallel {
    /// One process.
    Alone,
    /// One rank of several.
    Rank {
        group: Arc<ProcessGroup>,
        ddp: DistributedDataParallel,
    },
}

impl Parallel {
    /// Joins the MPI job (`distributed`) and wraps `model`'s parameters in DDP (rank 0's
    /// values everywhere); otherwise alone.
    pub(super) fn start(
        distributed: bool,
        timeout: Duration,
        model: &dyn Module,
    ) -> Result<Parallel, TrainError> {
        if !distributed {
            return Ok(Parallel::Alone);
        }
        let dist = |e: switchboard_distributed::DistError| TrainError::Distributed(e.to_string());
        let group = if is_initialized() {
            world().map_err(dist)?
        } else {
            let options = ProcessGroupOptions {
                timeout,
                ..Default::default()
            }
            .from_env();
            init_process_group(BackendKind::Mpi, options).map_err(dist)?
        };
        let ddp =
            DistributedDataParallel::new(model.parameters(), group.clone(), DEFAULT_BUCKET_CAP_MIB)
                .map_err(dist)?;
        Ok(Parallel::Rank { group, ddp })
    }

    /// This process's rank and the number of ranks.
    pub(super) fn rank_and_size(&self) -> (usize, usize) {
        match self {
            Parallel::Alone => (0, 1),
            Parallel::Rank { group, .. } => (group.rank(), group.size()),
        }
    }

    /// Whether this process prints (rank 0).
    pub(super) fn prints(&self) -> bool {
        self.rank_and_size().0 == 0
    }

    /// This rank's share of a global minibatch.
    pub(super) fn shard<'a>(&self, batch: &'a [usize]) -> Cow<'a, [usize]> {
        match self {
            Parallel::Alone => Cow::Borrowed(batch),
            Parallel::Rank { group, .. } => {
                Cow::Owned(sampler::shard(batch, group.rank(), group.size()))
            }
        }
    }

    /// The loss to differentiate for this rank's `logits` on a global batch of `global`
    /// samples, and the global batch's summed loss it stands for (Note [Data-parallel steps
    /// equal to one process's]).
    pub(super) fn loss(
        &self,
        logits: &Tensor,
        labels: &Tensor,
        global: usize,
    ) -> Result<Tensor, TrainError> {
        Ok(match self {
            Parallel::Alone => ops::cross_entropy_loss(logits, labels)?,
            Parallel::Rank { group, .. } => {
                let sum = ops::cross_entropy_loss_with(
                    logits,
                    labels,
                    ops::CrossEntropyLossOptions::default().reduction(2),
                )?;
                ops::mul_scalar(&sum, group.size() as f64 / global as f64)?
            }
        })
    }

    /// The global batch's summed loss from [`loss`](Self::loss)'s value on this rank.
    pub(super) fn summed_loss(&self, loss: f64, global: usize) -> f64 {
        match self {
            Parallel::Alone => loss * global as f64,
            Parallel::Rank { group, .. } => loss * global as f64 / group.size() as f64,
        }
    }

    /// After backward: the gradients averaged over the ranks.
    pub(super) fn synchronize_gradients(&self) -> Result<(), TrainError> {
        match self {
            Parallel::Alone => Ok(()),
            Parallel::Rank { ddp, .. } => ddp
                .finish_gradient_synchronization()
                .map_err(|e| TrainError::Distributed(e.to_string())),
        }
    }

    /// The epoch's summed loss and hit count over every rank.
    pub(super) fn epoch_totals(&self, loss_sum: f64, hits: i64) -> Result<(f64, i64), TrainError> {
        let Parallel::Rank { group, .. } = self else {
            return Ok((loss_sum, hits));
        };
        let t = Tensor::from_vec(vec![loss_sum, hits as f64], &[2])?;
        group
            .all_reduce(&t, ReduceOp::Sum)
            .wait()
            .map_err(|e| TrainError::Distributed(e.to_string()))?;
        let v = t.to_vec::<f64>()?;
        Ok((v[0], v[1].round() as i64))
    }
}

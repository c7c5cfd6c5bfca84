//! [`DistributedSampler`]: each rank's shard of a data set, epoch by epoch
//! (`torch.utils.data.DistributedSampler`).

use switchboard_tensor::Generator;

use crate::error::DistError;

/// Splits the indices `0..len` among `num_replicas` ranks: every rank gets `num_samples`
/// indices, rank `r` those at positions `r, r + num_replicas, ...` of the epoch's order (shuffled
/// by a generator seeded with `seed + epoch`, the same on every rank). Without `drop_last`
/// the order is padded with its own first indices to a multiple of `num_replicas`; with it,
/// the tail is dropped.
#[derive(Debug, Clone)]
pub struct DistributedSampler {
    len: usize,
    num_replicas: usize,
    rank: usize,
    shuffle: bool,
    seed: u64,
    drop_last: bool,
    epoch: u64,
}

impl DistributedSampler {
    /// A shuffling sampler of `len` indices for `rank` of `num_replicas`, seed 0, no
    /// `drop_last` (PyTorch's defaults).
    pub fn new(len: usize, num_replicas: usize, rank: usize) -> Result<Self, DistError> {
        if num_replicas == 0 {
            return Err(DistError::Invalid(
                "num_replicas must be at least 1, got 0".into(),
            ));
        }
        if rank >= num_replicas {
            return Err(DistError::Invalid(format!(
                "Invalid rank {rank}, rank should be in the interval [0, {}]",
                num_replicas - 1
            )));
        }
        Ok(DistributedSampler {
            len,
            num_replicas,
            rank,
            shuffle: true,
            seed: 0,
            drop_last: false,
            epoch: 0,
        })
    }

    /// Whether the order is shuffled each epoch.
    pub fn shuffle(self, shuffle: bool) -> Self {
        DistributedSampler { shuffle, ..self }
    }

    /// The shuffle's seed (the same on every rank).
    pub fn seed(self, seed: u64) -> Self {
        DistributedSampler { seed, ..self }
    }

    /// Drops the tail instead of padding.
    pub fn drop_last(self, drop_last: bool) -> Self {
        DistributedSampler { drop_last, ..self }
    }

    /// Sets the epoch, which the shuffle depends on (`set_epoch`).
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
    }

    /// The number of indices each rank gets.
    pub fn num_samples(&self) -> usize {
        if self.drop_last && !self.len.is_multiple_of(self.num_replicas) {
            (self.len - self.num_replicas).div_ceil(self.num_replicas)
        } else {
            self.len.div_ceil(self.num_replicas)
        }
    }

    /// This rank's indices for the current epoch.
    pub fn indices(&self) -> Vec<usize> {
        let mut order: Vec<usize> = if self.shuffle {
            permutation(
                self.len,
                &Generator::new(self.seed.wrapping_add(self.epoch)),
            )
        } else {
            (0..self.len).collect()
        };
        let total = self.num_samples() * self.num_replicas;
        if total <= order.len() {
            order.truncate(total);
        } else if !order.is_empty() {
            // Padded with the order's own head, repeated as often as needed.
            let mut i = 0;
            while order.len() < total {
                order.push(order[i]);
                i += 1;
            }
        }
        order
            .into_iter()
            .skip(self.rank)
            .step_by(self.num_replicas)
            .collect()
    }
}

/// A Fisher-Yates shuffle of `0..n` drawn from `gen` (the same order on every rank for the
/// same seed; the training job's shuffle).
pub fn permutation(n: usize, gen: &Generator) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    let mut state = gen.lock();
    for i in (1..n).rev() {
        // random64 % (i + 1): the bias is below 2^-40 for any realistic data set.
        let j = (state.random64() % (i as u64 + 1)) as usize;
        p.swap(i, j);
    }
    p
}

/// Rank `rank`'s share of one global minibatch: the entries at positions `rank, rank + size,
/// ...` (the batch that `DistributedSampler`'s interleaving gives a rank when every rank draws
/// `batch.len() / size` samples). The shares of all ranks partition the batch.
pub fn shard<T: Copy>(batch: &[T], rank: usize, size: usize) -> Vec<T> {
    batch
        .iter()
        .copied()
        .skip(rank)
        .step_by(size.max(1))
        .collect()
}

//! DistributedSampler: each rank's shard of every epoch, as PyTorch's.

use switchboard_distributed::sampler::shard;
use switchboard_distributed::DistributedSampler;

#[test]
fn shards_partition_the_epoch_with_padding() {
    // 10 samples over 3 ranks: 4 each, the order padded with its own first 2 indices.
    let shards: Vec<Vec<usize>> = (0..3)
        .map(|r| {
            DistributedSampler::new(10, 3, r)
                .unwrap()
                .shuffle(false)
                .indices()
        })
        .collect();
    assert_eq!(
        shards,
        [vec![0, 3, 6, 9], vec![1, 4, 7, 0], vec![2, 5, 8, 1]]
    );
    // drop_last: the tail goes instead.
    let s = DistributedSampler::new(10, 3, 1)
        .unwrap()
        .shuffle(false)
        .drop_last(true);
    assert_eq!((s.num_samples(), s.indices()), (3, vec![1, 4, 7]));
}

#[test]
fn the_shuffle_is_the_same_on_every_rank_and_changes_with_the_epoch() {
    let order = |epoch: u64| -> Vec<usize> {
        let mut all: Vec<(usize, usize)> = Vec::new();
        for r in 0..2 {
            let mut s = DistributedSampler::new(9, 2, r).unwrap().seed(7);
            s.set_epoch(epoch);
            // Rank r's k-th index sits at position k * 2 + r of the epoch's order.
            all.extend(
                s.indices()
                    .into_iter()
                    .enumerate()
                    .map(|(k, i)| (k * 2 + r, i)),
            );
        }
        all.sort();
        all.into_iter().map(|(_, i)| i).collect()
    };
    let e0 = order(0);
    assert_eq!(e0.len(), 10);
    let mut distinct = e0[..9].to_vec();
    distinct.sort();
    assert_eq!(
        distinct,
        (0..9).collect::<Vec<_>>(),
        "a permutation, then padding"
    );
    assert_eq!(e0[9], e0[0]);
    assert_ne!(order(1), e0, "another epoch, another order");
    assert_eq!(order(0), e0, "the same seed and epoch, the same order");
}

#[test]
fn bad_ranks_are_refused() {
    assert_eq!(
        DistributedSampler::new(10, 2, 2).unwrap_err().to_string(),
        "Invalid rank 2, rank should be in the interval [0, 1]"
    );
    assert_eq!(
        DistributedSampler::new(10, 0, 0).unwrap_err().to_string(),
        "num_replicas must be at least 1, got 0"
    );
}

#[test]
fn a_global_batch_splits_among_the_ranks() {
    let batch: Vec<usize> = (100..107).collect();
    assert_eq!(shard(&batch, 0, 3), [100, 103, 106]);
    assert_eq!(shard(&batch, 2, 3), [102, 105]);
    let mut all: Vec<usize> = (0..3).flat_map(|r| shard(&batch, r, 3)).collect();
    all.sort();
    assert_eq!(all, batch);
}

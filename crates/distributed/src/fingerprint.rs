//! Collective fingerprints: how a group detects that its ranks called different collectives
//! (`TORCH_DISTRIBUTED_DEBUG=DETAIL`).

use switchboard_tensor::ScalarType;

use crate::backend::{Backend, Collective};
use crate::buffer::Buffer;
use crate::error::DistError;

// Note [Collective fingerprints]
// As PyTorch's ProcessGroupWrapper under TORCH_DISTRIBUTED_DEBUG=DETAIL: before each
// collective, the ranks all-gather a fingerprint of what they are about to run (sequence
// number, operation, dtype, shape, root) and compare; a difference fails every rank with a
// message naming both sides, instead of a hang or a silently wrong result (MPI would reduce
// buffers of different lengths into garbage or deadlock). It costs one small all-gather per
// collective, so it is off unless asked for.

/// The most dimensions a fingerprint records one by one (beyond, their count and the number of
/// elements still differ when shapes do, in all but contrived cases).
const MAX_DIMS: usize = 9;
const WORDS: usize = 6 + MAX_DIMS;

/// What a rank is about to run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FingerPrint {
    pub seq: u64,
    pub op_type: &'static str,
    pub dtype: Option<ScalarType>,
    pub shape: Vec<i64>,
    pub root: Option<usize>,
}

const OP_TYPES: [&str; 7] = [
    "ALLREDUCE",
    "BROADCAST",
    "ALLGATHER",
    "REDUCE_SCATTER",
    "BARRIER",
    "SEND",
    "RECV",
];

impl FingerPrint {
    fn encode(&self) -> Vec<i64> {
        let mut w = vec![-1i64; WORDS];
        w[0] = self.seq as i64;
        w[1] = OP_TYPES
            .iter()
            .position(|o| *o == self.op_type)
            .map_or(-1, |p| p as i64);
        w[2] = self.dtype.map_or(-1, |d| d as i64);
        w[3] = self.root.map_or(-1, |r| r as i64);
        w[4] = self.shape.len() as i64;
        w[5] = self.shape.iter().product();
        for (slot, d) in w[6..].iter_mut().zip(&self.shape) {
            *slot = *d;
        }
        w
    }

    fn decode(w: &[i64]) -> FingerPrint {
        let ndim = w[4].max(0) as usize;
        FingerPrint {
            seq: w[0] as u64,
            op_type: usize::try_from(w[1])
                .ok()
                .and_then(|i| OP_TYPES.get(i))
                .copied()
                .unwrap_or("UNKNOWN"),
            dtype: ScalarType::ALL.into_iter().find(|d| *d as i64 == w[2]),
            root: usize::try_from(w[3]).ok(),
            shape: if ndim <= MAX_DIMS {
                w[6..6 + ndim].to_vec()
            } else {
                // Too many dimensions to carry: the element count stands for the shape.
                vec![w[5]]
            },
        }
    }

    fn render(&self) -> String {
        let dtype = self
            .dtype
            .map_or_else(|| "None".to_string(), |d| format!("{d:?}"));
        let root = self.root.map_or(String::new(), |r| format!(", Root={r}"));
        format!(
            "CollectiveFingerPrint(SequenceNumber={}, OpType={}, TensorShape={:?}, \
             TensorDtypes={dtype}{root})",
            self.seq, self.op_type, self.shape
        )
    }

    /// The aspects in which `other` differs, as PyTorch lists them.
    fn differences(&self, other: &FingerPrint) -> Vec<String> {
        let mut d = Vec::new();
        if self.seq != other.seq {
            d.push(format!("Sequence number: {}vs {}", self.seq, other.seq));
        }
        if self.op_type != other.op_type {
            d.push(format!("Op type: {}vs {}", self.op_type, other.op_type));
        }
        if self.shape != other.shape {
            d.push(format!(
                "Tensor Tensor shapes: {:?}vs {:?}",
                self.shape, other.shape
            ));
        }
        if self.dtype != other.dtype {
            d.push(format!(
                "Tensor Tensor dtypes: {:?}vs {:?}",
                self.dtype, other.dtype
            ));
        }
        if self.root != other.root {
            d.push(format!("Root rank: {:?}vs {:?}", self.root, other.root));
        }
        d
    }
}

/// All-gathers `mine` and fails, naming the first rank that differs, if any rank is about to
/// run something else.
pub(crate) fn check(
    backend: &dyn Backend,
    mine: &FingerPrint,
    wait: impl FnOnce(std::sync::mpsc::Receiver<crate::work::Completion>) -> Result<Buffer, DistError>,
) -> Result<(), DistError> {
    let rx = backend.submit(Collective::AllGather {
        data: Buffer::Long(mine.encode()),
    });
    // Compared as the others see it (a shape beyond MAX_DIMS travels as its element count).
    let mine = &FingerPrint::decode(&mine.encode());
    let Buffer::Long(all) = wait(rx)? else {
        return Err(DistError::Backend(
            "the fingerprint exchange returned another dtype".into(),
        ));
    };
    let rank = backend.rank();
    for (other_rank, words) in all.chunks(WORDS).enumerate() {
        let theirs = FingerPrint::decode(words);
        let diff = mine.differences(&theirs);
        if !diff.is_empty() {
            return Err(DistError::Mismatch(format!(
                "Detected mismatch between collectives on ranks. Rank {rank} is running \
                 collective: {}, but Rank {other_rank} is running collective: {}. Collectives \
                 differ in the following aspects: \t {}",
                mine.render(),
                theirs.render(),
                diff.join(" \t ")
            )));
        }
    }
    Ok(())
}

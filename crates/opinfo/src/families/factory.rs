//! Factories (from sizes, from another tensor's metadata, filled) and the operators with
//! non-tensor results.

use switchboard_tensor::ScalarType::{Bool, Byte, Double, Int, Long};

use crate::info::{Family, Grad, OpInfo, Promotion};
use crate::spec::{longs, t};
use crate::{sample, Registry};

const NO_TENSORS: Grad = Grad::None("no tensor input");

/// The factories.
pub fn register(r: &mut Registry) {
    let sizes = |name| {
        OpInfo::new(name, Family::Factory)
            .samples(vec![
                sample![[2i64, 3]],
                sample![[0i64; 0]],
                sample![[0i64, 4]],
                sample![[3i64]; dtype = Long],
                sample![[2i64]; dtype = Double],
                sample![[2i64, 2]; dtype = Bool],
                sample![[-1i64]].error(),
            ])
            .grad(NO_TENSORS)
    };
    r.add(sizes("zeros").out());
    r.add(sizes("ones").out());
    r.add(
        sizes("empty.memory_format")
            .meta()
            .sample(sample![
                [2i64, 3, 2, 2];
                memory_format = switchboard_tensor::MemoryFormat::ChannelsLast
            ])
            .out(),
    );
    r.add(
        OpInfo::new("empty_strided", Family::Factory)
            .samples(vec![
                sample![[2i64, 3], [1i64, 2]],
                sample![[2i64, 3], [3i64, 1]; dtype = Int],
                sample![[0i64; 0], [0i64; 0]],
                sample![[3i64], [0i64]],
                sample![[2i64, 3], [1i64]].error(),
            ])
            .grad(NO_TENSORS)
            .meta()
            .out(),
    );
    r.add(
        OpInfo::new("full", Family::Factory)
            .samples(vec![
                sample![[2i64, 3], 1.5],
                sample![[2i64], 3i64],
                sample![[2i64], true],
                sample![[0i64; 0], -2.0],
                sample![[2i64, 2], 7i64; dtype = Double],
                sample![[3i64], 2.5; dtype = Long],
            ])
            .grad(NO_TENSORS)
            .out(),
    );
    r.add(
        OpInfo::new("arange", Family::Factory)
            .samples(vec![
                sample![5i64],
                sample![5.0],
                sample![0i64],
                sample![4i64; dtype = Double],
                sample![2.5; dtype = Long],
                sample![-1i64].error(),
            ])
            .grad(NO_TENSORS)
            .out(),
    );
    r.add(
        OpInfo::new("arange.start_step", Family::Factory)
            .samples(vec![
                sample![0i64, 10i64, 3i64],
                sample![0.0, 1.0, 0.25],
                sample![5i64, 1i64, -1i64],
                sample![1i64, 4i64],
                sample![0i64, 3i64, 1i64; dtype = Double],
                sample![0i64, 1i64, 0i64].error(),
                sample![0i64, 5i64, -1i64].error(),
            ])
            .grad(NO_TENSORS)
            .out(),
    );
    r.add(
        OpInfo::new("arange.start", Family::Factory)
            .samples(vec![
                sample![1i64, 4i64],
                sample![-1.5, 2.0],
                sample![2i64, 2i64; dtype = Double],
            ])
            .grad(NO_TENSORS),
    );
    for name in ["zeros_like", "ones_like", "empty_like"] {
        r.add(
            OpInfo::new(name, Family::Factory)
                .samples(vec![
                    sample![t(&[2, 3])],
                    sample![t(&[3, 4]).transposed()],
                    sample![t(&[2, 6]).strided()],
                    sample![t(&[])],
                    sample![t(&[2, 3]).dtype(Long); dtype = Double],
                    sample![t(&[3, 4]).transposed(); memory_format = switchboard_tensor::MemoryFormat::Contiguous],
                ])
                .grad(Grad::None("its values do not depend on its input's"))
                .out(),
        );
    }
    r.add(
        OpInfo::new("scalar_tensor", Family::Factory)
            .samples(vec![
                sample![1.5],
                sample![3i64],
                sample![true],
                sample![2.5; dtype = Long],
                sample![-7i64; dtype = Double],
            ])
            .grad(NO_TENSORS)
            .out(),
    );
    r.add(
        OpInfo::new("full_like", Family::Factory)
            .samples(vec![
                sample![t(&[2, 3]), 1.5],
                sample![t(&[3, 4]).transposed(), -2i64],
                sample![t(&[2, 6]).strided(), 0.5],
                sample![t(&[]), 4.0],
                sample![t(&[0, 3]), 1.0],
                sample![t(&[3]).dtype(Long), 2.7],
                sample![t(&[2, 3]), 2.5; dtype = Long],
                sample![t(&[3, 4]).transposed(), 1i64; memory_format = switchboard_tensor::MemoryFormat::Contiguous],
                sample![t(&[3]).dtype(Byte), 255i64],
            ])
            .grad(Grad::None("its values do not depend on its input's"))
            .out(),
    );
    r.add(
        OpInfo::new("new_empty_strided", Family::Factory)
            .samples(vec![
                sample![t(&[2, 3]), [2i64, 3], [1i64, 2]],
                sample![t(&[3]).dtype(Long), [2i64, 2], [2i64, 1]],
                sample![t(&[]), [0i64; 0], [0i64; 0]],
                sample![t(&[2, 3]), [3i64], [0i64]; dtype = Double],
                sample![t(&[2, 3]), [2i64, 3], [1i64]].error(),
            ])
            .grad(Grad::None("its values do not depend on its input's"))
            .out(),
    );
    r.add(
        OpInfo::new("fill.Scalar", Family::Factory)
            .samples(vec![
                sample![t(&[2, 3]), 1.5],
                sample![t(&[3, 4]).transposed(), -2i64],
                sample![t(&[]), 0.25],
                sample![t(&[0, 3]), 1.0],
                sample![t(&[3]).dtype(Long), 4i64],
                sample![t(&[3]).f64(), 2.0],
            ])
            .differentiable()
            .inplace()
            .promotion(Promotion::SameAsSelf)
            .out(),
    );
    r.add(
        OpInfo::new("fill.Tensor", Family::Factory)
            .samples(vec![
                sample![t(&[2, 3]), t(&[])],
                sample![t(&[3, 4]).transposed(), t(&[])],
                sample![t(&[]), t(&[]).f64()],
                sample![t(&[3]).dtype(Long), t(&[]).dtype(Long)],
                sample![t(&[3]).f64(), t(&[]).f64()],
                sample![t(&[3]), t(&[2])].error(),
            ])
            .differentiable()
            .inplace()
            .promotion(Promotion::SameAsSelf)
            .out(),
    );
    r.add(
        OpInfo::new("zero", Family::Factory)
            .samples(vec![
                sample![t(&[2, 3])],
                sample![t(&[3, 4]).transposed()],
                sample![t(&[])],
                sample![t(&[3]).dtype(Long)],
            ])
            .differentiable()
            .inplace()
            .promotion(Promotion::SameAsSelf)
            .out(),
    );

    // Non-tensor results.
    let scalar = |name| OpInfo::new(name, Family::Scalar);
    let read = Grad::NotImplemented("a non-tensor result: nothing to record");
    r.add(
        scalar("item")
            .samples(vec![
                sample![t(&[])],
                sample![t(&[1, 1])],
                sample![longs(&[7])],
                sample![t(&[2])].error(),
            ])
            .grad(Grad::None("a non-tensor result")),
    );
    r.add(
        scalar("_local_scalar_dense")
            .samples(vec![
                sample![t(&[])],
                sample![longs(&[7])],
                sample![t(&[2])].error(),
            ])
            .grad(read)
            .meta(),
    );
    r.add(
        scalar("numel")
            .samples(vec![
                sample![t(&[2, 3])],
                sample![t(&[])],
                sample![t(&[0, 3])],
            ])
            .grad(Grad::None("a non-tensor result")),
    );
    r.add(
        scalar("size.int")
            .samples(vec![
                sample![t(&[2, 3]), 1i64],
                sample![t(&[2, 3]), -2i64],
                sample![t(&[2, 3]), 2i64].error(),
            ])
            .grad(Grad::None("a non-tensor result")),
    );
    for name in ["sym_size.int", "sym_stride.int"] {
        r.add(
            scalar(name)
                .samples(vec![
                    sample![t(&[2, 3]), 1i64],
                    sample![t(&[3, 4]).transposed(), -2i64],
                    sample![t(&[2, 6]).strided(), 1i64],
                    sample![t(&[2, 3]), 2i64].error(),
                ])
                .grad(Grad::None("a non-tensor result")),
        );
    }
    for name in ["sym_numel", "sym_storage_offset"] {
        r.add(
            scalar(name)
                .samples(vec![
                    sample![t(&[2, 3])],
                    sample![t(&[])],
                    sample![t(&[0, 3])],
                    sample![t(&[2, 6]).strided()],
                ])
                .grad(Grad::None("a non-tensor result")),
        );
    }
    r.add(
        scalar("equal")
            .samples(vec![
                sample![t(&[2, 3]), t(&[2, 3])],
                sample![t(&[2, 3]).seed(9), t(&[2, 3]).seed(9)],
                sample![t(&[2, 3]), t(&[3])],
                sample![t(&[3]).dtype(Long), t(&[3]).dtype(Long)],
            ])
            .grad(read),
    );
}

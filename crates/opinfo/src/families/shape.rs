//! Views, reshapes, copies, joins, indexing and conversions.

use switchboard_tensor::Device;
use switchboard_tensor::ScalarType::{BFloat16, Bool, Byte, Double, Float, Half, Int, Long, Short};

use crate::info::{Family, Grad, OpInfo, Promotion};
use crate::sample::NONE;
use crate::spec::{longs, t};
use crate::{sample, Registry};

fn shape(name: &'static str) -> OpInfo {
    OpInfo::new(name, Family::Shape).differentiable()
}

/// The shape family.
pub fn register(r: &mut Registry) {
    views(r);
    copies_and_joins(r);
    indexing(r);
    nonzero(r);
    conversions(r);
}

fn views(r: &mut Registry) {
    r.add(shape("view").samples(vec![
        sample![t(&[2, 3, 4]), [6i64, 4]],
        sample![t(&[2, 3, 4]), [-1i64]],
        sample![t(&[]), [1i64]],
        sample![t(&[0, 3]), [3i64, 0]],
        sample![t(&[2, 6]).strided(), [2i64, 3, 2]],
        sample![t(&[3, 4]).transposed(), [12i64]].error(),
        sample![t(&[2, 3]), [4i64, -1]].error(),
    ]));
    r.add(
        OpInfo::new("view.dtype", Family::Shape)
            .samples(vec![
                sample![t(&[2, 3]), Int],
                sample![t(&[2, 3]), Short],
                sample![t(&[2, 3]), Byte],
                sample![t(&[2, 4]), Double],
                sample![t(&[2, 4]).f64(), Float],
                sample![t(&[3, 4]).transposed(), Int],
                sample![t(&[2, 6]).strided(), Float],
                sample![t(&[2, 6]).dtype(Short), Int],
                sample![t(&[2, 3, 2]).expanded(&[1, 3, 2]), Half],
                sample![t(&[4]).dtype(Half), BFloat16],
                sample![t(&[]), Int],
                sample![t(&[0, 4]).dtype(Short), Long],
                sample![t(&[3, 4]).transposed(), Short].error(),
                sample![t(&[2, 6]).strided(), Half].error(),
                sample![t(&[2, 3]), Double].error(),
                sample![t(&[]), Double].error(),
                sample![t(&[6, 6]).dtype(Short).strided(), Int].error(),
                // Not in PyTorch: bool storages hold only 0/1 bytes (Note [Views of another
                // dtype] in switchboard-tensor).
                sample![t(&[4]).dtype(Bool), Byte].error(),
                sample![t(&[4]).dtype(Byte), Bool].error(),
            ])
            .grad(Grad::None(
                "not differentiable in PyTorch (output_differentiability: [False])",
            )),
    );
    r.add(
        shape("_unsafe_view")
            .samples(vec![
                sample![t(&[2, 3, 4]), [6i64, 4]],
                sample![t(&[2, 3, 4]), [-1i64]],
                sample![t(&[]), [1i64]],
                sample![t(&[0, 3]), [3i64, 0]],
                sample![t(&[2, 3]), [4i64, -1]].error(),
            ])
            .out(),
    );
    r.add(shape("reshape").samples(vec![
        sample![t(&[2, 3, 4]), [4i64, 6]],
        sample![t(&[3, 4]).transposed(), [-1i64]],
        sample![t(&[]), [1i64, 1]],
        sample![t(&[0, 3]), [0i64, -1]].error(),
        sample![t(&[4]).f64(), [2i64, 2]],
        sample![t(&[2, 3]), [4i64]].error(),
    ]));
    r.add(shape("transpose.int").samples(vec![
        sample![t(&[2, 3, 4]), 0i64, 2i64],
        sample![t(&[2, 3]), -1i64, 0i64],
        sample![t(&[]), 0i64, -1i64],
        sample![t(&[3, 4]).transposed(), 0i64, 1i64],
        sample![t(&[2, 3]), 0i64, 2i64].error(),
    ]));
    r.add(shape("t").samples(vec![
        sample![t(&[2, 3])],
        sample![t(&[3])],
        sample![t(&[])],
        sample![t(&[2, 6]).strided()],
        sample![t(&[2, 2, 2])].error(),
    ]));
    r.add(shape("permute").samples(vec![
        sample![t(&[2, 3, 4]), [2i64, 0, 1]],
        sample![t(&[2, 3]), [-1i64, 0]],
        sample![t(&[]), [0i64; 0]],
        sample![t(&[3, 4]).transposed(), [1i64, 0]],
        sample![t(&[2, 3]), [0i64, 0]].error(),
    ]));
    r.add(shape("expand").samples(vec![
        sample![t(&[3, 1]), [2i64, 3, 4]],
        sample![t(&[3, 1]), [-1i64, 5]],
        sample![t(&[]), [2i64, 2]],
        sample![t(&[1, 0]), [2i64, 0]],
        sample![t(&[2, 1]).f64(), [2i64, 3]; implicit = true],
        sample![t(&[2, 3]), [3i64, 3]].error(),
    ]));
    r.add(shape("squeeze").samples(vec![
        sample![t(&[2, 1, 3, 1])],
        sample![t(&[1])],
        sample![t(&[])],
        sample![t(&[1, 0])],
    ]));
    r.add(shape("squeeze.dim").samples(vec![
        sample![t(&[2, 1, 3]), 1i64],
        sample![t(&[2, 1, 3]), 0i64],
        sample![t(&[1, 3]), -2i64],
        sample![t(&[]), 0i64],
        sample![t(&[2, 3]), 2i64].error(),
    ]));
    r.add(shape("squeeze.dims").samples(vec![
        sample![t(&[2, 1, 3, 1]), [1i64, 3]],
        sample![t(&[1, 2, 1]), [0i64, -1]],
        sample![t(&[2, 3]), [0i64]],
        sample![t(&[1, 4]).transposed(), [1i64]],
        sample![t(&[]), [0i64]],
        sample![t(&[2, 1]), [0i64; 0]],
        sample![t(&[2, 1]), [1i64, -1]].error(),
        sample![t(&[2, 1]), [2i64]].error(),
    ]));
    r.add(shape("unsqueeze").samples(vec![
        sample![t(&[2, 3]), 0i64],
        sample![t(&[2, 3]), -1i64],
        sample![t(&[]), 0i64],
        sample![t(&[3, 4]).transposed(), 1i64],
        sample![t(&[2, 3]), 3i64].error(),
    ]));
    r.add(shape("flatten.using_ints").samples(vec![
        sample![t(&[2, 3, 4])],
        sample![t(&[2, 3, 4]), 1i64],
        sample![t(&[2, 3, 4]), 0i64, 1i64],
        sample![t(&[])],
        sample![t(&[3, 4]).transposed()],
        sample![t(&[2, 3]), 1i64, 0i64].error(),
    ]));
    r.add(shape("select.int").samples(vec![
        sample![t(&[2, 3, 4]), 1i64, 2i64],
        sample![t(&[2, 3, 4]), -1i64, -1i64],
        sample![t(&[3]), 0i64, 1i64],
        sample![t(&[3, 4]).transposed(), 0i64, 0i64],
        sample![t(&[2, 3]), 0i64, 2i64].error(),
    ]));
    r.add(
        shape("select_backward")
            .samples(vec![
                sample![t(&[2, 4]), [2i64, 3, 4], 1i64, 0i64],
                sample![t(&[3]), [2i64, 3], 0i64, -1i64],
                sample![t(&[]), [3i64], 0i64, 1i64],
            ])
            .out(),
    );
    r.add(shape("slice.Tensor").samples(vec![
        sample![t(&[2, 3, 4]), 2i64, 1i64, 4i64, 2i64],
        sample![t(&[5])],
        sample![t(&[5]), 0i64, -3i64],
        sample![t(&[4, 3]), 0i64, NONE, 2i64],
        sample![t(&[4, 3]), 1i64, 5i64, 10i64],
        sample![t(&[3, 4]).transposed(), 1i64, 1i64, 3i64],
        sample![t(&[4]), 0i64, 0i64, 4i64, 0i64].error(),
    ]));
    r.add(
        shape("slice_backward")
            .samples(vec![
                sample![t(&[2, 3, 2]), [2i64, 3, 4], 2i64, 1i64, 4i64, 2i64],
                sample![t(&[2]), [5i64], 0i64, 0i64, 2i64, 1i64],
            ])
            .out(),
    );
    r.add(shape("narrow").samples(vec![
        sample![t(&[2, 5]), 1i64, 1i64, 3i64],
        sample![t(&[4]), 0i64, -2i64, 2i64],
        sample![t(&[3, 4]).transposed(), 0i64, 0i64, 0i64],
        sample![t(&[4]), 0i64, 2i64, 3i64].error(),
    ]));
    r.add(shape("narrow.Tensor").samples(vec![
        sample![t(&[2, 5]), 1i64, longs(&[1]).shape(&[]), 3i64].needs_data(),
        sample![t(&[4]), 0i64, longs(&[0]).shape(&[]), 4i64].needs_data(),
    ]));
    r.add(shape("as_strided").samples(vec![
        sample![t(&[6]), [2i64, 2], [1i64, 2]; storage_offset = 1i64],
        sample![t(&[2, 3]), [3i64, 2], [1i64, 3]],
        sample![t(&[4]), [0i64], [1i64]],
        sample![t(&[4]), [2i64], [2i64], NONE],
        sample![t(&[4]), [3i64], [2i64]].error(),
    ]));
    r.add(shape("contiguous").samples(vec![
        sample![t(&[3, 4]).transposed()],
        sample![t(&[2, 3])],
        sample![t(&[2, 6]).strided()],
        sample![t(&[])],
    ]));
}

fn copies_and_joins(r: &mut Registry) {
    r.add(shape("clone").samples(vec![
        sample![t(&[2, 3])],
        sample![t(&[3, 4]).transposed()],
        sample![t(&[2, 6]).strided()],
        sample![t(&[3, 1]).expanded(&[3, 1]).shape(&[3, 1])],
        sample![t(&[3, 4]).transposed(); memory_format = switchboard_tensor::MemoryFormat::Contiguous],
        sample![t(&[])],
        sample![t(&[0, 2])],
        sample![t(&[3]).dtype(Long)],
        sample![t(&[3]).nan()].no_grad("NaN"),
    ]).out().promotion(Promotion::SameAsSelf));
    // copy and its in-place form copy_: self's dtype and strides (non-dense ones too), src
    // broadcast and cast. (An expanded self is cloned densely by copy; copy_ refuses it.)
    // PyTorch 2.15 has a formula for copy_ only; copy_'s gradients are the autograd crate's
    // tests (copy_ into views, CopySlices).
    r.add(
        OpInfo::new("copy", Family::Shape)
            .samples(vec![
                sample![t(&[2, 3]), t(&[2, 3])],
                sample![t(&[2, 3]), t(&[3])],
                sample![t(&[3, 4]).transposed(), t(&[3, 4])],
                sample![t(&[2, 6]).strided(), t(&[2, 1])],
                sample![t(&[2, 3]), t(&[2, 3]).f64()],
                sample![t(&[3]).dtype(Long), t(&[3]).range(-3.0, 3.0)],
                sample![t(&[]), t(&[])],
                sample![t(&[2, 3]).f64(), t(&[3]).f64()],
                sample![t(&[3]), t(&[3]).dtype(Int)],
                sample![t(&[2, 3]), t(&[4])].error(),
            ])
            .grad(Grad::NotImplemented("PyTorch 2.15 has no formula for copy"))
            .inplace()
            .out(),
    );
    // Lists of views.
    r.add(shape("split_with_sizes").samples(vec![
        sample![t(&[5, 4]), [2i64, 3]],
        sample![t(&[5, 4]), [1i64, 0, 3], 1i64],
        sample![t(&[3, 4]).transposed(), [1i64, 3], -1i64],
        sample![t(&[6]), [6i64]],
        sample![t(&[4, 3]).f64(), [1i64, 3]],
        sample![t(&[3]).dtype(Long), [1i64, 2]],
        sample![t(&[5, 4]), [2i64, 2]].error(),
        sample![t(&[5, 4]), [6i64, -1], 1i64].error(),
        sample![t(&[]), [1i64]].error(),
        sample![t(&[5, 4]), [2i64, 3], 3i64].error(),
    ]));
    r.add(shape("split.Tensor").samples(vec![
        sample![t(&[5, 4]), 2i64],
        sample![t(&[5, 4]), 3i64, 1i64],
        sample![t(&[5, 4]), 10i64],
        sample![t(&[0, 2]), 0i64],
        sample![t(&[3, 4]).transposed(), 2i64, -1i64],
        sample![t(&[5]).f64(), 2i64],
        sample![t(&[5, 4]), 0i64].error(),
        sample![t(&[5, 4]), -1i64].error(),
        sample![t(&[]), 1i64].error(),
    ]));
    r.add(shape("unbind.int").samples(vec![
        sample![t(&[3, 4])],
        sample![t(&[3, 4]), 1i64],
        sample![t(&[2, 3]).transposed(), -1i64],
        sample![t(&[3, 2]).f64()],
        sample![t(&[3]).dtype(Long)],
        sample![t(&[]), 0i64].error(),
        sample![t(&[3, 4]), 2i64].error(),
    ]));
    r.add(shape("chunk").samples(vec![
        sample![t(&[5, 4]), 3i64],
        sample![t(&[5, 4]), 2i64, 1i64],
        sample![t(&[0, 2]), 3i64],
        sample![t(&[6]).f64(), 4i64],
        sample![t(&[5, 4]), 0i64].error(),
        sample![t(&[]), 2i64].error(),
    ]));
    let lists = || {
        vec![
            sample![vec![t(&[2, 3]), t(&[2, 3])]],
            sample![vec![t(&[2, 1]), t(&[2, 3]), t(&[2, 2])], 1i64],
            sample![vec![t(&[2, 3]), t(&[3, 3])], 0i64],
            sample![vec![t(&[3, 4]).transposed(), t(&[1, 4])]],
            sample![vec![t(&[2]).f64(), t(&[3]).f64()], -1i64],
            sample![vec![t(&[2]), t(&[2]).dtype(Long)]],
            sample![vec![t(&[2]).dtype(Half), t(&[2]).dtype(Bool)]],
            sample![vec![t(&[2, 3]), t(&[2, 4])], 0i64].error(),
            sample![vec![t(&[]), t(&[])]].error(),
        ]
    };
    r.add(
        shape("cat")
            .samples({
                let mut s = lists();
                s.push(sample![vec![t(&[2, 3]), t(&[0])]]);
                s
            })
            .meta()
            .out()
            .promotion(Promotion::Default),
    );
    r.add(
        shape("stack")
            .samples(vec![
                sample![vec![t(&[2, 3]), t(&[2, 3])]],
                sample![vec![t(&[2, 3]), t(&[2, 3]), t(&[2, 3])], 1i64],
                sample![vec![t(&[2]), t(&[2])], -1i64],
                sample![vec![t(&[]), t(&[])]],
                sample![vec![t(&[3, 4]).transposed(), t(&[3, 4])], 2i64],
                sample![vec![t(&[2]), t(&[2]).dtype(Long)]],
                sample![vec![t(&[2, 3]), t(&[3, 2])]].error(),
            ])
            .out()
            .promotion(Promotion::Default),
    );
}

fn indexing(r: &mut Registry) {
    r.add(
        shape("index_select")
            .samples(vec![
                sample![t(&[2, 3, 4]), 1i64, longs(&[2, 0, 2])],
                sample![t(&[5]), 0i64, longs(&[4, 0])],
                sample![t(&[]), 0i64, longs(&[0])],
                sample![t(&[3, 4]).transposed(), 0i64, longs(&[1])],
                sample![t(&[3, 2]).f64(), -1i64, longs(&[0]).shape(&[])],
                sample![t(&[3]).dtype(Long), 0i64, longs(&[])],
                sample![t(&[4, 2]), 0i64, longs(&[3, 1]).dtype(Int)],
                sample![t(&[4, 2]), 0i64, longs(&[1]).dtype(Float)].error(),
                sample![t(&[3]), 0i64, longs(&[3])].error_from_data(),
            ])
            .meta()
            .out(),
    );
    let gidx = || longs(&[0, 1, 1, 0, 2, 2]).shape(&[2, 3]);
    r.add(
        shape("gather")
            .samples(vec![
                sample![t(&[2, 3]), 1i64, gidx()],
                sample![t(&[3, 3]), 0i64, gidx()],
                sample![t(&[4, 3]), 1i64, longs(&[2, 0]).shape(&[2, 1])],
                sample![t(&[]), 0i64, longs(&[0]).shape(&[])],
                sample![t(&[2, 3]).transposed(), 1i64, gidx()],
                sample![t(&[2, 3]).f64(), -1i64, gidx()],
                sample![t(&[2, 3]), 1i64, gidx().dtype(Int)].error(),
                sample![t(&[2, 3]), 1i64, longs(&[0, 1]).shape(&[2])].error(),
                sample![t(&[2, 3]), 0i64, longs(&[0, 1, 0, 1]).shape(&[1, 4])].error(),
                sample![t(&[2, 3]), 1i64, longs(&[3]).shape(&[1, 1])].error_from_data(),
            ])
            .meta()
            .out(),
    );
    r.add(
        shape("scatter_add")
            .samples(vec![
                sample![t(&[2, 3]), 1i64, gidx(), t(&[2, 3])],
                // A source larger than the index: PyTorch's backward fails on it too.
                sample![t(&[3, 3]), 0i64, gidx(), t(&[2, 4])].no_grad("src larger than index"),
                sample![t(&[2, 3]).transposed(), 1i64, gidx(), t(&[2, 3])],
                sample![t(&[]), 0i64, longs(&[0]).shape(&[]), t(&[])],
                sample![t(&[2, 3]).f64(), -1i64, gidx(), t(&[2, 3]).f64()],
                sample![t(&[2, 3]), 1i64, longs(&[3]).shape(&[1, 1]), t(&[1, 1])].error_from_data(),
                sample![
                    t(&[3, 4]),
                    0i64,
                    longs(&[0, 1, 2, 1, 0]).shape(&[1, 5]),
                    t(&[2, 3])
                ]
                .error(),
            ])
            .meta()
            .inplace()
            .out(),
    );
    r.add(
        shape("index_add")
            .samples(vec![
                sample![t(&[3, 2]), 0i64, longs(&[2, 0, 2]), t(&[3, 2])],
                sample![t(&[3, 2]), 0i64, longs(&[2, 0, 2]), t(&[3, 2]); alpha = 2i64],
                sample![t(&[2, 4]), 1i64, longs(&[3]), t(&[2, 1])],
                sample![t(&[2, 3]).transposed(), -1i64, longs(&[1, 1]), t(&[2, 2])],
                sample![t(&[3]), 0i64, longs(&[1]), t(&[])].error(),
                sample![t(&[3, 2]).f64(), 0i64, longs(&[0]), t(&[1, 2]).f64(); alpha = -1.5],
                sample![t(&[3, 2]), 0i64, longs(&[3]), t(&[1, 2])].error_from_data(),
            ])
            .meta()
            .inplace()
            .out(),
    );
}

/// The indices of non-zero elements: integer results whose row count (but for
/// `nonzero_static`'s) is read from the data, so they run on the CPU and fail on Meta
/// (Note [Data-dependent output shapes] in switchboard-cpu).
fn nonzero(r: &mut Registry) {
    let integer = Grad::None("integer result");
    // Values with zeros (-0.0 among them) and a NaN, which counts as non-zero.
    let mixed = || t(&[2, 3]).literal(&[0.0, 1.5, -0.0, f64::NAN, 0.0, -2.0]);
    let data_samples = || {
        vec![
            sample![mixed()].needs_data(),
            sample![mixed().transposed()].needs_data(),
            sample![t(&[2, 6]).strided().range(0.0, 2.0).dtype(Long)].needs_data(),
            sample![longs(&[0, 3, 0, 1]).shape(&[2, 1, 2])].needs_data(),
            sample![t(&[]).literal(&[2.0])].needs_data(),
            sample![t(&[]).literal(&[0.0])].needs_data(),
            sample![t(&[2, 0, 3])].needs_data(),
            sample![t(&[4]).dtype(Bool)].needs_data(),
            sample![t(&[3]).literal(&[0.0, 0.5, 1.0]).dtype(Half)].needs_data(),
        ]
    };
    r.add(
        OpInfo::new("nonzero", Family::Shape)
            .samples(data_samples())
            .grad(integer)
            .meta()
            .out(),
    );
    r.add(
        OpInfo::new("argwhere", Family::Shape)
            .samples(data_samples())
            .grad(integer),
    );
    r.add(
        OpInfo::new("nonzero_numpy", Family::Shape)
            .samples(data_samples())
            .grad(integer),
    );
    r.add(
        OpInfo::new("where", Family::Shape)
            .samples(data_samples())
            .grad(integer),
    );
    r.add(
        OpInfo::new("nonzero_static", Family::Shape)
            .samples(vec![
                sample![mixed(); size = 2i64],
                sample![mixed(); size = 6i64, fill_value = -7i64],
                sample![mixed().transposed(); size = 3i64],
                sample![longs(&[1, 0, 2, 3]); size = 0i64],
                sample![t(&[]).literal(&[3.0]); size = 2i64],
                sample![t(&[0, 2]); size = 2i64, fill_value = 5i64],
                sample![t(&[4]).dtype(Bool); size = 4i64],
                sample![mixed(); size = -1i64].error(),
            ])
            .grad(Grad::NotImplemented(
                "PyTorch 2.15 has no formula for nonzero_static (an integer result)",
            ))
            .meta()
            .out(),
    );
}

fn conversions(r: &mut Registry) {
    let conv = |name| OpInfo::new(name, Family::Shape).differentiable();
    r.add(conv("to.dtype").samples(vec![
        sample![t(&[2, 3]), Double],
        sample![t(&[2, 3]), Float].no_grad("a float32 result: too coarse for finite differences"),
        sample![t(&[2, 3]), Float; copy = true].no_grad("a float32 result"),
        sample![t(&[3, 4]).transposed(), Double],
        sample![t(&[3]).range(-3.0, 3.0), Long].no_grad("integer result"),
        sample![t(&[3]).dtype(Long), Float].no_grad("integer input"),
    ]));
    r.add(conv("to.device").samples(vec![
        sample![t(&[2, 3]), Device::CPU, Double],
        sample![t(&[2, 3]), Device::CPU, Float; copy = true].no_grad("a float32 result"),
    ]));
    r.add(conv("to.dtype_layout").samples(vec![
        sample![t(&[2, 3]); dtype = Double],
        sample![t(&[2, 3]); copy = true],
        sample![t(&[3, 4]).transposed(); dtype = Double, memory_format = switchboard_tensor::MemoryFormat::Contiguous],
    ]));
    r.add(conv("to.other").samples(vec![
        sample![t(&[2, 3]), t(&[1]).f64().no_grad()],
        sample![t(&[2, 3]), t(&[1]).no_grad()].no_grad("a float32 result"),
    ]));
    r.add(conv("_to_copy").samples(vec![
        sample![t(&[2, 3])],
        sample![t(&[2, 3]); dtype = Double],
        sample![t(&[3, 4]).transposed()],
        sample![t(&[3, 4]).transposed(); memory_format = switchboard_tensor::MemoryFormat::Contiguous],
        sample![t(&[2, 6]).strided(); dtype = Double],
        sample![t(&[3]).range(-3.0, 3.0); dtype = Int].no_grad("integer result"),
        sample![t(&[]).f64(); dtype = Float],
    ]).out());
}

//! The structured indexing families (`gather`, `scatter.src`/`scatter.value`, `scatter_add`,
//! `scatter_reduce.two`, `index_add`) and the meta functions of `nll_loss2d_forward` /
//! `nll_loss2d_backward` against PyTorch 2.15 (values recorded from `torch` on the CPU and
//! meta devices): output geometry of every form on Meta and on the CPU, PyTorch's CPU
//! messages on both devices, and Meta kernels that are the meta functions.

mod common;

use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{Device, MemoryFormat, ScalarType as S, Tensor};

use switchboard_cpu as _;
use switchboard_meta as _;

use common::{DeviceCase as Case, ErrorCase};

/// An uninitialised tensor on `d` (zeros on the CPU: valid indices everywhere).
fn on(d: Device, sizes: &[i64], dtype: S) -> Tensor {
    Tensor::empty_on(sizes, dtype, d).unwrap()
}

fn f(d: Device, sizes: &[i64]) -> Tensor {
    on(d, sizes, S::Float)
}

fn long(d: Device, sizes: &[i64]) -> Tensor {
    on(d, sizes, S::Long)
}

/// PyTorch 2.15's geometry, the same on its CPU and meta devices.
const CASES: &[Case] = &[
    (
        "gather of transposed self",
        |d| ops::gather(&f(d, &[3, 4]).t()?, 0, &long(d, &[2, 2])),
        &[2, 2],
        &[2, 1],
        S::Float,
    ),
    (
        "gather of a transposed int32 index",
        |d| ops::gather(&on(d, &[4, 3], S::Double), 1, &on(d, &[2, 3], S::Int).t()?),
        &[3, 2],
        &[2, 1],
        S::Double,
    ),
    (
        "gather of an empty float index",
        |d| ops::gather(&f(d, &[4, 3]), 0, &f(d, &[0, 2])),
        &[0, 2],
        &[2, 1],
        S::Float,
    ),
    (
        "gather.out resized",
        |d| ops::gather_out(&f(d, &[4, 3]), 0, &long(d, &[2, 2]), &f(d, &[0])),
        &[2, 2],
        &[2, 1],
        S::Float,
    ),
    (
        "gather.out of the right size keeps its strides",
        |d| ops::gather_out(&f(d, &[4, 3]), 0, &long(d, &[2, 2]), &f(d, &[2, 2]).t()?),
        &[2, 2],
        &[1, 2],
        S::Float,
    ),
    (
        "scatter of transposed self",
        |d| ops::scatter(&f(d, &[3, 4]).t()?, 0, &long(d, &[2, 2]), &f(d, &[2, 2])),
        &[4, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "scatter.value",
        |d| ops::scatter_value(&on(d, &[4, 3], S::Int), 1, &long(d, &[2, 2]), 1.5),
        &[4, 3],
        &[3, 1],
        S::Int,
    ),
    (
        "scatter_ keeps self's strides",
        |d| {
            f(d, &[3, 4])
                .t()?
                .scatter_(0, &long(d, &[2, 2]), &f(d, &[2, 2]))
        },
        &[4, 3],
        &[1, 4],
        S::Float,
    ),
    (
        "scatter_.value of a 0-dim self",
        |d| f(d, &[]).scatter_value_(0, &long(d, &[]), 2),
        &[],
        &[],
        S::Float,
    ),
    (
        "scatter.src_out resized",
        |d| {
            ops::scatter_src_out(
                &f(d, &[3, 4]).t()?,
                0,
                &long(d, &[2, 2]),
                &f(d, &[2, 2]),
                &f(d, &[0]),
            )
        },
        &[4, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "scatter.value_out resized",
        |d| ops::scatter_value_out(&f(d, &[4, 3]), 0, &long(d, &[2, 2]), 0, &f(d, &[0])),
        &[4, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "scatter_add of transposed self",
        |d| ops::scatter_add(&f(d, &[3, 4]).t()?, 1, &long(d, &[2, 2]), &f(d, &[2, 2])),
        &[4, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "scatter_add_ keeps self's strides",
        |d| {
            f(d, &[3, 4])
                .t()?
                .scatter_add_(1, &long(d, &[2, 2]), &f(d, &[2, 2]))
        },
        &[4, 3],
        &[1, 4],
        S::Float,
    ),
    (
        "scatter_add.out resized",
        |d| {
            ops::scatter_add_out(
                &on(d, &[4, 3], S::Long),
                0,
                &long(d, &[2, 2]),
                &long(d, &[2, 2]),
                &long(d, &[0]),
            )
        },
        &[4, 3],
        &[3, 1],
        S::Long,
    ),
    (
        "scatter_reduce mean",
        |d| {
            ops::scatter_reduce(
                &f(d, &[3, 4]).t()?,
                0,
                &long(d, &[2, 2]),
                &f(d, &[2, 2]),
                "mean",
            )
        },
        &[4, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "scatter_reduce_ amax keeps self's strides",
        |d| {
            f(d, &[3, 4])
                .t()?
                .scatter_reduce_(0, &long(d, &[2, 2]), &f(d, &[2, 2]), "amax")
        },
        &[4, 3],
        &[1, 4],
        S::Float,
    ),
    (
        "scatter_reduce.two_out resized",
        |d| {
            ops::scatter_reduce_two_out(
                &on(d, &[4, 3], S::Double),
                0,
                &long(d, &[2, 2]),
                &on(d, &[2, 2], S::Double),
                "prod",
                &on(d, &[0], S::Double),
            )
        },
        &[4, 3],
        &[3, 1],
        S::Double,
    ),
    (
        "index_add of transposed self",
        |d| ops::index_add(&f(d, &[3, 4]).t()?, 0, &long(d, &[2]), &f(d, &[2, 3])),
        &[4, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "index_add along dim 1",
        |d| ops::index_add(&f(d, &[4, 3]), 1, &on(d, &[2], S::Int), &f(d, &[4, 2])),
        &[4, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "index_add of a 0-dim self",
        |d| ops::index_add(&f(d, &[]), 0, &long(d, &[1]), &f(d, &[])),
        &[],
        &[],
        S::Float,
    ),
    (
        "index_add_ keeps self's strides",
        |d| {
            f(d, &[3, 4])
                .t()?
                .index_add_(0, &long(d, &[2]), &f(d, &[2, 3]))
        },
        &[4, 3],
        &[1, 4],
        S::Float,
    ),
    (
        "index_add.out resized",
        |d| {
            ops::index_add_out(
                &f(d, &[3, 4]).t()?,
                0,
                &long(d, &[2]),
                &f(d, &[2, 3]),
                &f(d, &[0]),
            )
        },
        &[4, 3],
        &[3, 1],
        S::Float,
    ),
    (
        "index_add.out of the right size keeps its strides",
        |d| {
            ops::index_add_out(
                &f(d, &[4, 3]),
                0,
                &long(d, &[2]),
                &f(d, &[2, 3]),
                &f(d, &[3, 4]).t()?,
            )
        },
        &[4, 3],
        &[1, 4],
        S::Float,
    ),
    (
        "nll_loss2d_forward none",
        |d| {
            Ok(
                ops::nll_loss2d_forward(&f(d, &[2, 3, 4, 5]), &long(d, &[2, 4, 5]), None, 0, -100)?
                    .0,
            )
        },
        &[2, 4, 5],
        &[20, 5, 1],
        S::Float,
    ),
    (
        "nll_loss2d_forward none of channels_last",
        |d| {
            Ok(ops::nll_loss2d_forward(
                &Tensor::empty_with_format(&[2, 3, 4, 5], S::Float, d, MemoryFormat::ChannelsLast)?,
                &long(d, &[2, 4, 5]),
                None,
                0,
                -100,
            )?
            .0)
        },
        &[2, 4, 5],
        &[20, 5, 1],
        S::Float,
    ),
    (
        "nll_loss2d_forward mean",
        |d| {
            Ok(ops::nll_loss2d_forward(
                &on(d, &[2, 3, 4, 5], S::Double),
                &long(d, &[2, 4, 5]),
                None,
                1,
                -100,
            )?
            .0)
        },
        &[],
        &[],
        S::Double,
    ),
    (
        "nll_loss2d_forward total_weight",
        |d| {
            Ok(ops::nll_loss2d_forward(
                &on(d, &[2, 3, 4, 5], S::Half),
                &long(d, &[2, 4, 5]),
                Some(&on(d, &[3], S::Half)),
                2,
                -100,
            )?
            .1)
        },
        &[],
        &[],
        S::Half,
    ),
    (
        "nll_loss2d_forward.output resized",
        |d| {
            Ok(ops::nll_loss2d_forward_output(
                &f(d, &[2, 3, 4, 5]),
                &long(d, &[2, 4, 5]),
                None,
                0,
                -100,
                &f(d, &[0]),
                &f(d, &[0]),
            )?
            .0)
        },
        &[2, 4, 5],
        &[20, 5, 1],
        S::Float,
    ),
    (
        "nll_loss2d_backward none",
        |d| {
            ops::nll_loss2d_backward(
                &f(d, &[2, 4, 5]),
                &f(d, &[2, 3, 4, 5]),
                &long(d, &[2, 4, 5]),
                None,
                0,
                -100,
                &f(d, &[]),
            )
        },
        &[2, 3, 4, 5],
        &[60, 20, 5, 1],
        S::Float,
    ),
    (
        "nll_loss2d_backward mean",
        |d| {
            ops::nll_loss2d_backward(
                &f(d, &[]),
                &f(d, &[2, 3, 4, 5]),
                &long(d, &[2, 4, 5]),
                None,
                1,
                -100,
                &f(d, &[]),
            )
        },
        &[2, 3, 4, 5],
        &[60, 20, 5, 1],
        S::Float,
    ),
];

#[test]
fn indexing_families_give_pytorchs_geometry() {
    common::assert_geometry_on_meta_and_cpu(CASES);
}

/// PyTorch 2.15's messages on the CPU (its structured meta functions'), which Meta gives too.
const ERRORS: &[ErrorCase] = &[
    ("gather of a float index", |d| ops::gather(&f(d, &[4, 3]), 0, &f(d, &[2, 2])), "gather(): Expected dtype int32/int64 for index"),
    ("gather rank", |d| ops::gather(&f(d, &[4, 3]), 0, &long(d, &[2])), "Index tensor must have the same number of dimensions as input tensor"),
    ("gather index larger than self", |d| ops::gather(&f(d, &[4, 3]), 0, &long(d, &[2, 5])), "Size does not match at dimension 1 expected index [2, 5] to be no larger than self [4, 3] apart from dimension 0"),
    ("gather dim", |d| ops::gather(&f(d, &[4, 3]), 2, &long(d, &[2, 2])), "Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
    ("gather.out of another dtype", |d| ops::gather_out(&f(d, &[4, 3]), 0, &long(d, &[2, 2]), &on(d, &[2, 2], S::Double)), "Expected out tensor to have dtype float, but got double instead"),
    ("scatter of another src dtype", |d| ops::scatter(&f(d, &[4, 3]), 0, &long(d, &[2, 2]), &on(d, &[2, 2], S::Double)), "scatter(): Expected self.dtype to be equal to src.dtype"),
    ("scatter of a float index", |d| ops::scatter(&f(d, &[4, 3]), 0, &f(d, &[2, 2]), &f(d, &[2, 2])), "scatter(): Expected dtype int32/int64 for index"),
    ("scatter index larger than src", |d| ops::scatter(&f(d, &[4, 3]), 0, &long(d, &[3, 3]), &f(d, &[2, 2])), "Expected index [3, 3] to be no larger than self [4, 3] apart from dimension 0 and to be no larger size than src [2, 2]"),
    ("scatter.value index larger than self", |d| ops::scatter_value(&f(d, &[4, 3]), 0, &long(d, &[2, 4]), 1), "Expected index [2, 4] to be no larger than self [4, 3] apart from dimension 0"),
    ("scatter_ rank", |d| f(d, &[4, 3]).scatter_(0, &long(d, &[2]), &f(d, &[2])), "Index tensor must have the same number of dimensions as self tensor"),
    ("scatter.value_out of another dtype", |d| ops::scatter_value_out(&f(d, &[4, 3]), 0, &long(d, &[2, 2]), 1, &on(d, &[0], S::Double)), "Expected out tensor to have dtype float, but got double instead"),
    ("scatter_add of a float index", |d| ops::scatter_add(&f(d, &[4, 3]), 0, &f(d, &[2, 2]), &f(d, &[2, 2])), "scatter(): Expected dtype int32/int64 for index"),
    ("scatter_reduce of a float index", |d| ops::scatter_reduce(&f(d, &[4, 3]), 0, &f(d, &[2, 2]), &f(d, &[2, 2]), "sum"), "scatter(): Expected dtype int32/int64 for index"),
    ("scatter_reduce reduce", |d| ops::scatter_reduce(&f(d, &[4, 3]), 0, &long(d, &[2, 2]), &f(d, &[2, 2]), "foo"), "reduce argument must be either sum, prod, mean, amax or amin, got foo"),
    ("scatter_reduce checks reduce last", |d| ops::scatter_reduce(&f(d, &[4, 3]), 0, &long(d, &[2, 2]), &on(d, &[2, 2], S::Double), "foo"), "scatter(): Expected self.dtype to be equal to src.dtype"),
    ("scatter_reduce dim before reduce", |d| ops::scatter_reduce(&f(d, &[3]), 5, &long(d, &[2]), &f(d, &[2]), "foo"), "Dimension out of range (expected to be in range of [-1, 0], but got 5)"),
    ("index_add of a matrix index", |d| ops::index_add(&f(d, &[4, 3]), 0, &long(d, &[1, 2]), &f(d, &[2, 3])), "index_add_(): Index is supposed to be a vector, but got dim: 2 with type: Long and size: [1, 2]"),
    ("index_add of a float index", |d| ops::index_add(&f(d, &[4, 3]), 0, &f(d, &[2]), &f(d, &[2, 3])), "index_add_(): Expected dtype int32/int64 for index but got: Float"),
    ("index_add of another source dtype", |d| ops::index_add(&f(d, &[4, 3]), 0, &long(d, &[2]), &on(d, &[2, 3], S::Double)), "index_add_(): self (Float) and source (Double) must have the same scalar type"),
    ("index_add source shape", |d| ops::index_add(&f(d, &[4, 3]), 0, &long(d, &[2]), &f(d, &[2, 4])), "source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = [4, 3] source.shape = [2, 4]"),
    ("index_add_ number of indices", |d| f(d, &[4, 3]).index_add_(0, &long(d, &[3]), &f(d, &[2, 3])), "index_add_(): Number of indices (3) should be equal to source.size(dim): (2), for dim: 0"),
    ("index_add.out of another dtype", |d| ops::index_add_out(&f(d, &[4, 3]), 0, &long(d, &[2]), &f(d, &[2, 3]), &long(d, &[0])), "Expected out tensor to have dtype float, but got long int instead"),
    ("nll_loss2d_forward 3-d input", |d| Ok(ops::nll_loss2d_forward(&f(d, &[3, 4, 5]), &long(d, &[2, 4, 5]), None, 1, -100)?.0), "only batches of spatial inputs supported (4D tensors), but got input of dimension: 3"),
    ("nll_loss2d_forward 2-d target", |d| Ok(ops::nll_loss2d_forward(&f(d, &[2, 3, 4, 5]), &long(d, &[4, 5]), None, 1, -100)?.0), "only batches of spatial targets supported (3D tensors) but got targets of dimension: 2"),
    ("nll_loss2d_forward sizes", |d| Ok(ops::nll_loss2d_forward(&f(d, &[2, 3, 4, 5]), &long(d, &[1, 4, 5]), None, 1, -100)?.0), "size mismatch (got input: [2, 3, 4, 5] , target: [1, 4, 5]"),
    ("nll_loss2d_forward weight", |d| Ok(ops::nll_loss2d_forward(&f(d, &[2, 3, 4, 5]), &long(d, &[2, 4, 5]), Some(&f(d, &[4])), 1, -100)?.0), "weight tensor should be defined either for all or no classes"),
    ("nll_loss2d_forward int target", |d| Ok(ops::nll_loss2d_forward(&f(d, &[2, 3, 4, 5]), &on(d, &[2, 4, 5], S::Int), None, 1, -100)?.0), "expected target dtype to be Long or Byte, but got Int"),
    ("nll_loss2d_forward uint8 target", |d| Ok(ops::nll_loss2d_forward(&f(d, &[2, 3, 4, 5]), &on(d, &[2, 4, 5], S::Byte), None, 1, -100)?.0), "expected scalar type Long but found Byte"),
    ("nll_loss2d_backward per-pixel grad rank", |d| ops::nll_loss2d_backward(&f(d, &[2, 4]), &f(d, &[2, 3, 4, 5]), &long(d, &[2, 4, 5]), None, 0, -100, &f(d, &[])), "grad_output must have same dimension as target (3) but got dimension: [2, 4]"),
    ("nll_loss2d_backward per-pixel grad sizes", |d| ops::nll_loss2d_backward(&f(d, &[2, 4, 6]), &f(d, &[2, 3, 4, 5]), &long(d, &[2, 4, 5]), None, 0, -100, &f(d, &[])), "size mismatch (got grad_output: [2, 4, 6] target: [2, 4, 5]"),
    ("nll_loss2d_backward reduced grad", |d| ops::nll_loss2d_backward(&f(d, &[2]), &f(d, &[2, 3, 4, 5]), &long(d, &[2, 4, 5]), None, 1, -100, &f(d, &[])), "Expected a single element grad_output tensor, but got: [2]"),
    ("nll_loss2d_backward total_weight", |d| ops::nll_loss2d_backward(&f(d, &[]), &f(d, &[2, 3, 4, 5]), &long(d, &[2, 4, 5]), None, 1, -100, &f(d, &[2])), "expected total_weight to be a single element tensor, got: [2] (2 elements)"),
];

#[test]
fn indexing_families_fail_with_pytorchs_errors_on_meta_and_cpu() {
    common::assert_errors_on_meta_and_cpu(ERRORS);
}

/// Index values and memory are data: the CPU kernels check them, Meta cannot (as PyTorch's
/// meta device).
#[test]
fn the_cpu_checks_index_values_and_overlap() {
    let values = Tensor::from_vec(vec![5i64, 0], &[1, 2]).unwrap();
    let x = Tensor::zeros(&[4, 3], S::Float).unwrap();
    assert_eq!(
        ops::gather(&x, 0, &values).unwrap_err().first_line(),
        "index 5 is out of bounds for dimension 0 with size 4"
    );
    let m = f(Device::META, &[4, 3]);
    let r = ops::gather(&m, 0, &long(Device::META, &[1, 2])).unwrap();
    assert_eq!((r.sizes(), r.has_data()), (&[1i64, 2][..], false));
    // `out=` may not overlap `self`; in place, `self` may not overlap `src`.
    assert_eq!(
        ops::gather_out(
            &x,
            0,
            &Tensor::zeros(&[2, 2], S::Long).unwrap(),
            &x.narrow(0, 0, 2).unwrap()
        )
        .unwrap_err()
        .first_line(),
        "unsupported operation: some elements of the input tensor and the written-to tensor refer \
         to a single memory location. Please clone() the tensor before performing the operation."
    );
    let index = Tensor::zeros(&[2, 3], S::Long).unwrap();
    assert!(x.scatter_add_(0, &index, &x).is_err(), "src is self");
    assert!(
        x.index_add_(0, &Tensor::zeros(&[4], S::Long).unwrap(), &x)
            .is_err(),
        "source is self"
    );
}

/// The Meta kernels of these families are their meta functions' glue, not CPU kernels run
/// without data.
#[test]
fn meta_kernels_are_meta_functions() {
    common::assert_meta_kernels_are_meta_functions([
        "aten::gather",
        "aten::gather.out",
        "aten::scatter.src",
        "aten::scatter_.src",
        "aten::scatter.src_out",
        "aten::scatter.value",
        "aten::scatter_.value",
        "aten::scatter.value_out",
        "aten::scatter_add",
        "aten::scatter_add_",
        "aten::scatter_add.out",
        "aten::scatter_reduce.two",
        "aten::scatter_reduce_.two",
        "aten::scatter_reduce.two_out",
        "aten::index_add",
        "aten::index_add_",
        "aten::index_add.out",
        "aten::nll_loss2d_forward",
        "aten::nll_loss2d_backward",
    ]);
}

/// PyTorch's 2-d kernels read a weight of `C` elements whatever its shape: so do ours, on the
/// CPU as on Meta.
#[test]
fn nll_loss2d_takes_a_weight_of_c_elements_of_any_shape() {
    let x = Tensor::from_vec((0..24).map(|i| -(i as f32) / 8.0).collect(), &[1, 3, 2, 4]).unwrap();
    let t = Tensor::from_vec(vec![0i64, 1, 2, 1, 0, 2, 2, 1], &[1, 2, 4]).unwrap();
    let w = Tensor::from_vec(vec![0.5f32, 2.0, 1.5], &[1, 3]).unwrap();
    let flat = w.reshape(&[3]).unwrap();
    let (loss, total) = ops::nll_loss2d_forward(&x, &t, Some(&w), 1, -100).unwrap();
    let (want, want_total) = ops::nll_loss2d_forward(&x, &t, Some(&flat), 1, -100).unwrap();
    assert_eq!(loss.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
    assert_eq!(
        total.to_vec::<f32>().unwrap(),
        want_total.to_vec::<f32>().unwrap()
    );
    let g = ops::nll_loss2d_backward(
        &Tensor::scalar_tensor(1.0, S::Float),
        &x,
        &t,
        Some(&w),
        1,
        -100,
        &total,
    )
    .unwrap();
    let want = ops::nll_loss2d_backward(
        &Tensor::scalar_tensor(1.0, S::Float),
        &x,
        &t,
        Some(&flat),
        1,
        -100,
        &total,
    )
    .unwrap();
    assert_eq!(g.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
    let m = |t: &Tensor| on(Device::META, t.sizes(), t.dtype());
    let (loss, _) = ops::nll_loss2d_forward(&m(&x), &m(&t), Some(&m(&w)), 0, -100).unwrap();
    assert_eq!(loss.sizes(), &[1, 2, 4]);
}

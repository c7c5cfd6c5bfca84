//! The generated autograd table (`OPERATORS`, from native_functions.yaml and derivatives.yaml)
//! covers every registered aten operator, and the kernels registered in the global dispatcher
//! agree with what it says of each (Note [Which kernel an operator gets] in
//! switchboard-codegen), and what it says matches PyTorch 2.15's own records, written here
//! independently of the generator: the backward node of hand-picked operators and the set of
//! CompositeImplicitAutograd operators.

use std::collections::BTreeSet;

use switchboard_autograd::{AutogradKind, OPERATORS};
use switchboard_cpu as _;
use switchboard_dispatcher::Dispatcher;
use switchboard_keys::DispatchKey;

/// `add.Tensor` -> `aten::add.Tensor`.
fn qualified(op: &str) -> String {
    format!("aten::{op}")
}

#[test]
fn every_registered_aten_operator_is_in_the_table_and_back() {
    let d = Dispatcher::global();
    let registered: BTreeSet<String> = d
        .list_operators()
        .iter()
        .filter(|n| n.namespace() == Some("aten"))
        .map(|n| match n.overload_name() {
            "" => n.base_name().to_owned(),
            o => format!("{}.{o}", n.base_name()),
        })
        .collect();
    let table: BTreeSet<String> = OPERATORS.iter().map(|o| o.operator.to_owned()).collect();
    let missing: Vec<_> = registered.difference(&table).collect();
    assert!(
        missing.is_empty(),
        "registered but not in OPERATORS: {missing:?}"
    );
    let unregistered: Vec<_> = table.difference(&registered).collect();
    assert!(
        unregistered.is_empty(),
        "in OPERATORS but not registered: {unregistered:?}"
    );
}

#[test]
fn registrations_agree_with_the_table() {
    let d = Dispatcher::global();
    for o in OPERATORS {
        let name = qualified(o.operator);
        let autograd = d
            .has_kernel_for_dispatch_key(&name, DispatchKey::Autograd)
            .unwrap();
        let composite = d
            .has_kernel_for_dispatch_key(&name, DispatchKey::CompositeImplicitAutograd)
            .unwrap();
        match o.kind {
            AutogradKind::Composite => {
                assert!(
                    composite && !autograd,
                    "{name}: composite, no Autograd kernel"
                )
            }
            AutogradKind::NoTensors => assert!(!autograd, "{name}: no Autograd kernel"),
            AutogradKind::NonDifferentiable => {
                assert!(autograd, "{name}: a fallthrough at Autograd");
                assert!(
                    d.kernel_for_dispatch_key_is_fallthrough(&name, DispatchKey::Autograd)
                        .unwrap(),
                    "{name}: a fallthrough at Autograd"
                );
            }
            AutogradKind::Formula
            | AutogradKind::Inplace
            | AutogradKind::Out
            | AutogradKind::NotImplemented => {
                assert!(autograd, "{name}: an Autograd kernel");
                assert!(
                    !d.kernel_for_dispatch_key_is_fallthrough(&name, DispatchKey::Autograd)
                        .unwrap(),
                    "{name}: a real Autograd kernel"
                );
            }
        }
        if o.is_differentiable() {
            let node = o.node.unwrap_or_else(|| panic!("{name}: a node name"));
            assert!(
                node.ends_with(|c: char| c.is_ascii_digit()) || node == "CopyBackwards",
                "{name}: PyTorch's node name, got {node}"
            );
            assert!(!o.differentiable_inputs.is_empty(), "{name}: inputs");
        } else {
            assert!(o.node.is_none(), "{name}: no node");
        }
    }
}

#[test]
fn views_and_writers_have_ad_inplace_or_view_kernels() {
    let d = Dispatcher::global();
    let mut checked = 0;
    for o in OPERATORS {
        if o.kind == AutogradKind::Composite || o.kind == AutogradKind::NoTensors {
            continue;
        }
        let name = qualified(o.operator);
        let op = d.find_schema(&name).unwrap();
        let schema = &op.schema().unwrap().schema;
        let aliased = schema.arguments().iter().any(|a| a.alias_info().is_some());
        assert_eq!(
            d.has_kernel_for_dispatch_key(&name, DispatchKey::ADInplaceOrView)
                .unwrap(),
            aliased,
            "{name}: an ADInplaceOrView kernel exactly when an argument is aliased"
        );
        checked += usize::from(aliased);
    }
    assert!(checked > 50, "{checked} aliased operators");
}

// Independent of the generator: what PyTorch 2.15 says, recorded from it.

/// The backward node PyTorch 2.15 records for each of these operators
/// (`type(torch.ops.aten.<op>(...).grad_fn).__name__`, inputs requiring grad).
const PYTORCH_NODES: &[(&str, &str)] = &[
    ("add.Tensor", "AddBackward0"),
    ("add.Scalar", "AddBackward1"),
    ("sub.Tensor", "SubBackward0"),
    ("mul.Tensor", "MulBackward0"),
    ("mul.Scalar", "MulBackward1"),
    ("div.Tensor", "DivBackward0"),
    ("neg", "NegBackward0"),
    ("exp", "ExpBackward0"),
    ("log", "LogBackward0"),
    ("tanh", "TanhBackward0"),
    ("sigmoid", "SigmoidBackward0"),
    ("relu", "ReluBackward0"),
    ("sum", "SumBackward0"),
    ("sum.dim_IntList", "SumBackward1"),
    ("mean", "MeanBackward0"),
    ("mean.dim", "MeanBackward1"),
    ("mm", "MmBackward0"),
    ("addmm", "AddmmBackward0"),
    ("t", "TBackward0"),
    ("transpose.int", "TransposeBackward0"),
    ("view", "ViewBackward0"),
    ("permute", "PermuteBackward0"),
    ("expand", "ExpandBackward0"),
    ("select.int", "SelectBackward0"),
    ("slice.Tensor", "SliceBackward0"),
    ("index_select", "IndexSelectBackward0"),
    ("clone", "CloneBackward0"),
    ("pow.Tensor_Scalar", "PowBackward0"),
    ("sqrt", "SqrtBackward0"),
    ("_softmax", "SoftmaxBackward0"),
    ("_log_softmax", "LogSoftmaxBackward0"),
    ("_safe_softmax", "SafeSoftmaxBackward0"),
    ("convolution", "ConvolutionBackward0"),
    ("max_pool2d_with_indices", "MaxPool2DWithIndicesBackward0"),
    ("native_layer_norm", "NativeLayerNormBackward0"),
    (
        "_scaled_dot_product_flash_attention_for_cpu",
        "ScaledDotProductFlashAttentionForCpuBackward0",
    ),
    ("gelu", "GeluBackward0"),
    ("abs", "AbsBackward0"),
    ("unsqueeze", "UnsqueezeBackward0"),
    ("squeeze.dim", "SqueezeBackward1"),
    ("cat", "CatBackward0"),
    ("stack", "StackBackward0"),
    ("bmm", "BmmBackward0"),
    ("amax", "AmaxBackward0"),
    ("max.dim", "MaxBackward0"),
    ("where.self", "WhereBackward0"),
    ("clamp", "ClampBackward1"),
    ("maximum", "MaximumBackward0"),
    ("threshold_backward", "ThresholdBackwardBackward0"),
    ("nll_loss_forward", "NllLossBackward0"),
    ("mse_loss", "MseLossBackward0"),
    ("_to_copy", "ToCopyBackward0"),
    ("copy_", "CopyBackwards"),
    ("split_with_sizes", "SplitWithSizesBackward0"),
    ("split.Tensor", "SplitBackward0"),
    ("unbind.int", "UnbindBackward0"),
    ("add_.Tensor", "AddBackward0"),
    ("mul_.Tensor", "MulBackward0"),
    ("relu_", "ReluBackward0"),
    ("as_strided", "AsStridedBackward0"),
    ("rsqrt", "RsqrtBackward0"),
    ("embedding", "EmbeddingBackward0"),
    ("silu", "SiluBackward0"),
    ("var.correction", "VarBackward0"),
    ("gather", "GatherBackward0"),
    ("masked_fill.Scalar", "MaskedFillBackward0"),
];

/// The operators of switchboard-ops that PyTorch 2.15 implements as CompositeImplicitAutograd
/// (`torch._C._dispatch_has_kernel_for_dispatch_key("aten::<op>", "CompositeImplicitAutograd")`
/// over native_functions.yaml): they record no node of their own, their decomposition does.
const PYTORCH_COMPOSITE: &[&str] = &[
    "scaled_dot_product_attention",
    "_scaled_dot_product_attention_math",
    "repeat_interleave.self_int",
    "repeat_interleave.self_Tensor",
    "real",
    "imag",
    "conj_physical",
    "fft_fft",
    "fft_ifft",
    "fft_rfft",
    "fft_irfft",
    "fft_rfftn",
    "fft_irfftn",
    "where.ScalarSelf",
    "where.ScalarOther",
    "var",
    "var.dim",
    "matmul",
    "linear",
    "conv1d",
    "conv2d",
    "conv1d.padding",
    "conv2d.padding",
    "_convolution_mode",
    "max_pool2d",
    "softmax.int",
    "log_softmax.int",
    "nll_loss",
    "nll_loss_nd",
    "nll_loss2d",
    "cross_entropy_loss",
    "dropout",
    "layer_norm",
    "batch_norm",
    "group_norm",
    "adaptive_avg_pool2d",
    "upsample_nearest2d.vec",
    "upsample_bilinear2d.vec",
    "adaptive_avg_pool3d",
    "max_pool3d",
    "silu_backward",
    "reshape",
    "flatten.using_ints",
    "narrow",
    "contiguous",
    "to.dtype",
    "to.device",
    "item",
    "numel",
    "size.int",
    "sym_size.int",
    "cdist",
    "pdist",
    "grid_sampler",
    "affine_grid_generator_backward",
    "embedding_bag",
    "einsum",
    "one_hot",
    "embedding_bag.padding_idx",
    "chunk",
    "sym_stride.int",
    "sym_numel",
    "sym_storage_offset",
    "where.Scalar",
    "where",
    "max.other",
    "max.out",
    "min.other",
    "min.out",
    "var.out",
    "nll_loss.out",
    "nll_loss2d.out",
    "dropout_",
    "narrow.Tensor",
    "to.dtype_layout",
    "to.other",
    "nonzero_numpy",
    "argwhere",
    "empty.out",
    "matmul.out",
    "rand.generator_out",
    "randn.out",
    "randn.generator_out",
    "pad",
];

#[test]
fn backward_nodes_are_pytorchs() {
    let mut wrong = Vec::new();
    for &(op, node) in PYTORCH_NODES {
        let Some(o) = OPERATORS.iter().find(|o| o.operator == op) else {
            wrong.push(format!("{op}: not in the table"));
            continue;
        };
        if o.node != Some(node) {
            wrong.push(format!("{op}: {:?}, PyTorch's {node}", o.node));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Where switchboard-ops registers a kernel for an operator PyTorch 2.15 decomposes (its
/// native_functions.yaml gives them a `dispatch:` entry): the `out=` overloads refuse
/// arguments that require grad, as the decomposition's own `out=` call does in PyTorch;
/// `silu_backward` has a kernel without a formula (double backward of `silu` fails).
const KERNELS_FOR_PYTORCH_COMPOSITES: &[&str] = &[
    "silu_backward",
    "var.out",
    "empty.out",
    "matmul.out",
    "rand.generator_out",
    "randn.out",
    "randn.generator_out",
];

#[test]
fn composite_operators_are_pytorchs() {
    let mut wrong = Vec::new();
    for o in OPERATORS {
        let pytorch = PYTORCH_COMPOSITE.contains(&o.operator)
            && !KERNELS_FOR_PYTORCH_COMPOSITES.contains(&o.operator);
        if (o.kind == AutogradKind::Composite) != pytorch {
            wrong.push(format!(
                "{}: {:?}, PyTorch composite: {pytorch}",
                o.operator, o.kind
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

//! Cast policies as data: which operators a backend's Autocast key wraps, and how.

use std::sync::RwLock;

use switchboard_keys::{DeviceType, DispatchKey};
use switchboard_tensor::ScalarType;

/// How an autocast kernel treats an operator's floating-point arguments (`at::autocast::CastPolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CastPolicy {
    /// Cast to the region's lower-precision dtype (bfloat16 or float16) and run there: matrix
    /// products and convolutions.
    LowerPrecisionFp,
    /// Cast to float32: operators that lose too much precision below it (losses, reductions
    /// of many terms, linear algebra).
    Fp32,
    /// Run in float32 by setting the operator's `dtype` argument to float32 when the caller left
    /// it unset and the first argument is eligible (`softmax`, `sum`, ...); arguments are not cast.
    Fp32SetOptDtype,
    /// Cast every eligible argument to the widest floating dtype among them (float32 over the
    /// lower-precision dtype): operators combining several tensors (`cat`, `stack`).
    Promote,
}

/// One backend's autocast policy: its key, its device, its dtypes and the operators it wraps.
/// A backend gets autocast by adding such a table and registering it with
/// [`register_policy`](crate::register_policy): no code of its own (see Note [Autocast
/// policies are data]).
#[derive(Debug)]
pub struct BackendPolicy {
    /// The autocast key whose kernels this policy provides (`AutocastCPU`).
    pub key: DispatchKey,
    /// The device type an autocast region names (`torch.autocast("cpu")`).
    pub device_type: DeviceType,
    /// The device types whose tensors are cast (PyTorch's `is_autocast_eligible`).
    pub eligible_devices: &'static [DeviceType],
    /// The lower-precision dtype a region uses when none is given.
    pub default_dtype: ScalarType,
    /// The lower-precision dtypes a region may use; others disable the region with a warning.
    pub supported_dtypes: &'static [ScalarType],
    /// The operators with an autocast kernel (`name.overload`, namespace `aten`) and their policy.
    pub ops: &'static [(&'static str, CastPolicy)],
}

impl BackendPolicy {
    /// The policy of an operator (`"mm"`, `"sum.dim_IntList"`), if the backend wraps it.
    pub fn policy_of(&self, op: &str) -> Option<CastPolicy> {
        self.ops
            .iter()
            .find(|(name, _)| *name == op)
            .map(|&(_, p)| p)
    }
}

// Note [Autocast policies are data]
// PyTorch writes one `KERNEL_CPU(op, policy)` line per operator and device, each instantiating a
// C++ template. Here one boxed kernel per policy kind serves every operator (it reads the
// arguments off the stack, casts the tensors, and calls the operator again with the backend's
// Autocast key excluded), so a backend's autocast is a table: its key, eligible devices, dtypes
// and the (operator, policy) pairs. The lists below are PyTorch 2.15's (`autocast_mode.cpp` and
// the `AT_FORALL_*` lists of `autocast_mode.h`, checked against
// `torch._C._dispatch_get_registrations_for_dispatch_key`) restricted to the operators that exist
// in `native_functions.yaml`; `tests/policy.rs` checks that every entry names a real operator.

use CastPolicy::{Fp32, Fp32SetOptDtype, LowerPrecisionFp, Promote};

/// The CPU policy (`TORCH_LIBRARY_IMPL(aten, AutocastCPU, m)`): bfloat16 by default, float16
/// allowed.
pub static CPU: BackendPolicy = BackendPolicy {
    key: DispatchKey::AutocastCPU,
    device_type: DeviceType::CPU,
    eligible_devices: &[DeviceType::CPU],
    default_dtype: ScalarType::BFloat16,
    supported_dtypes: &[ScalarType::BFloat16, ScalarType::Half],
    ops: &[
        // lower_precision_fp
        ("conv1d", LowerPrecisionFp),
        ("conv2d", LowerPrecisionFp),
        ("conv1d.padding", LowerPrecisionFp),
        ("conv2d.padding", LowerPrecisionFp),
        ("bmm", LowerPrecisionFp),
        ("mm", LowerPrecisionFp),
        ("addmm", LowerPrecisionFp),
        ("linear", LowerPrecisionFp),
        ("matmul", LowerPrecisionFp),
        ("scaled_dot_product_attention", LowerPrecisionFp),
        // fp32
        ("mse_loss", Fp32),
        ("nll_loss", Fp32),
        ("nll_loss2d", Fp32),
        ("cross_entropy_loss", Fp32),
        ("reflection_pad1d", Fp32),
        ("reflection_pad2d", Fp32),
        ("replication_pad2d", Fp32),
        ("replication_pad3d", Fp32),
        ("avg_pool3d", Fp32),
        ("adaptive_avg_pool3d", Fp32),
        ("max_pool3d", Fp32),
        ("cdist", Fp32),
        ("grid_sampler", Fp32),
        ("grid_sampler_2d", Fp32),
        ("prod", Fp32),
        ("prod.dim_int", Fp32),
        ("fft_fft", Fp32),
        ("fft_ifft", Fp32),
        ("fft_rfft", Fp32),
        ("fft_irfft", Fp32),
        ("fft_rfftn", Fp32),
        ("fft_irfftn", Fp32),
        ("view_as_complex", Fp32),
        // promote
        ("stack", Promote),
        ("cat", Promote),
    ],
};

/// The CUDA policy (`TORCH_LIBRARY_IMPL(aten, Autocast, m)`): float16 by default, bfloat16
/// allowed. XPU, MPS and MTIA use the same lists in PyTorch.
pub static CUDA: BackendPolicy = BackendPolicy {
    key: DispatchKey::AutocastCUDA,
    device_type: DeviceType::CUDA,
    eligible_devices: &[DeviceType::CUDA, DeviceType::XLA],
    default_dtype: ScalarType::Half,
    supported_dtypes: &[ScalarType::Half, ScalarType::BFloat16],
    ops: &[
        // lower_precision_fp
        ("conv1d", LowerPrecisionFp),
        ("conv2d", LowerPrecisionFp),
        ("convolution", LowerPrecisionFp),
        ("addmm", LowerPrecisionFp),
        ("matmul", LowerPrecisionFp),
        ("mm", LowerPrecisionFp),
        ("linear", LowerPrecisionFp),
        ("bmm", LowerPrecisionFp),
        ("einsum", LowerPrecisionFp),
        ("scaled_dot_product_attention", LowerPrecisionFp),
        // fp32
        ("exp", Fp32),
        ("log", Fp32),
        ("rsqrt", Fp32),
        ("pow.Tensor_Scalar", Fp32),
        ("pow.Tensor_Tensor", Fp32),
        ("pow.Scalar", Fp32),
        ("layer_norm", Fp32),
        ("native_layer_norm", Fp32),
        ("group_norm", Fp32),
        ("nll_loss", Fp32),
        ("nll_loss2d", Fp32),
        ("mse_loss", Fp32),
        // fp32: the float unary operators of UnaryOps.cpp
        ("acos", Fp32),
        ("asin", Fp32),
        ("cosh", Fp32),
        ("expm1", Fp32),
        ("log10", Fp32),
        ("log2", Fp32),
        ("log1p", Fp32),
        ("reciprocal", Fp32),
        ("sinh", Fp32),
        ("tan", Fp32),
        // fp32: upsampling (AT_FORALL_FP32's upsample_* entries, the sized overloads)
        ("upsample_nearest2d", Fp32),
        ("upsample_bilinear2d", Fp32),
        // fp32: distances (AT_FORALL_FP32's pdist and cdist)
        ("pdist", Fp32),
        ("cdist", Fp32),
        // fp32: grid sampling (AT_FORALL_FP32's grid_sampler)
        ("grid_sampler", Fp32),
        // fp32_set_opt_dtype
        ("softmax.int", Fp32SetOptDtype),
        ("log_softmax.int", Fp32SetOptDtype),
        ("sum", Fp32SetOptDtype),
        ("sum.dim_IntList", Fp32SetOptDtype),
        ("prod", Fp32SetOptDtype),
        ("prod.dim_int", Fp32SetOptDtype),
        ("cumsum", Fp32SetOptDtype),
        // promote
        ("addcdiv", Promote),
        ("addcmul", Promote),
        ("index_put", Promote),
        ("scatter_add", Promote),
        ("atan2", Promote),
    ],
};

/// The policies this crate registers in the global dispatcher.
pub static BUILTIN_POLICIES: &[&BackendPolicy] = &[&CPU, &CUDA];

/// Policies registered so far, by any crate (see [`register_policy`](crate::register_policy)).
static REGISTERED: RwLock<Vec<&'static BackendPolicy>> = RwLock::new(Vec::new());

pub(crate) fn remember_policy(policy: &'static BackendPolicy) {
    let mut r = REGISTERED.write().unwrap_or_else(|e| e.into_inner());
    if !r.iter().any(|p| std::ptr::eq(*p, policy)) {
        r.push(policy);
    }
}

/// The registered policy of an autocast device type, if any.
pub fn registered_policy(device_type: DeviceType) -> Option<&'static BackendPolicy> {
    let r = REGISTERED.read().unwrap_or_else(|e| e.into_inner());
    r.iter().copied().find(|p| p.device_type == device_type)
}

/// The device types of the registered policies, in `DeviceType`'s order (CPU first).
pub(crate) fn registered_device_types() -> Vec<DeviceType> {
    let r = REGISTERED.read().unwrap_or_else(|e| e.into_inner());
    let mut types: Vec<DeviceType> = r.iter().map(|p| p.device_type).collect();
    types.sort();
    types.dedup();
    types
}

//! The code switchboard-codegen generates from switchboard-ops' `native_functions.yaml` and
//! `derivatives.yaml` (see `build.rs`): the backward nodes, the Autograd and ADInplaceOrView
//! kernels and their registrations, and [`OPERATORS`].

// Generated code: PyTorch's signatures and formulas, written out.
#![allow(
    clippy::too_many_arguments,
    clippy::needless_borrow,
    clippy::needless_borrows_for_generic_args,
    clippy::redundant_closure,
    clippy::redundant_field_names,
    clippy::type_complexity,
    clippy::let_and_return,
    clippy::unnecessary_lazy_evaluations,
    clippy::useless_conversion,
    clippy::nonminimal_bool,
    unused_parens
)]

use std::sync::Arc;

use switchboard_dispatcher::{
    AutoDispatchBelowADInplaceOrView, AutoDispatchBelowAutograd, DispatchKeySet, KernelFunction,
    Library, PackedScalar, Result,
};
#[allow(unused_imports)]
use switchboard_ops::{self as ops, redispatch as rd};
#[allow(unused_imports)]
use switchboard_tensor::{Device, Generator, Layout, MemoryFormat, Scalar, ScalarType, Tensor};

use crate::forward_ad::{
    forward_ad_enabled, forward_ad_not_implemented, forward_ad_out_error, outer_levels_only,
    without_forward_grad,
};
#[allow(unused_imports)]
use crate::forward_grad::{
    any_forward_grad, forward_grad_at, set_forward_grad_at, tangent_level, tangent_level_list,
    tangent_level_optional, tangent_or_zeros, update_inplace_forward_grad_at,
};
use crate::node::{Edge, Node, SavedTensor};
#[allow(unused_imports)]
use crate::not_implemented::{record_not_implemented, record_not_implemented_inplace};
#[allow(unused_imports)]
use crate::recording::{
    as_multi_output_view, as_view, check_inplace, check_no_requires_grad, fresh, fw_hint,
    fw_hint_list, fw_hint_optional, fw_hint_optional_list, grad_of, guarded, hint, hint_list,
    hint_optional, hint_optional_list, out_requires_grad_error, rebase_history, record_function,
    record_inplace_begin, rg_hint, rg_hint_list, rg_hint_optional, rg_hint_optional_list,
    unpack_list, unpack_optional, unpack_optional_list, SavedInts, AFTER_AD, AFTER_ADIV,
};
use crate::{is_grad_enabled, AutogradKind, OperatorAutograd};

include!(concat!(env!("OUT_DIR"), "/autograd_generated.rs"));

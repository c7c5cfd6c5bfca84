//! The operators whose values the generic tests cannot compare, and why: the one list
//! (Note [Operator samples]).

use crate::info::Unsampled;

/// Every entry the generic value comparisons skip, with the reason.
pub const UNSAMPLED: &[(&str, Unsampled)] = &[
    // Random: shapes, dtypes and strides are compared (Meta against CPU); values only between
    // calls reseeded alike (in-place and out= against the functional form, gradcheck) and
    // through their statistics (the random-statistics test).
    ("rand", Unsampled::Random),
    ("rand.generator", Unsampled::Random),
    ("randn", Unsampled::Random),
    ("randn.generator", Unsampled::Random),
    ("randint", Unsampled::Random),
    ("randint.generator", Unsampled::Random),
    ("randint.low", Unsampled::Random),
    ("randint.low_generator", Unsampled::Random),
    ("randperm", Unsampled::Random),
    ("randperm.generator", Unsampled::Random),
    ("uniform", Unsampled::Random),
    ("normal_functional", Unsampled::Random),
    ("normal_", Unsampled::Random),
    ("random_.from", Unsampled::Random),
    ("random_.to", Unsampled::Random),
    ("random_", Unsampled::Random),
    ("bernoulli_.float", Unsampled::Random),
    ("bernoulli.p", Unsampled::Random),
    ("native_dropout", Unsampled::Random),
    ("dropout", Unsampled::Random),
    ("dropout_", Unsampled::Random),
    // Uninitialized memory: metadata only.
    ("empty.memory_format", Unsampled::Uninitialized),
    ("empty_strided", Unsampled::Uninitialized),
    ("empty_like", Unsampled::Uninitialized),
    ("new_empty_strided", Unsampled::Uninitialized),
    // A number read from the data: no Meta kernel (PyTorch's fail on meta tensors too).
    ("item", Unsampled::DataDependent),
    ("_local_scalar_dense", Unsampled::DataDependent),
    ("equal", Unsampled::DataDependent),
    // An answer about the device: the CPU may choose its fused attention kernel where Meta
    // answers math, as PyTorch's `_fused_sdp_choice_meta` does.
    ("_fused_sdp_choice", Unsampled::DeviceDependent),
];

/// Why `name`'s values cannot be compared generically, if they cannot.
pub fn unsampled(name: &str) -> Option<Unsampled> {
    UNSAMPLED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, why)| *why)
}

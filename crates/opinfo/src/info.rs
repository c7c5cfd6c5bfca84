//! One entry of the registry: an operator, its samples, and what it claims to support.

use crate::sample::Sample;

/// The kind of operator an entry is, as the registry groups them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Elementwise, one tensor input.
    UnaryPointwise,
    /// Elementwise over broadcast tensor (or scalar) inputs.
    BinaryPointwise,
    /// Reductions over dimensions.
    Reduction,
    /// Matrix products.
    Linalg,
    /// Neural-network operators and their backward helpers.
    Nn,
    /// Views, reshapes, copies, joins and indexing.
    Shape,
    /// Tensors made from sizes or from another tensor's metadata.
    Factory,
    /// Random sampling.
    Random,
    /// Non-tensor results (`item`, `numel`, `equal`).
    Scalar,
}

/// What an entry says about gradients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grad {
    /// Differentiable: gradcheck on the float64 samples, and gradgradcheck on the first one.
    Check,
    /// Differentiable, but its backward is not differentiable again (the reason).
    CheckOnce(&'static str),
    /// No gradient flows (the reason: integer or boolean results, no differentiable input).
    None(&'static str),
    /// Backward fails with "not implemented", as in PyTorch (the reason).
    NotImplemented(&'static str),
}

impl Grad {
    /// Whether gradcheck runs.
    pub fn checks(self) -> bool {
        matches!(self, Grad::Check | Grad::CheckOnce(_))
    }
}

/// How an entry's result dtype follows from its arguments' dtypes (PyTorch's documented
/// type promotion), checked by the promotion test on every sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Promotion {
    /// Not checked (the result dtype comes from elsewhere: a `dtype` argument, indices).
    Unchecked,
    /// `torch.result_type` of the tensor and scalar arguments.
    Default,
    /// `torch.result_type`, integers (and bool) promoted to the default float dtype (`div`,
    /// `exp`, `sigmoid`).
    IntToFloat,
    /// `div` with a `rounding_mode`: `IntToFloat` for true division (`None`), `Default` for
    /// `"trunc"` and `"floor"`.
    Division,
    /// Computed in `torch.result_type`, returned as bool (comparisons).
    Bool,
    /// The dtype of `self` (`where` keeps its value arguments' promotion: see `Default`).
    SameAsSelf,
    /// `sum`-like: integers and bool accumulate in int64, floats keep their dtype.
    IntToLong,
}

/// Why the generic tests cannot compare an entry's values (they still check what they can);
/// every such entry is listed in `special.rs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unsampled {
    /// Random values: shapes and dtypes are checked, values only through statistics
    /// (and between variants run from the same seed).
    Random,
    /// Uninitialized values (`empty`): only shapes, strides and dtypes are checked.
    Uninitialized,
    /// A non-tensor result read from data (`item`, `equal`): no Meta kernel, as in PyTorch.
    DataDependent,
    /// A non-tensor answer that depends on the device (`_fused_sdp_choice`): not compared
    /// between devices.
    DeviceDependent,
}

/// What a random operator's values look like over one large sample (checked by the
/// random-statistics test): mean and standard deviation within `tol`, every value in
/// `[min, max]`.
#[derive(Clone, Debug)]
pub struct Stats {
    /// The call.
    pub sample: Sample,
    /// The expected mean.
    pub mean: f64,
    /// The expected standard deviation.
    pub std: f64,
    /// The smallest value allowed.
    pub min: f64,
    /// The largest value allowed.
    pub max: f64,
    /// The tolerance on mean and standard deviation.
    pub tol: f64,
}

/// One registry entry: a functional operator (overload) and, through its flags, its in-place
/// and `out=` variants (found by schema: the same arguments, `self` written or `out`
/// arguments added).
#[derive(Clone, Debug)]
pub struct OpInfo {
    /// `name.overload` (`add.Tensor`), as the dispatcher lists it without `aten::`.
    pub name: &'static str,
    /// Its kind.
    pub family: Family,
    /// Its samples.
    pub samples: Vec<Sample>,
    /// Its gradients.
    pub grad: Grad,
    /// It has a kernel registered at `Meta`.
    pub meta: bool,
    /// It has an in-place variant (`add_.Tensor`).
    pub inplace: bool,
    /// It has an `out=` variant (`add.out`).
    pub out: bool,
    /// Its result dtype rule.
    pub promotion: Promotion,
    /// Why values cannot be compared generically, when they cannot.
    pub unsampled: Option<Unsampled>,
    /// The samples gradgradcheck runs (the first `n` eligible ones).
    pub gradgrad_samples: usize,
    /// For a random operator, its statistics.
    pub stats: Option<Stats>,
}

impl OpInfo {
    /// An entry with no flags set, no samples.
    pub fn new(name: &'static str, family: Family) -> OpInfo {
        OpInfo {
            name,
            family,
            samples: Vec::new(),
            grad: Grad::None("not differentiable"),
            meta: false,
            inplace: false,
            out: false,
            promotion: Promotion::Unchecked,
            unsampled: crate::special::unsampled(name),
            gradgrad_samples: 1,
            stats: None,
        }
    }

    /// Its samples.
    pub fn samples(mut self, samples: Vec<Sample>) -> OpInfo {
        self.samples = samples;
        self
    }

    /// One more sample.
    pub fn sample(mut self, s: Sample) -> OpInfo {
        self.samples.push(s);
        self
    }

    /// Its gradients.
    pub fn grad(mut self, grad: Grad) -> OpInfo {
        self.grad = grad;
        self
    }

    /// Differentiable: [`Grad::Check`].
    pub fn differentiable(self) -> OpInfo {
        self.grad(Grad::Check)
    }

    /// It has a Meta kernel.
    pub fn meta(mut self) -> OpInfo {
        self.meta = true;
        self
    }

    /// It has an in-place variant.
    pub fn inplace(mut self) -> OpInfo {
        self.inplace = true;
        self
    }

    /// It has an `out=` variant.
    pub fn out(mut self) -> OpInfo {
        self.out = true;
        self
    }

    /// Its promotion rule.
    pub fn promotion(mut self, p: Promotion) -> OpInfo {
        self.promotion = p;
        self
    }

    /// How many samples gradgradcheck runs.
    pub fn gradgrad_samples(mut self, n: usize) -> OpInfo {
        self.gradgrad_samples = n;
        self
    }

    /// Its statistics (random operators).
    pub fn stats(mut self, stats: Stats) -> OpInfo {
        self.stats = Some(stats);
        self
    }

    /// The samples gradcheck may run (see [`Sample::for_gradcheck`]).
    pub fn grad_samples(&self) -> impl Iterator<Item = &Sample> {
        self.samples.iter().filter(|s| s.for_gradcheck())
    }

    /// The `aten::` name.
    pub fn qualified(&self) -> String {
        format!("aten::{}", self.name)
    }

    /// Whether the entry is an in-place operator with no functional form of its own
    /// (`copy_`, `random_`): its samples are applied to a fresh `self`.
    pub fn is_inplace_only(&self) -> bool {
        self.name
            .split('.')
            .next()
            .is_some_and(|b| b.ends_with('_'))
    }
}

//! One call of an operator: its arguments (tensors described by [`TensorSpec`]s, other values
//! boxed) and what the generic tests may do with it.

use switchboard_dispatcher::IValue;
use switchboard_tensor::{Device, MemoryFormat, ScalarType};

use crate::spec::TensorSpec;

/// One argument of a sample.
#[derive(Clone, Debug)]
pub enum Arg {
    /// A tensor.
    Tensor(TensorSpec),
    /// A `Tensor[]`.
    Tensors(Vec<TensorSpec>),
    /// A `Tensor?[]` (the `indices` of `index.Tensor`): tensors and `None`s.
    OptionalTensors(Vec<Option<TensorSpec>>),
    /// A `Tensor?[]`-free optional tensor given as `None`, or any non-tensor value.
    Value(IValue),
}

impl From<TensorSpec> for Arg {
    fn from(t: TensorSpec) -> Arg {
        Arg::Tensor(t)
    }
}

impl From<Vec<TensorSpec>> for Arg {
    fn from(t: Vec<TensorSpec>) -> Arg {
        Arg::Tensors(t)
    }
}

impl From<Vec<Option<TensorSpec>>> for Arg {
    fn from(t: Vec<Option<TensorSpec>>) -> Arg {
        Arg::OptionalTensors(t)
    }
}

macro_rules! value_arg {
    ($($t:ty),*) => {$(
        impl From<$t> for Arg {
            fn from(v: $t) -> Arg {
                Arg::Value(IValue::from(v))
            }
        }
    )*};
}
value_arg!(i64, f64, bool, &str, ScalarType, Device, MemoryFormat);

impl From<&[i64]> for Arg {
    fn from(v: &[i64]) -> Arg {
        Arg::Value(IValue::IntList(v.iter().copied().collect()))
    }
}

impl<const N: usize> From<[i64; N]> for Arg {
    fn from(v: [i64; N]) -> Arg {
        Arg::Value(IValue::IntList(v.iter().copied().collect()))
    }
}

impl<const N: usize> From<[f64; N]> for Arg {
    fn from(v: [f64; N]) -> Arg {
        Arg::Value(IValue::DoubleList(v.iter().copied().collect()))
    }
}

impl<const N: usize> From<[bool; N]> for Arg {
    fn from(v: [bool; N]) -> Arg {
        Arg::Value(IValue::BoolList(v.iter().copied().collect()))
    }
}

/// `None` for an optional argument.
pub const NONE: Arg = Arg::Value(IValue::None);

/// One call of an operator: positional arguments in schema order, then keyword arguments by
/// name; arguments left out take the schema's defaults. Built with [`sample!`](crate::sample).
#[derive(Clone, Debug)]
pub struct Sample {
    /// The leading arguments, in schema order.
    pub args: Vec<Arg>,
    /// Arguments by name.
    pub kwargs: Vec<(&'static str, Arg)>,
    /// Why gradcheck must skip the sample (NaN, a kink, an integer-only computation), if it
    /// must.
    pub no_grad: Option<&'static str>,
    /// The call is expected to fail (on every device, with the same message).
    pub error: bool,
    /// The call fails in the CPU kernel, not in PyTorch's meta function: because of the values
    /// (an index out of range: a Meta tensor has no values to check) or of the kernel's dtype
    /// dispatch (`AT_DISPATCH_*`, which a structured operator's meta function does not run).
    /// It fails on the CPU only, as in PyTorch.
    pub error_from_data: bool,
    /// The call reads values to decide its result's shape (`narrow.Tensor`'s start): it fails
    /// on Meta, as PyTorch's does.
    pub needs_data: bool,
}

impl Sample {
    /// A sample of these arguments.
    pub fn new(args: Vec<Arg>, kwargs: Vec<(&'static str, Arg)>) -> Sample {
        // Each tensor of a sample gets its own values.
        let mut n = 0;
        let mut salt = |t: &mut TensorSpec| {
            n += 1;
            if t.seed == 0 {
                t.seed = n;
            }
        };
        let mut args = args;
        let mut kwargs = kwargs;
        for a in args.iter_mut().chain(kwargs.iter_mut().map(|(_, a)| a)) {
            match a {
                Arg::Tensor(t) => salt(t),
                Arg::Tensors(ts) => ts.iter_mut().for_each(&mut salt),
                Arg::OptionalTensors(ts) => ts.iter_mut().flatten().for_each(&mut salt),
                Arg::Value(_) => {}
            }
        }
        Sample {
            args,
            kwargs,
            no_grad: None,
            error: false,
            error_from_data: false,
            needs_data: false,
        }
    }

    /// Not for gradcheck, because of `why`.
    pub fn no_grad(mut self, why: &'static str) -> Sample {
        self.no_grad = Some(why);
        self
    }

    /// Expected to fail.
    pub fn error(mut self) -> Sample {
        self.error = true;
        self
    }

    /// Expected to fail on the CPU because of its values (Meta runs it).
    pub fn error_from_data(mut self) -> Sample {
        self.error = true;
        self.error_from_data = true;
        self
    }

    /// Expected to fail on the CPU because its kernel has no loop for the dtype ("GeluKernelImpl"
    /// not implemented for 'Long'); a structured operator's meta function (Meta) runs it, as
    /// PyTorch's does.
    pub fn error_from_kernel_dtype(self) -> Sample {
        self.error_from_data()
    }

    /// Reads values to decide its result's shape (fails on Meta).
    pub fn needs_data(mut self) -> Sample {
        self.needs_data = true;
        self
    }

    /// Whether gradcheck may run the sample: expected to succeed, no NaN or kink, and no
    /// reduced-precision float (gradcheck runs in float64, where it is a sample already run).
    pub fn for_gradcheck(&self) -> bool {
        !self.error
            && self.no_grad.is_none()
            && !self
                .tensors()
                .any(|t| t.dtype.is_floating_point() && t.dtype.element_size() < 4)
    }

    /// The tensor specs of the sample, in argument order (lists flattened).
    pub fn tensors(&self) -> impl Iterator<Item = &TensorSpec> {
        self.args
            .iter()
            .chain(self.kwargs.iter().map(|(_, a)| a))
            .flat_map(|a| -> Box<dyn Iterator<Item = &TensorSpec>> {
                match a {
                    Arg::Tensor(t) => Box::new(std::iter::once(t)),
                    Arg::Tensors(ts) => Box::new(ts.iter()),
                    Arg::OptionalTensors(ts) => Box::new(ts.iter().flatten()),
                    Arg::Value(_) => Box::new(std::iter::empty()),
                }
            })
    }

    /// The value given for argument `name` (by keyword), if any.
    pub fn kwarg(&self, name: &str) -> Option<&Arg> {
        self.kwargs.iter().find(|(n, _)| *n == name).map(|(_, a)| a)
    }
}

/// A [`Sample`]: `sample![t(&[2, 3]), t(&[3]); alpha = 2]` (positional arguments, then
/// `name = value` keyword arguments after a `;`). Values convert with `Arg::from`.
#[macro_export]
macro_rules! sample {
    ($($arg:expr),* $(,)? $(; $($name:ident = $value:expr),* $(,)?)?) => {
        $crate::Sample::new(
            vec![$($crate::Arg::from($arg)),*],
            vec![$($((stringify!($name), $crate::Arg::from($value))),*)?],
        )
    };
}

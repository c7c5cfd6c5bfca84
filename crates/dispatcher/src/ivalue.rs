//! `IValue`: the boxed value of the dispatcher's boxed calling convention, and `Stack`.

use std::fmt;

use std::sync::Arc;

use switchboard_keys::DispatchKeySet;
use switchboard_tensor::{Device, Generator, Layout, MemoryFormat, Scalar, ScalarType, Tensor};
use thin_vec::ThinVec;

use crate::custom_class::Object;

/// A boxed value: one argument or return of an operator in the boxed calling convention.
///
/// As in PyTorch, a `Scalar` argument is boxed as `Int`, `Double` or `Bool`; `ScalarType`,
/// `Layout`, `Device` and `MemoryFormat` have variants of their own so that boxed values print
/// and convert unambiguously (an `Int` is still accepted where a `ScalarType` is expected).
///
/// An `IValue` is two words (Note [Two-word IValues]): lists are [`ThinVec`]s and a string is a
/// `Box<String>`, so that each payload is one pointer.
///
/// ```
/// use switchboard_dispatcher::IValue;
/// let dims = IValue::IntList(vec![0, 1].into());
/// assert!(matches!(&dims, IValue::IntList(v) if v == &[0, 1]));
/// assert_eq!(std::mem::size_of::<IValue>(), 16);
/// ```
#[derive(Clone, Default)]
#[repr(u64)]
pub enum IValue {
    /// `None` (an absent optional).
    #[default]
    None,
    /// A tensor.
    Tensor(Tensor),
    /// An `int` / `SymInt`.
    Int(i64),
    /// A `float`.
    Double(f64),
    /// A `bool`.
    Bool(bool),
    /// A `str`.
    #[allow(clippy::box_collection)] // one word, see Note [Two-word IValues]
    Str(Box<String>),
    /// A `ScalarType` (dtype).
    ScalarType(ScalarType),
    /// A `Layout`.
    Layout(Layout),
    /// A `Device`.
    Device(Device),
    /// A `MemoryFormat`.
    MemoryFormat(MemoryFormat),
    /// A `Generator` (a handle to a random-number generator's state).
    Generator(Generator),
    /// An `int[]`.
    IntList(ThinVec<i64>),
    /// A `float[]`.
    DoubleList(ThinVec<f64>),
    /// A `bool[]`.
    BoolList(ThinVec<bool>),
    /// A `Tensor[]`.
    TensorList(ThinVec<Tensor>),
    /// A `Tensor?[]`.
    OptionalTensorList(ThinVec<Option<Tensor>>),
    /// A tuple (several returns boxed as one value).
    Tuple(ThinVec<IValue>),
    /// Any other list.
    GenericList(ThinVec<IValue>),
    /// An object of a custom class (Note [Custom class objects]).
    Object(Arc<Object>),
}

// Note [Two-word IValues]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A boxed call moves every argument and return through a `Stack`: the caller pushes, the
// kernel reads, drops and writes in place, the caller pops and drops. Tensors and numbers are
// nearly all of that traffic, and their payload is one word. With `Vec` or `String` payloads
// (three words) the enum was 32 bytes: each push and pop copied it through a temporary, and its
// drop was a large out-of-line function. With every payload one word (a `ThinVec` keeps its
// length and capacity in its heap block; a string is boxed), an `IValue` is a tag and a word:
// pushes and pops are two stores or loads, and dropping a tensor value is a tag test and a
// reference-count decrement. Lists and strings pay for it with one extra indirection, and a
// string with one extra allocation; neither is common on hot paths.
const _: () = assert!(std::mem::size_of::<IValue>() == 16);
const _: () = assert!(std::mem::size_of::<Option<IValue>>() == 16);

/// The boxed calling convention's argument stack: arguments are pushed in schema order, the
/// kernel pops them and pushes its returns.
pub type Stack = Vec<IValue>;

impl IValue {
    /// The name of the value's type, as PyTorch names it in type errors.
    pub fn type_name(&self) -> &'static str {
        match self {
            IValue::None => "NoneType",
            IValue::Tensor(_) => "Tensor",
            IValue::Int(_) => "int",
            IValue::Double(_) => "float",
            IValue::Bool(_) => "bool",
            IValue::Str(_) => "str",
            IValue::ScalarType(_) => "ScalarType",
            IValue::Layout(_) => "Layout",
            IValue::Device(_) => "Device",
            IValue::MemoryFormat(_) => "MemoryFormat",
            IValue::Generator(_) => "Generator",
            IValue::IntList(_) => "List[int]",
            IValue::DoubleList(_) => "List[float]",
            IValue::BoolList(_) => "List[bool]",
            IValue::TensorList(_) => "List[Tensor]",
            IValue::OptionalTensorList(_) => "List[Optional[Tensor]]",
            IValue::Tuple(_) => "Tuple",
            IValue::GenericList(_) => "List",
            IValue::Object(o) => o.qualified_name(),
        }
    }

    /// True for `None`.
    pub fn is_none(&self) -> bool {
        matches!(self, IValue::None)
    }

    /// The tensor, if this is one.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            IValue::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// The value as a `Scalar`, if it is a number or a bool.
    pub fn as_scalar(&self) -> Option<Scalar> {
        match *self {
            IValue::Int(v) => Some(Scalar::Int(v)),
            IValue::Double(v) => Some(Scalar::Float(v)),
            IValue::Bool(v) => Some(Scalar::Bool(v)),
            _ => None,
        }
    }

    /// The union of the key sets of the tensors this value holds (dispatch-key extraction).
    #[inline]
    pub fn key_set(&self) -> DispatchKeySet {
        match self {
            IValue::Tensor(t) => t.key_set(),
            IValue::TensorList(ts) => ts
                .iter()
                .fold(DispatchKeySet::EMPTY, |ks, t| ks | t.key_set()),
            IValue::OptionalTensorList(ts) => ts
                .iter()
                .flatten()
                .fold(DispatchKeySet::EMPTY, |ks, t| ks | t.key_set()),
            _ => DispatchKeySet::EMPTY,
        }
    }
}

impl From<Scalar> for IValue {
    #[inline]
    fn from(s: Scalar) -> Self {
        match s {
            Scalar::Int(v) => IValue::Int(v),
            Scalar::Float(v) => IValue::Double(v),
            Scalar::Bool(v) => IValue::Bool(v),
        }
    }
}

impl From<Tensor> for IValue {
    #[inline]
    fn from(t: Tensor) -> Self {
        IValue::Tensor(t)
    }
}

impl From<&Tensor> for IValue {
    /// A new handle to the same tensor.
    #[inline]
    fn from(t: &Tensor) -> Self {
        IValue::Tensor(t.clone())
    }
}

impl From<Option<Tensor>> for IValue {
    #[inline]
    fn from(t: Option<Tensor>) -> Self {
        t.map_or(IValue::None, IValue::Tensor)
    }
}

impl From<Option<&Tensor>> for IValue {
    #[inline]
    fn from(t: Option<&Tensor>) -> Self {
        t.map_or(IValue::None, |t| IValue::Tensor(t.clone()))
    }
}

macro_rules! from_copy {
    ($ty:ty, $variant:ident) => {
        impl From<$ty> for IValue {
            #[inline]
            fn from(v: $ty) -> Self {
                IValue::$variant(v)
            }
        }
    };
}

from_copy!(i64, Int);
from_copy!(f64, Double);
from_copy!(bool, Bool);
from_copy!(ScalarType, ScalarType);
from_copy!(Layout, Layout);
from_copy!(Device, Device);
from_copy!(MemoryFormat, MemoryFormat);

impl From<&str> for IValue {
    #[inline]
    fn from(s: &str) -> Self {
        IValue::Str(Box::new(s.to_owned()))
    }
}

impl From<String> for IValue {
    #[inline]
    fn from(s: String) -> Self {
        IValue::Str(Box::new(s))
    }
}

macro_rules! from_list {
    ($elem:ty, $variant:ident) => {
        impl From<Vec<$elem>> for IValue {
            #[inline]
            fn from(v: Vec<$elem>) -> Self {
                IValue::$variant(v.into())
            }
        }
    };
}

from_list!(i64, IntList);
from_list!(f64, DoubleList);
from_list!(bool, BoolList);
from_list!(Tensor, TensorList);
from_list!(Option<Tensor>, OptionalTensorList);

fn list<T: fmt::Display>(f: &mut fmt::Formatter<'_>, items: &[T]) -> fmt::Result {
    f.write_str("[")?;
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{x}")?;
    }
    f.write_str("]")
}

impl fmt::Display for IValue {
    /// A short, schema-like rendering (tensors as `Tensor(sizes, dtype)`), for errors and traces.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IValue::None => f.write_str("None"),
            IValue::Tensor(t) => write!(f, "Tensor({:?}, {})", t.sizes(), t.dtype()),
            IValue::Int(v) => write!(f, "{v}"),
            IValue::Double(v) => write!(f, "{v:?}"),
            IValue::Bool(v) => f.write_str(if *v { "True" } else { "False" }),
            IValue::Str(s) => write!(f, "{s:?}"),
            IValue::ScalarType(v) => write!(f, "{v}"),
            IValue::Layout(v) => write!(f, "{v}"),
            IValue::Device(v) => write!(f, "{v}"),
            IValue::MemoryFormat(v) => write!(f, "{v}"),
            IValue::Generator(g) => write!(f, "{g:?}"),
            IValue::IntList(v) => list(f, v),
            IValue::DoubleList(v) => {
                list(f, &v.iter().map(|x| format!("{x:?}")).collect::<Vec<_>>())
            }
            IValue::BoolList(v) => list(f, &v.iter().map(|b| IValue::Bool(*b)).collect::<Vec<_>>()),
            IValue::TensorList(v) => list(
                f,
                &v.iter()
                    .map(|t| IValue::Tensor(t.clone()))
                    .collect::<Vec<_>>(),
            ),
            IValue::OptionalTensorList(v) => list(
                f,
                &v.iter()
                    .map(|t| t.clone().map_or(IValue::None, IValue::Tensor))
                    .collect::<Vec<_>>(),
            ),
            IValue::Tuple(v) => {
                f.write_str("(")?;
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{x}")?;
                }
                f.write_str(")")
            }
            IValue::GenericList(v) => list(f, v),
            IValue::Object(o) => write!(f, "{o:?}"),
        }
    }
}

impl fmt::Debug for IValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IValue({self})")
    }
}

//! The Rust types of operator arguments and returns, and their boxed (`IValue`) forms.

use switchboard_keys::DispatchKeySet;
use switchboard_tensor::{Device, Generator, Layout, MemoryFormat, Scalar, ScalarType, Tensor};

use crate::ivalue::IValue;
use crate::packed_scalar::PackedScalar;

// Note [Argument families]
// A typed kernel takes its arguments borrowed (`&Tensor`, `&[i64]`, `Option<&Tensor>`) or by
// value when they are small (`i64`, `Scalar`). Each schema type has one "family": a 'static
// type standing for it (`Tensor` for `&Tensor`, `Vec<i64>` for `&[i64]`), whose `Ref<'a>` is the
// form typed calls pass: the borrowed form kernels receive, except for `Scalar`, which travels
// as a `PackedScalar` and is unpacked for kernels that take a `Scalar` (`KernelParam::param`,
// Note [Packed scalars]). Families give every Rust signature a 'static identity (for the type
// check that guards the unboxed fast path) and a schema type (for schema inference).

/// An argument family: the schema type of an argument and how its borrowed form is boxed and
/// unboxed (see Note [Argument families]).
pub trait Arg: 'static {
    /// The form a kernel receives.
    type Ref<'a>: Copy;
    /// The schema type, as the schema prints it (`Tensor`, `int[]`, `Scalar?`).
    const SCHEMA_TYPE: &'static str;
    /// The borrowed form of a boxed value; `None` when the value has another type.
    fn from_ivalue(v: &IValue) -> Option<Self::Ref<'_>>;
    /// True when `from_ivalue` accepts `v`. Families override it with a plain tag test where the
    /// default's `Option` test would compile to a null test of the payload's address.
    #[inline(always)]
    fn accepts(v: &IValue) -> bool {
        Self::from_ivalue(v).is_some()
    }
    /// The borrowed form of a value that [`accepts`](Self::accepts) returned true for: with
    /// the type already tested, the conversion is the payload's address.
    ///
    /// # Safety
    /// `Self::accepts(v)` must be true.
    #[inline(always)]
    unsafe fn from_accepted(v: &IValue) -> Self::Ref<'_> {
        match Self::from_ivalue(v) {
            Some(r) => r,
            // SAFETY: guaranteed by the caller: `from_ivalue` accepts `v`.
            None => unsafe { std::hint::unreachable_unchecked() },
        }
    }
    /// The boxed form.
    fn to_ivalue(r: Self::Ref<'_>) -> IValue;
    /// The key sets of the tensors in the argument; empty for non-tensor arguments.
    #[inline(always)]
    fn key_set(_r: Self::Ref<'_>) -> DispatchKeySet {
        DispatchKeySet::EMPTY
    }
    /// Drops a boxed value of this family in place (a kernel's argument, after the kernel ran,
    /// see Note [Boxed trampolines]). The default runs the whole enum's drop glue; families
    /// override it to drop the variants they accept directly (or not at all, for variants
    /// without heap data).
    ///
    /// # Safety
    /// `v` must point to a valid, initialised `IValue` that the caller owns and neither reads
    /// nor drops again, and that [`accepts`](Self::accepts) returned true for.
    #[inline(always)]
    unsafe fn drop_boxed(v: *mut IValue) {
        // SAFETY: guaranteed by the caller: `v` is valid and its value is ours to drop.
        unsafe { std::ptr::drop_in_place(v) }
    }
}

/// A kernel parameter type (`&'a Tensor`, `i64`, ...) and the family it belongs to.
pub trait KernelParam {
    /// The family.
    type Family: Arg;
    /// The parameter's type for borrows of lifetime `'a` (`&'a Tensor` for `&Tensor`).
    type Param<'a>;
    /// The parameter from the family's calling-convention form: the same value for every
    /// family but `Scalar`, which travels packed (Note [Packed scalars]).
    fn param<'a>(r: <Self::Family as Arg>::Ref<'a>) -> Self::Param<'a>;
}

/// A kernel parameter type that receives its family's calling-convention form as it is.
macro_rules! kernel_param {
    ($param:ty => $family:ty) => {
        impl KernelParam for $param {
            type Family = $family;
            type Param<'a> = <$family as Arg>::Ref<'a>;
            #[inline(always)]
            fn param<'a>(r: <$family as Arg>::Ref<'a>) -> <$family as Arg>::Ref<'a> {
                r
            }
        }
    };
}

macro_rules! copy_arg {
    ($ty:ty, $name:literal, $variant:ident) => {
        impl Arg for $ty {
            type Ref<'a> = $ty;
            const SCHEMA_TYPE: &'static str = $name;
            #[inline]
            fn from_ivalue(v: &IValue) -> Option<$ty> {
                match v {
                    IValue::$variant(x) => Some(x.clone()),
                    _ => None,
                }
            }
            #[inline]
            fn to_ivalue(r: $ty) -> IValue {
                IValue::$variant(r)
            }
            #[inline(always)]
            unsafe fn drop_boxed(v: *mut IValue) {
                // SAFETY: guaranteed by the caller: `v` is valid and its value is ours to drop.
                // The expected variant holds no heap data: nothing to drop.
                unsafe {
                    if !matches!(*v, IValue::$variant(_)) {
                        std::ptr::drop_in_place(v)
                    }
                }
            }
        }
        kernel_param!($ty => $ty);
        impl Arg for Option<$ty> {
            type Ref<'a> = Option<$ty>;
            const SCHEMA_TYPE: &'static str = concat!($name, "?");
            #[inline]
            fn from_ivalue(v: &IValue) -> Option<Option<$ty>> {
                match v {
                    IValue::None => Some(None),
                    other => <$ty as Arg>::from_ivalue(other).map(Some),
                }
            }
            #[inline]
            fn to_ivalue(r: Option<$ty>) -> IValue {
                r.map_or(IValue::None, <$ty as Arg>::to_ivalue)
            }
        }
        kernel_param!(Option<$ty> => Option<$ty>);
    };
}

copy_arg!(i64, "int", Int);
copy_arg!(bool, "bool", Bool);
copy_arg!(Layout, "Layout", Layout);
copy_arg!(Device, "Device", Device);
copy_arg!(MemoryFormat, "MemoryFormat", MemoryFormat);

impl Arg for f64 {
    type Ref<'a> = f64;
    const SCHEMA_TYPE: &'static str = "float";
    #[inline]
    fn from_ivalue(v: &IValue) -> Option<f64> {
        match *v {
            IValue::Double(x) => Some(x),
            // An int is a valid float argument, as in Python.
            IValue::Int(x) => Some(x as f64),
            _ => None,
        }
    }
    #[inline]
    fn to_ivalue(r: f64) -> IValue {
        IValue::Double(r)
    }
    #[inline(always)]
    unsafe fn drop_boxed(v: *mut IValue) {
        // SAFETY: guaranteed by the caller: `v` is valid and its value is ours to drop. The
        // expected variants hold no heap data: nothing to drop.
        unsafe {
            if !matches!(*v, IValue::Double(_) | IValue::Int(_)) {
                std::ptr::drop_in_place(v)
            }
        }
    }
}
kernel_param!(f64 => f64);
impl Arg for Option<f64> {
    type Ref<'a> = Option<f64>;
    const SCHEMA_TYPE: &'static str = "float?";
    fn from_ivalue(v: &IValue) -> Option<Option<f64>> {
        match v {
            IValue::None => Some(None),
            other => <f64 as Arg>::from_ivalue(other).map(Some),
        }
    }
    fn to_ivalue(r: Option<f64>) -> IValue {
        r.map_or(IValue::None, IValue::Double)
    }
}
kernel_param!(Option<f64> => Option<f64>);

impl Arg for ScalarType {
    type Ref<'a> = ScalarType;
    const SCHEMA_TYPE: &'static str = "ScalarType";
    fn from_ivalue(v: &IValue) -> Option<ScalarType> {
        match *v {
            IValue::ScalarType(t) => Some(t),
            // PyTorch boxes dtypes as ints.
            IValue::Int(i) => i8::try_from(i).ok().and_then(ScalarType::from_i8),
            _ => None,
        }
    }
    fn to_ivalue(r: ScalarType) -> IValue {
        IValue::ScalarType(r)
    }
}
kernel_param!(ScalarType => ScalarType);
impl Arg for Option<ScalarType> {
    type Ref<'a> = Option<ScalarType>;
    const SCHEMA_TYPE: &'static str = "ScalarType?";
    fn from_ivalue(v: &IValue) -> Option<Option<ScalarType>> {
        match v {
            IValue::None => Some(None),
            other => <ScalarType as Arg>::from_ivalue(other).map(Some),
        }
    }
    fn to_ivalue(r: Option<ScalarType>) -> IValue {
        r.map_or(IValue::None, IValue::ScalarType)
    }
}
kernel_param!(Option<ScalarType> => Option<ScalarType>);

/// `Scalar` arguments travel packed, in two registers (Note [Packed scalars]).
impl Arg for Scalar {
    type Ref<'a> = PackedScalar;
    const SCHEMA_TYPE: &'static str = "Scalar";
    #[inline]
    fn from_ivalue(v: &IValue) -> Option<PackedScalar> {
        v.as_scalar().map(PackedScalar::new)
    }
    #[inline]
    fn to_ivalue(r: PackedScalar) -> IValue {
        IValue::from(r.get())
    }
}
/// A kernel that takes a `Scalar` receives it unpacked.
impl KernelParam for Scalar {
    type Family = Scalar;
    type Param<'a> = Scalar;
    #[inline(always)]
    fn param<'a>(r: <Scalar as Arg>::Ref<'a>) -> Self::Param<'a> {
        r.get()
    }
}
// A kernel that only passes its scalar on takes it packed (Note [Packed scalars]).
kernel_param!(PackedScalar => Scalar);
impl Arg for Option<Scalar> {
    type Ref<'a> = Option<Scalar>;
    const SCHEMA_TYPE: &'static str = "Scalar?";
    fn from_ivalue(v: &IValue) -> Option<Option<Scalar>> {
        match v {
            IValue::None => Some(None),
            other => other.as_scalar().map(Some),
        }
    }
    fn to_ivalue(r: Option<Scalar>) -> IValue {
        r.map_or(IValue::None, IValue::from)
    }
}
kernel_param!(Option<Scalar> => Option<Scalar>);

impl Arg for Tensor {
    type Ref<'a> = &'a Tensor;
    const SCHEMA_TYPE: &'static str = "Tensor";
    #[inline]
    fn from_ivalue(v: &IValue) -> Option<&Tensor> {
        v.as_tensor()
    }
    #[inline(always)]
    fn accepts(v: &IValue) -> bool {
        matches!(v, IValue::Tensor(_))
    }
    #[inline]
    fn to_ivalue(r: &Tensor) -> IValue {
        IValue::Tensor(r.clone())
    }
    #[inline(always)]
    fn key_set(r: &Tensor) -> DispatchKeySet {
        r.key_set()
    }
    #[inline(always)]
    unsafe fn drop_boxed(v: *mut IValue) {
        // SAFETY: guaranteed by the caller: `v` is valid, its value is ours to drop, and it is
        // a tensor (the only variant this family accepts): a reference count decrement.
        unsafe {
            match &mut *v {
                IValue::Tensor(t) => std::ptr::drop_in_place(t),
                _ => std::hint::unreachable_unchecked(),
            }
        }
    }
}
kernel_param!(&Tensor => Tensor);

impl Arg for Option<Tensor> {
    type Ref<'a> = Option<&'a Tensor>;
    const SCHEMA_TYPE: &'static str = "Tensor?";
    fn from_ivalue(v: &IValue) -> Option<Option<&Tensor>> {
        match v {
            IValue::None => Some(None),
            IValue::Tensor(t) => Some(Some(t)),
            _ => None,
        }
    }
    #[inline(always)]
    fn accepts(v: &IValue) -> bool {
        matches!(v, IValue::None | IValue::Tensor(_))
    }
    fn to_ivalue(r: Option<&Tensor>) -> IValue {
        r.map_or(IValue::None, |t| IValue::Tensor(t.clone()))
    }
    #[inline(always)]
    fn key_set(r: Option<&Tensor>) -> DispatchKeySet {
        r.map_or(DispatchKeySet::EMPTY, Tensor::key_set)
    }
}
kernel_param!(Option<&Tensor> => Option<Tensor>);

impl Arg for Generator {
    type Ref<'a> = &'a Generator;
    const SCHEMA_TYPE: &'static str = "Generator";
    fn from_ivalue(v: &IValue) -> Option<&Generator> {
        match v {
            IValue::Generator(g) => Some(g),
            _ => None,
        }
    }
    fn to_ivalue(r: &Generator) -> IValue {
        IValue::Generator(r.clone())
    }
}
kernel_param!(&Generator => Generator);

impl Arg for Option<Generator> {
    type Ref<'a> = Option<&'a Generator>;
    const SCHEMA_TYPE: &'static str = "Generator?";
    fn from_ivalue(v: &IValue) -> Option<Option<&Generator>> {
        match v {
            IValue::None => Some(None),
            IValue::Generator(g) => Some(Some(g)),
            _ => None,
        }
    }
    fn to_ivalue(r: Option<&Generator>) -> IValue {
        r.map_or(IValue::None, |g| IValue::Generator(g.clone()))
    }
}
kernel_param!(Option<&Generator> => Option<Generator>);

impl Arg for Vec<Tensor> {
    type Ref<'a> = &'a [Tensor];
    const SCHEMA_TYPE: &'static str = "Tensor[]";
    fn from_ivalue(v: &IValue) -> Option<&[Tensor]> {
        match v {
            IValue::TensorList(ts) => Some(ts),
            _ => None,
        }
    }
    fn to_ivalue(r: &[Tensor]) -> IValue {
        IValue::TensorList(r.into())
    }
    fn key_set(r: &[Tensor]) -> DispatchKeySet {
        r.iter()
            .fold(DispatchKeySet::EMPTY, |ks, t| ks | t.key_set())
    }
}
kernel_param!(&[Tensor] => Vec<Tensor>);

impl Arg for Vec<Option<Tensor>> {
    type Ref<'a> = &'a [Option<Tensor>];
    const SCHEMA_TYPE: &'static str = "Tensor?[]";
    fn from_ivalue(v: &IValue) -> Option<&[Option<Tensor>]> {
        match v {
            IValue::OptionalTensorList(ts) => Some(ts),
            _ => None,
        }
    }
    fn to_ivalue(r: &[Option<Tensor>]) -> IValue {
        IValue::OptionalTensorList(r.into())
    }
    fn key_set(r: &[Option<Tensor>]) -> DispatchKeySet {
        r.iter()
            .flatten()
            .fold(DispatchKeySet::EMPTY, |ks, t| ks | t.key_set())
    }
}
kernel_param!(&[Option<Tensor>] => Vec<Option<Tensor>>);

macro_rules! slice_arg {
    ($elem:ty, $name:literal, $variant:ident) => {
        impl Arg for Vec<$elem> {
            type Ref<'a> = &'a [$elem];
            const SCHEMA_TYPE: &'static str = $name;
            fn from_ivalue(v: &IValue) -> Option<&[$elem]> {
                match v {
                    IValue::$variant(xs) => Some(xs),
                    _ => None,
                }
            }
            fn to_ivalue(r: &[$elem]) -> IValue {
                IValue::$variant(r.into())
            }
        }
        kernel_param!(&[$elem] => Vec<$elem>);
        impl Arg for Option<Vec<$elem>> {
            type Ref<'a> = Option<&'a [$elem]>;
            const SCHEMA_TYPE: &'static str = concat!($name, "?");
            fn from_ivalue(v: &IValue) -> Option<Option<&[$elem]>> {
                match v {
                    IValue::None => Some(None),
                    IValue::$variant(xs) => Some(Some(xs)),
                    _ => None,
                }
            }
            fn to_ivalue(r: Option<&[$elem]>) -> IValue {
                r.map_or(IValue::None, |xs| IValue::$variant(xs.into()))
            }
        }
        kernel_param!(Option<&[$elem]> => Option<Vec<$elem>>);
    };
}

slice_arg!(i64, "int[]", IntList);
slice_arg!(f64, "float[]", DoubleList);
slice_arg!(bool, "bool[]", BoolList);

impl Arg for String {
    type Ref<'a> = &'a str;
    const SCHEMA_TYPE: &'static str = "str";
    fn from_ivalue(v: &IValue) -> Option<&str> {
        match v {
            IValue::Str(s) => Some(s.as_str()),
            _ => None,
        }
    }
    fn to_ivalue(r: &str) -> IValue {
        IValue::Str(Box::new(r.to_owned()))
    }
}
kernel_param!(&str => String);
impl Arg for Option<String> {
    type Ref<'a> = Option<&'a str>;
    const SCHEMA_TYPE: &'static str = "str?";
    fn from_ivalue(v: &IValue) -> Option<Option<&str>> {
        match v {
            IValue::None => Some(None),
            IValue::Str(s) => Some(Some(s.as_str())),
            _ => None,
        }
    }
    fn to_ivalue(r: Option<&str>) -> IValue {
        r.map_or(IValue::None, |s| IValue::Str(Box::new(s.to_owned())))
    }
}
kernel_param!(Option<&str> => Option<String>);

//! A schema argument's default as a boxed value: what a boxed caller pushes for an argument it
//! leaves out (the CLI's `call`, the operator-sample tests).

use switchboard_schema::{DefaultValue, Type};
use switchboard_tensor::{Device, Layout, MemoryFormat, ScalarType};
use thin_vec::ThinVec;

use crate::IValue;

impl IValue {
    /// The boxed form of a schema default of type `ty` (`n`: the fixed size of a list type,
    /// `int[2]`). Dtypes, layouts and memory formats are stored in schemas as PyTorch's
    /// integers; `int[2] x=1` is already expanded by the parser. `None` when the default has no
    /// boxed form of that type.
    ///
    /// ```
    /// use switchboard_dispatcher::{FunctionSchema, IValue};
    /// let s = FunctionSchema::parse("f(Tensor self, Scalar alpha=1, int[1] dim=[], ScalarType? dtype=None) -> Tensor").unwrap();
    /// let boxed = |i: usize| {
    ///     let a = &s.arguments()[i];
    ///     IValue::from_schema_default(a.default_value().unwrap(), a.ty(), a.n())
    /// };
    /// assert!(matches!(boxed(1), Some(IValue::Int(1))));
    /// assert!(matches!(boxed(2), Some(IValue::IntList(l)) if l.is_empty()));
    /// assert!(matches!(boxed(3), Some(IValue::None)));
    /// ```
    pub fn from_schema_default(d: &DefaultValue, ty: &Type, n: Option<i32>) -> Option<IValue> {
        Some(match (d, ty) {
            (DefaultValue::None, _) => IValue::None,
            (_, Type::Optional(inner)) => return IValue::from_schema_default(d, inner, n),
            (DefaultValue::Bool(b), _) => IValue::Bool(*b),
            (DefaultValue::Int(i), Type::Float) => IValue::Double(*i as f64),
            (DefaultValue::Int(i), Type::ScalarType) => {
                IValue::ScalarType(i8::try_from(*i).ok().and_then(ScalarType::from_i8)?)
            }
            (DefaultValue::Int(0), Type::Layout) => IValue::Layout(Layout::Strided),
            (DefaultValue::Int(i), Type::MemoryFormat) => IValue::MemoryFormat(match i {
                // c10::MemoryFormat's numbering.
                0 => MemoryFormat::Contiguous,
                1 => MemoryFormat::Preserve,
                2 => MemoryFormat::ChannelsLast,
                3 => MemoryFormat::ChannelsLast3d,
                _ => return None,
            }),
            // `int[1]? dim=3`: an optional list takes a single constant (PyTorch broadcasts it).
            (DefaultValue::Int(i), Type::List(elem))
                if matches!(**elem, Type::Int | Type::SymInt) =>
            {
                let len = usize::try_from(n.unwrap_or(1)).unwrap_or(1);
                IValue::IntList(std::iter::repeat_n(*i, len).collect())
            }
            (DefaultValue::Int(i), Type::Int | Type::SymInt | Type::Scalar) => IValue::Int(*i),
            (DefaultValue::Float(f), Type::Float | Type::Scalar) => IValue::Double(*f),
            (DefaultValue::Str(_), Type::Device) | (DefaultValue::Device(_), _) => {
                let text = match d {
                    DefaultValue::Device(dev) => dev.to_string(),
                    other => other.as_str()?.to_owned(),
                };
                IValue::Device(text.parse::<Device>().ok()?)
            }
            (DefaultValue::Str(_), Type::Str) => IValue::from(d.as_str()?),
            (DefaultValue::List(items), Type::List(elem)) => match &**elem {
                Type::Int | Type::SymInt => IValue::IntList(
                    items
                        .iter()
                        .map(|v| match v {
                            DefaultValue::Int(i) => Some(*i),
                            _ => None,
                        })
                        .collect::<Option<ThinVec<i64>>>()?,
                ),
                Type::Float => IValue::DoubleList(
                    items
                        .iter()
                        .map(|v| match v {
                            DefaultValue::Float(f) => Some(*f),
                            DefaultValue::Int(i) => Some(*i as f64),
                            _ => None,
                        })
                        .collect::<Option<ThinVec<f64>>>()?,
                ),
                Type::Bool => IValue::BoolList(
                    items
                        .iter()
                        .map(|v| match v {
                            DefaultValue::Bool(b) => Some(*b),
                            _ => None,
                        })
                        .collect::<Option<ThinVec<bool>>>()?,
                ),
                _ => return None,
            },
            _ => return None,
        })
    }
}

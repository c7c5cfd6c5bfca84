//! Reading `NAME=VALUE` texts and schema defaults as boxed values (`IValue`s), by the schema
//! type of the argument.

use std::collections::BTreeMap;
use std::num::IntErrorKind;

use switchboard::dispatcher::IValue;
use switchboard::schema::Type;
use switchboard::tensor::{Device, Generator, Layout, MemoryFormat, ScalarType, Tensor};

/// The tensors of the `--in` file, if one was given.
pub(super) type Inputs = Option<BTreeMap<String, Tensor>>;

/// Why a text is not a value of the argument's type.
#[derive(Debug)]
pub(super) enum ValueError {
    /// The text does not read as the type; the reason.
    Type(String),
    /// `@key` without an input file.
    NoInputFile(String),
    /// `@key` that the input file does not hold.
    UnknownTensor(String),
    /// The type cannot be written on the command line (or the default cannot be boxed).
    Unsupported,
}

type Result<T> = std::result::Result<T, ValueError>;

fn expected<T>(what: &str) -> Result<T> {
    Err(ValueError::Type(format!("expected {what}")))
}

/// Reads `text` as a value of schema type `ty`; `n` is the fixed size of a list type
/// (`int[2]`), for which a single int stands for `n` copies, as in PyTorch's Python API.
pub(super) fn parse_value(
    text: &str,
    ty: &Type,
    n: Option<i32>,
    inputs: &Inputs,
) -> Result<IValue> {
    let text = text.trim();
    match ty {
        Type::Optional(_) if text == "None" => Ok(IValue::None),
        Type::Optional(inner) => parse_value(text, inner, n, inputs),
        Type::NoneType if text == "None" => Ok(IValue::None),
        Type::NoneType => expected("None"),
        Type::Tensor => tensor_ref(text, inputs).map(IValue::Tensor),
        Type::Int | Type::SymInt => parse_int(text).map(IValue::Int),
        Type::Float => parse_float(text).map(IValue::Double),
        Type::Bool => parse_bool(text).map(IValue::Bool),
        Type::Str => Ok(IValue::from(unquote(text))),
        Type::Scalar => parse_scalar(text),
        Type::ScalarType => parse_dtype(text).map(IValue::ScalarType),
        Type::Layout => parse_layout(text).map(IValue::Layout),
        Type::MemoryFormat => parse_memory_format(text).map(IValue::MemoryFormat),
        Type::Device => parse_device(text).map(IValue::Device),
        Type::Generator => parse_seed(text).map(|seed| IValue::Generator(Generator::new(seed))),
        Type::List(elem) => parse_list(text, elem, n, inputs),
        _ => Err(ValueError::Unsupported),
    }
}

/// `@key`: the input file's tensor `key`.
fn tensor_ref(text: &str, inputs: &Inputs) -> Result<Tensor> {
    let Some(key) = text.strip_prefix('@') else {
        return expected("a tensor of the input file, written @KEY");
    };
    let tensors = inputs
        .as_ref()
        .ok_or_else(|| ValueError::NoInputFile(key.to_owned()))?;
    tensors
        .get(key)
        .cloned()
        .ok_or_else(|| ValueError::UnknownTensor(key.to_owned()))
}

/// An int literal. One beyond `i64` is an overflow, as in PyTorch's argument parser
/// ("Overflow when unpacking long"), never read as something else.
fn parse_int(text: &str) -> Result<i64> {
    text.parse::<i64>().map_err(|e| match e.kind() {
        IntErrorKind::PosOverflow | IntErrorKind::NegOverflow => int_overflow(),
        _ => ValueError::Type("expected an int".into()),
    })
}

fn int_overflow() -> ValueError {
    ValueError::Type("Overflow when unpacking long (an int must fit in int64)".into())
}

fn parse_float(text: &str) -> Result<f64> {
    // Rust's float syntax also takes `inf`, `-inf` and `nan`, as Python's `float()` does.
    text.parse::<f64>().or_else(|_| expected("a float"))
}

fn parse_bool(text: &str) -> Result<bool> {
    match text {
        "true" | "True" => Ok(true),
        "false" | "False" => Ok(false),
        _ => expected("true or false"),
    }
}

/// A `Scalar` is boxed as the kind of number written: bool, int or float.
fn parse_scalar(text: &str) -> Result<IValue> {
    if let Ok(b) = parse_bool(text) {
        return Ok(IValue::Bool(b));
    }
    match parse_int(text) {
        Ok(i) => return Ok(IValue::Int(i)),
        // An int literal too large for int64 is an error, not a float.
        Err(e) if is_int_literal(text) => return Err(e),
        Err(_) => {}
    }
    match text.parse::<f64>() {
        Ok(f) => Ok(IValue::Double(f)),
        Err(_) => expected("a number (an int, a float, true or false)"),
    }
}

/// Whether `text` is written as an integer (an optional sign, then digits).
fn is_int_literal(text: &str) -> bool {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Strips one pair of matching quotes, so that `mode="floor"` and `mode=floor` are the same.
fn unquote(text: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = text.strip_prefix(q).and_then(|t| t.strip_suffix(q)) {
            return inner;
        }
    }
    text
}

/// A generator's seed; a negative one wraps, as `torch.Generator().manual_seed(-1)` does.
fn parse_seed(text: &str) -> Result<u64> {
    text.parse::<u64>()
        .or_else(|_| text.parse::<i64>().map(|s| s as u64))
        .or_else(|_| match is_int_literal(text) {
            true => Err(ValueError::Type(
                "Overflow when unpacking long (a seed must fit in uint64)".into(),
            )),
            false => expected("a seed (an int) for a fresh CPU generator"),
        })
}

fn parse_dtype(text: &str) -> Result<ScalarType> {
    text.parse::<ScalarType>().or_else(|_| {
        let names: Vec<&str> = ScalarType::ALL.iter().map(|t| t.name()).collect();
        expected(&format!("a dtype ({})", names.join(", ")))
    })
}

fn parse_layout(text: &str) -> Result<Layout> {
    match text.strip_prefix("torch.").unwrap_or(text) {
        "strided" => Ok(Layout::Strided),
        _ => expected("a layout (strided)"),
    }
}

fn parse_memory_format(text: &str) -> Result<MemoryFormat> {
    match text.strip_prefix("torch.").unwrap_or(text) {
        "contiguous_format" => Ok(MemoryFormat::Contiguous),
        "channels_last" => Ok(MemoryFormat::ChannelsLast),
        "channels_last_3d" => Ok(MemoryFormat::ChannelsLast3d),
        "preserve_format" => Ok(MemoryFormat::Preserve),
        _ => expected(
            "a memory format (contiguous_format, channels_last, channels_last_3d, \
             preserve_format)",
        ),
    }
}

fn parse_device(text: &str) -> Result<Device> {
    unquote(text)
        .parse::<Device>()
        .map_err(|e| ValueError::Type(format!("expected a device (cpu, meta, ...): {e}")))
}

/// The items of `[a, b, c]` (or `(a, b, c)`), trimmed; `None` if `text` is not bracketed.
/// A trailing comma is allowed, as in Python.
fn list_items(text: &str) -> Option<Vec<&str>> {
    let inner = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .or_else(|| text.strip_prefix('(').and_then(|t| t.strip_suffix(')')))?;
    let inner = inner.trim();
    let inner = inner.strip_suffix(',').unwrap_or(inner);
    if inner.trim().is_empty() {
        return Some(Vec::new());
    }
    Some(inner.split(',').map(str::trim).collect())
}

fn parse_list(text: &str, elem: &Type, n: Option<i32>, inputs: &Inputs) -> Result<IValue> {
    let is_int = matches!(elem, Type::Int | Type::SymInt);
    let items = match list_items(text) {
        Some(items) => items,
        // PyTorch's Python API takes one int for a sized int list: `stride=2` is `[2, 2]`.
        None if is_int && n.is_some() => {
            let v = match parse_int(text) {
                Err(overflow) if is_int_literal(text) => return Err(overflow),
                r => r.or_else(|_| expected("an int or a list of ints like [1, 2]"))?,
            };
            let len = usize::try_from(n.unwrap_or(1)).unwrap_or(0);
            return Ok(IValue::IntList(vec![v; len].into()));
        }
        None => return expected(&format!("a list like [a, b] of {elem}")),
    };
    Ok(match elem {
        _ if is_int => IValue::IntList(items.iter().map(|s| parse_int(s)).collect::<Result<_>>()?),
        Type::Float => IValue::DoubleList(
            items
                .iter()
                .map(|s| parse_float(s))
                .collect::<Result<_>>()?,
        ),
        Type::Bool => IValue::BoolList(items.iter().map(|s| parse_bool(s)).collect::<Result<_>>()?),
        Type::Tensor => IValue::TensorList(
            items
                .iter()
                .map(|s| tensor_ref(s, inputs))
                .collect::<Result<_>>()?,
        ),
        Type::Optional(t) if **t == Type::Tensor => IValue::OptionalTensorList(
            items
                .iter()
                .map(|s| match *s {
                    "None" => Ok(None),
                    s => tensor_ref(s, inputs).map(Some),
                })
                .collect::<Result<_>>()?,
        ),
        other => IValue::GenericList(
            items
                .iter()
                .map(|s| parse_value(s, other, None, inputs))
                .collect::<Result<_>>()?,
        ),
    })
}

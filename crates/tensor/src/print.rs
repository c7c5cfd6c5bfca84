//! Printing tensors like PyTorch's `repr` (`torch/_tensor_str.py`): `tensor([[1., 2.],
//! [3., 4.]])`, common formatting of floats (integer mode, fixed, scientific), summaries with
//! `...` past 1000 elements, and the `dtype=`/`device=`/`size=` suffixes.

use crate::RawOps;
use std::fmt;

use crate::dtype::ScalarType;
use crate::error::Result;
use crate::tensor::Tensor;

/// Print options (`torch.set_printoptions`); the defaults are PyTorch's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrintOptions {
    /// Digits after the decimal point.
    pub precision: usize,
    /// Tensors with more elements than this are summarised.
    pub threshold: i64,
    /// Items shown at each end of a summarised dimension.
    pub edgeitems: i64,
    /// Characters per line.
    pub linewidth: usize,
    /// Force (`Some(true)`) or forbid (`Some(false)`) scientific notation.
    pub sci_mode: Option<bool>,
}

impl Default for PrintOptions {
    fn default() -> Self {
        PrintOptions {
            precision: 4,
            threshold: 1000,
            edgeitems: 3,
            linewidth: 80,
            sci_mode: None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Value {
    Float(f64),
    Int(i64),
    Bool(bool),
}

/// Python's `"{:.{p}e}".format(v)`: `1.0000e+08`.
fn py_exp(v: f64, precision: usize) -> String {
    if !v.is_finite() {
        return py_nonfinite(v);
    }
    let s = format!("{v:.precision$e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

/// Python's `"{:.{p}f}".format(v)`.
fn py_fixed(v: f64, precision: usize) -> String {
    if !v.is_finite() {
        return py_nonfinite(v);
    }
    format!("{v:.precision$}")
}

fn py_nonfinite(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v > 0.0 {
        "inf".into()
    } else {
        "-inf".into()
    }
}

fn plain(v: Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Bool(b) => if b { "True" } else { "False" }.into(),
        Value::Float(f) => py_fixed(f, 4),
    }
}

/// `_Formatter`: decides the common format of all (summarised) elements.
struct Formatter {
    floating: bool,
    int_mode: bool,
    sci_mode: bool,
    max_width: usize,
    precision: usize,
}

impl Formatter {
    fn new(values: &[Value], floating: bool, opts: &PrintOptions) -> Formatter {
        let mut f = Formatter {
            floating,
            int_mode: true,
            sci_mode: false,
            max_width: 1,
            precision: opts.precision,
        };
        let p = opts.precision;
        if !floating {
            for v in values {
                f.max_width = f.max_width.max(plain(*v).len());
            }
        } else {
            let vals: Vec<f64> = values
                .iter()
                .filter_map(|v| match v {
                    Value::Float(x) if x.is_finite() && *x != 0.0 => Some(*x),
                    _ => None,
                })
                .collect();
            if !vals.is_empty() {
                let min = vals.iter().fold(f64::INFINITY, |m, x| m.min(x.abs()));
                let max = vals.iter().fold(0.0f64, |m, x| m.max(x.abs()));
                f.int_mode = vals.iter().all(|x| *x == x.ceil());
                let width = |s: String| s.len();
                if f.int_mode {
                    if max / min > 1000.0 || max > 1.0e8 {
                        f.sci_mode = true;
                        f.max_width = vals.iter().map(|x| width(py_exp(*x, p))).max().unwrap_or(1);
                    } else {
                        f.max_width = vals
                            .iter()
                            .map(|x| width(py_fixed(*x, 0)) + 1)
                            .max()
                            .unwrap_or(1);
                    }
                } else if max / min > 1000.0 || max > 1.0e8 || min < 1.0e-4 {
                    f.sci_mode = true;
                    f.max_width = vals.iter().map(|x| width(py_exp(*x, p))).max().unwrap_or(1);
                } else {
                    f.max_width = vals
                        .iter()
                        .map(|x| width(py_fixed(*x, p)))
                        .max()
                        .unwrap_or(1);
                }
                f.max_width = f.max_width.max(1);
            }
        }
        if let Some(sci) = opts.sci_mode {
            f.sci_mode = sci;
        }
        f
    }

    fn format(&self, v: Value) -> String {
        let s = match v {
            Value::Float(x) if self.floating => {
                if self.sci_mode {
                    py_exp(x, self.precision)
                } else if self.int_mode {
                    let mut s = py_fixed(x, 0);
                    if x.is_finite() {
                        s.push('.');
                    }
                    s
                } else {
                    py_fixed(x, self.precision)
                }
            }
            other => plain(other),
        };
        format!("{s:>width$}", width = self.max_width)
    }
}

fn values(t: &Tensor) -> Result<Vec<Value>> {
    Ok(match t.dtype() {
        ScalarType::Bool => t.to_vec::<bool>()?.into_iter().map(Value::Bool).collect(),
        d if d.is_floating_point() => {
            // Half and BFloat16 print through float32, as PyTorch does.
            let v = t.to_vec_as::<f64>()?;
            if d == ScalarType::Double {
                v.into_iter().map(Value::Float).collect()
            } else {
                v.into_iter()
                    .map(|x| Value::Float(x as f32 as f64))
                    .collect()
            }
        }
        _ => t.to_vec_as::<i64>()?.into_iter().map(Value::Int).collect(),
    })
}

/// The elements PyTorch's `get_summarized_data` keeps, in order.
fn summarized(t: &Tensor, summarize: bool, edge: i64, out: &mut Vec<Value>) -> Result<()> {
    if t.dim() == 0 {
        out.extend(values(t)?);
        return Ok(());
    }
    let n = t.sizes()[0];
    if summarize && n > 2 * edge {
        if t.dim() == 1 {
            out.extend(values(&t.narrow(0, 0, edge)?)?);
            out.extend(values(&t.narrow(0, n - edge, edge)?)?);
        } else {
            for i in (0..edge).chain(n - edge..n) {
                summarized(&t.select(0, i)?, summarize, edge, out)?;
            }
        }
    } else if t.dim() == 1 || !summarize {
        out.extend(values(t)?);
    } else {
        for i in 0..n {
            summarized(&t.select(0, i)?, summarize, edge, out)?;
        }
    }
    Ok(())
}

fn vector_str(
    t: &Tensor,
    indent: usize,
    summarize: bool,
    f: &Formatter,
    opts: &PrintOptions,
) -> Result<String> {
    let element_length = f.max_width + 2;
    let per_line = (opts.linewidth.saturating_sub(indent) / element_length).max(1);
    let n = t.sizes()[0];
    let edge = opts.edgeitems;
    let data: Vec<String> = if summarize && edge == 0 {
        vec!["...".into()]
    } else if summarize && n > 2 * edge {
        let mut d: Vec<String> = values(&t.narrow(0, 0, edge)?)?
            .into_iter()
            .map(|v| f.format(v))
            .collect();
        d.push(" ...".into());
        d.extend(
            values(&t.narrow(0, n - edge, edge)?)?
                .into_iter()
                .map(|v| f.format(v)),
        );
        d
    } else {
        values(t)?.into_iter().map(|v| f.format(v)).collect()
    };
    let lines: Vec<String> = data.chunks(per_line).map(|c| c.join(", ")).collect();
    Ok(format!(
        "[{}]",
        lines.join(&format!(",\n{}", " ".repeat(indent + 1)))
    ))
}

fn tensor_str_with(
    t: &Tensor,
    indent: usize,
    summarize: bool,
    f: &Formatter,
    opts: &PrintOptions,
) -> Result<String> {
    match t.dim() {
        0 => Ok(f.format(values(t)?[0])),
        1 => vector_str(t, indent, summarize, f, opts),
        dim => {
            let n = t.sizes()[0];
            let edge = opts.edgeitems;
            let mut slices = Vec::new();
            if summarize && n > 2 * edge {
                for i in 0..edge {
                    slices.push(tensor_str_with(
                        &t.select(0, i)?,
                        indent + 1,
                        summarize,
                        f,
                        opts,
                    )?);
                }
                slices.push("...".into());
                for i in n - edge..n {
                    slices.push(tensor_str_with(
                        &t.select(0, i)?,
                        indent + 1,
                        summarize,
                        f,
                        opts,
                    )?);
                }
            } else {
                for i in 0..n {
                    slices.push(tensor_str_with(
                        &t.select(0, i)?,
                        indent + 1,
                        summarize,
                        f,
                        opts,
                    )?);
                }
            }
            let sep = format!(",{}{}", "\n".repeat(dim - 1), " ".repeat(indent + 1));
            Ok(format!("[{}]", slices.join(&sep)))
        }
    }
}

fn tensor_str(t: &Tensor, indent: usize, opts: &PrintOptions) -> Result<String> {
    if t.numel() == 0 {
        return Ok("[]".into());
    }
    let summarize = t.numel() > opts.threshold;
    let mut vals = Vec::new();
    summarized(t, summarize, opts.edgeitems, &mut vals)?;
    let f = Formatter::new(&vals, t.dtype().is_floating_point(), opts);
    tensor_str_with(t, indent, summarize, &f, opts)
}

fn shape_tuple(sizes: &[i64]) -> String {
    match sizes {
        [one] => format!("({one},)"),
        _ => {
            let s: Vec<String> = sizes.iter().map(|x| x.to_string()).collect();
            format!("({})", s.join(", "))
        }
    }
}

fn add_suffixes(
    tensor_str: String,
    suffixes: &[String],
    indent: usize,
    linewidth: usize,
) -> String {
    let mut out = tensor_str.clone();
    // Python: len(s) - s.rfind("\n") + 1, with rfind = -1 when there is no newline.
    let rfind = tensor_str.rfind('\n').map(|i| i as i64).unwrap_or(-1);
    let mut last_line_len = (tensor_str.len() as i64 - rfind + 1) as usize;
    for suffix in suffixes {
        if last_line_len + suffix.len() + 2 > linewidth {
            out.push_str(&format!(",\n{}{suffix}", " ".repeat(indent)));
            last_line_len = indent + suffix.len();
        } else {
            out.push_str(&format!(", {suffix}"));
            last_line_len += suffix.len() + 2;
        }
    }
    out.push(')');
    out
}

impl Tensor {
    /// The tensor's `repr` with the given options (see the [`Display`](fmt::Display) impl).
    pub fn repr_with(&self, opts: &PrintOptions) -> Result<String> {
        let prefix = "tensor(";
        let indent = prefix.len();
        let mut suffixes = Vec::new();
        if !self.is_cpu() {
            suffixes.push(format!("device='{}'", self.device()));
        }
        let default_dtype = ScalarType::Float;
        let has_default_dtype = matches!(
            self.dtype(),
            ScalarType::Float | ScalarType::Long | ScalarType::Bool
        );
        // A device without data here may provide the values (Note [Host copies of tensors
        // without data]); the suffixes still describe this tensor.
        let host = crate::host::host_copy(self).transpose()?;
        let data = host.as_ref().unwrap_or(self);
        let body = if !data.has_data() {
            suffixes.push(format!("size={}", shape_tuple(self.sizes())));
            if self.dtype() != default_dtype {
                suffixes.push(format!("dtype={}", self.dtype()));
            }
            "...".to_string()
        } else if self.numel() == 0 {
            if self.dim() != 1 {
                suffixes.push(format!("size={}", shape_tuple(self.sizes())));
            }
            if self.dtype() != default_dtype {
                suffixes.push(format!("dtype={}", self.dtype()));
            }
            "[]".to_string()
        } else {
            if opts.edgeitems == 0 {
                suffixes.push(format!("size={}", shape_tuple(self.sizes())));
            }
            if !has_default_dtype {
                suffixes.push(format!("dtype={}", self.dtype()));
            }
            tensor_str(data, indent, opts)?
        };
        Ok(add_suffixes(
            format!("{prefix}{body}"),
            &suffixes,
            indent,
            opts.linewidth,
        ))
    }
}

impl fmt::Display for Tensor {
    /// Like PyTorch's `repr(tensor)` with default print options:
    ///
    /// ```
    /// use switchboard_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// assert_eq!(t.to_string(), "tensor([[1., 2.],\n        [3., 4.]])");
    /// let i = Tensor::from_vec(vec![1i32, 2], &[2]).unwrap();
    /// assert_eq!(i.to_string(), "tensor([1, 2], dtype=torch.int32)");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.repr_with(&PrintOptions::default()) {
            Ok(s) => f.write_str(&s),
            Err(e) => write!(f, "tensor(<unprintable: {e}>)"),
        }
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;

    fn f32s(v: &[f32], sizes: &[i64]) -> String {
        Tensor::from_slice(v, sizes).unwrap().to_string()
    }

    #[test]
    fn float_modes() {
        assert_eq!(f32s(&[1.0, 2.0, 3.0], &[3]), "tensor([1., 2., 3.])");
        assert_eq!(f32s(&[1.5, 2.25], &[2]), "tensor([1.5000, 2.2500])");
        assert_eq!(f32s(&[0.0, 0.0], &[2]), "tensor([0., 0.])");
        assert_eq!(f32s(&[1e-5, 1.0], &[2]), "tensor([1.0000e-05, 1.0000e+00])");
        assert_eq!(f32s(&[1.0, 1e9], &[2]), "tensor([1.0000e+00, 1.0000e+09])");
        assert_eq!(f32s(&[-1.0, 10.0], &[2]), "tensor([-1., 10.])");
        assert_eq!(
            f32s(&[f32::NAN, 1.0, f32::INFINITY], &[3]),
            "tensor([nan, 1., inf])"
        );
        assert_eq!(
            f32s(&[0.1, 2.5, -3.0], &[3]),
            "tensor([ 0.1000,  2.5000, -3.0000])"
        );
        assert_eq!(f32s(&[3.5], &[]), "tensor(3.5000)");
        assert_eq!(f32s(&[-0.0], &[1]), "tensor([-0.])");
    }

    #[test]
    fn dtypes_and_devices() {
        let t = Tensor::from_vec(vec![1i64, -20, 3], &[3]).unwrap();
        assert_eq!(t.to_string(), "tensor([  1, -20,   3])");
        let b = Tensor::from_vec(vec![true, false], &[2]).unwrap();
        assert_eq!(b.to_string(), "tensor([ True, False])");
        let d = Tensor::from_vec(vec![1.0f64, 2.5], &[2]).unwrap();
        assert_eq!(
            d.to_string(),
            "tensor([1.0000, 2.5000], dtype=torch.float64)"
        );
        let h = Tensor::full(&[2], 0.5, ScalarType::Half).unwrap();
        assert_eq!(
            h.to_string(),
            "tensor([0.5000, 0.5000], dtype=torch.float16)"
        );
        let m = Tensor::zeros_on(&[2, 3], ScalarType::Float, Device::META).unwrap();
        assert_eq!(m.to_string(), "tensor(..., device='meta', size=(2, 3))");
        let m = Tensor::zeros_on(&[2], ScalarType::Int, Device::META).unwrap();
        assert_eq!(
            m.to_string(),
            "tensor(..., device='meta', size=(2,), dtype=torch.int32)"
        );
        let e = Tensor::zeros(&[0, 2], ScalarType::Long).unwrap();
        assert_eq!(e.to_string(), "tensor([], size=(0, 2), dtype=torch.int64)");
        let e = Tensor::zeros(&[0], ScalarType::Float).unwrap();
        assert_eq!(e.to_string(), "tensor([])");
    }

    #[test]
    fn nested_and_summarised() {
        let t = Tensor::arange(0, 24, 1, None)
            .unwrap()
            .view(&[2, 3, 4])
            .unwrap();
        assert_eq!(
            t.to_string(),
            "tensor([[[ 0,  1,  2,  3],\n         [ 4,  5,  6,  7],\n         [ 8,  9, 10, 11]],\n\n        [[12, 13, 14, 15],\n         [16, 17, 18, 19],\n         [20, 21, 22, 23]]])"
        );
        let big = Tensor::arange(0, 2000, 1, None).unwrap();
        assert_eq!(
            big.to_string(),
            "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"
        );
        let big = Tensor::arange(1000, 3000, 1, Some(ScalarType::Float))
            .unwrap()
            .view(&[40, 50])
            .unwrap();
        assert_eq!(
            big.to_string(),
            "tensor([[1000., 1001., 1002.,  ..., 1047., 1048., 1049.],\n        \
             [1050., 1051., 1052.,  ..., 1097., 1098., 1099.],\n        \
             [1100., 1101., 1102.,  ..., 1147., 1148., 1149.],\n        \
             ...,\n        \
             [2850., 2851., 2852.,  ..., 2897., 2898., 2899.],\n        \
             [2900., 2901., 2902.,  ..., 2947., 2948., 2949.],\n        \
             [2950., 2951., 2952.,  ..., 2997., 2998., 2999.]])"
        );
        // Ratio max/min > 1000: scientific notation.
        let sci = Tensor::arange(0, 2000, 1, Some(ScalarType::Float)).unwrap();
        assert!(sci
            .to_string()
            .starts_with("tensor([0.0000e+00, 1.0000e+00,"));
    }

    #[test]
    fn line_wrapping() {
        let t = Tensor::arange(0, 30, 1, Some(ScalarType::Float)).unwrap();
        let s = t.to_string();
        assert_eq!(
            s,
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n        28., 29.])"
        );
    }
}

//! Printing tensors like PyTorch's `repr` (`torch/_tensor_str.py`): `tensor([[1., 2.],
//! [3., 4.]])`, common formatting of floats (integer mode, fixed, scientific), summaries with
//! `...` past 1000 elements, and the `dtype=`/`device=`/`size=` suffixes.

use crate::RawOps;
use std::fmt;

use crate::dispatch_dtype;
use crate::dtype::{Element, ScalarType};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::ComplexElement;

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
    /// The real and imaginary parts of a complex element.
    Complex(f64, f64),
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
        Value::Complex(re, im) => format!("{}+{}j", py_fixed(re, 4), py_fixed(im, 4)),
    }
}

/// `_Formatter`: decides the common format of all (summarised) elements. A complex tensor's
/// real parts have one and its imaginary parts another (`imag`), as in PyTorch.
struct Formatter {
    floating: bool,
    int_mode: bool,
    sci_mode: bool,
    max_width: usize,
    precision: usize,
    imag: Option<Box<Formatter>>,
}

impl Formatter {
    /// The formatter of a complex tensor's values: one over the real parts, one over the
    /// imaginary parts.
    fn complex(values: &[Value], opts: &PrintOptions) -> Formatter {
        let part = |pick: fn(f64, f64) -> f64| -> Vec<Value> {
            values
                .iter()
                .filter_map(|v| match v {
                    Value::Complex(re, im) => Some(Value::Float(pick(*re, *im))),
                    _ => None,
                })
                .collect()
        };
        let mut real = Formatter::new(&part(|re, _| re), true, opts);
        real.imag = Some(Box::new(Formatter::new(&part(|_, im| im), true, opts)));
        real
    }

    /// The width of an element in a row: for complex elements, the real part's width, the
    /// imaginary part's and its `j` (PyTorch's `_vector_str`).
    fn element_width(&self) -> usize {
        self.max_width + self.imag.as_ref().map_or(0, |i| i.max_width + 1)
    }

    fn new(values: &[Value], floating: bool, opts: &PrintOptions) -> Formatter {
        let mut f = Formatter {
            floating,
            int_mode: true,
            sci_mode: false,
            max_width: 1,
            precision: opts.precision,
            imag: None,
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
        if let (Value::Complex(re, im), Some(imag)) = (v, &self.imag) {
            // PyTorch's `_scalar_str`/`_vector_str`: the padded real part, then the imaginary
            // part with its `j`, unpadded and signed.
            let real = self.format(Value::Float(re));
            let imag = format!("{}j", imag.format(Value::Float(im)));
            let imag = imag.trim_start();
            return if imag.starts_with(['+', '-']) {
                format!("{real}{imag}")
            } else {
                format!("{real}+{imag}")
            };
        }
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
        d if d.is_complex() => dispatch_dtype!(d, _T => Vec::new(), C => {
            let v = t.to_vec::<C>()?;
            v.into_iter()
                .map(|z| Value::Complex(z.re().to_f64(), z.im().to_f64()))
                .collect()
        }),
        _ => t.to_vec_as::<i64>()?.into_iter().map(Value::Int).collect(),
    })
}

// Note [Printing without recursion]
// PyTorch's `_tensor_str` recurses once per dimension, each level holding a sliced view of
// the level above and building its string from its children's. A tensor of very high rank (a
// 20,000-dim `[1, 1, ...]` tensor is 60 KB of safetensors) would then overflow the stack and
// copy its nested strings once per level (memory and time in the square of the rank). Here the
// nesting is walked with one index per dimension (`Walk`): each row (a 1-d fiber along the
// last dimension) is a view made from the tensor's strides, and everything is written into one
// string, so memory is linear in the rank and in the output.

/// One step of the walk over the printed (possibly summarised) nesting of a tensor of two
/// dimensions or more, in print order.
enum Step {
    /// `[` of a sub-tensor at dimension `d`.
    Open,
    /// `]` of the innermost open sub-tensor.
    Close,
    /// The separator before the next item at dimension `d`.
    Sep(usize),
    /// The `...` standing for the skipped items of a summarised dimension.
    Ellipsis,
    /// A row: the last dimension at the current index (a 1-d view).
    Row(Tensor),
}

/// The items shown along a dimension of size `n`: `n` indices, or (summarised) `edge` at each
/// end around an ellipsis. `item(k)` is `None` for the ellipsis.
struct Items {
    n: i64,
    split: bool,
    edge: i64,
}

impl Items {
    fn new(n: i64, summarize: bool, edge: i64) -> Items {
        Items {
            n,
            split: summarize && n > 2 * edge,
            edge,
        }
    }
    fn count(&self) -> i64 {
        if self.split {
            2 * self.edge + 1
        } else {
            self.n
        }
    }
    fn item(&self, k: i64) -> Option<i64> {
        match self.split {
            false => Some(k),
            true if k < self.edge => Some(k),
            true if k == self.edge => None,
            true => Some(self.n - 2 * self.edge - 1 + k),
        }
    }
}

/// Walks `t` (two dimensions or more) as Note [Printing without recursion] says, calling
/// `step` for each step.
fn walk(
    t: &Tensor,
    summarize: bool,
    edge: i64,
    mut step: impl FnMut(Step) -> Result<()>,
) -> Result<()> {
    let (sizes, strides) = (t.sizes(), t.strides());
    let last = sizes.len() - 1;
    let items: Vec<Items> = sizes[..last]
        .iter()
        .map(|&n| Items::new(n, summarize, edge))
        .collect();
    // The position in each dimension's items, and the storage offset of the current index
    // up to each dimension (`base[d]`: before dimension d's index is added).
    let mut pos = vec![0i64; last];
    let mut base = vec![t.storage_offset(); last + 1];
    let mut d = 0;
    step(Step::Open)?;
    loop {
        if pos[d] == items[d].count() {
            step(Step::Close)?;
            if d == 0 {
                return Ok(());
            }
            d -= 1;
            pos[d] += 1;
            continue;
        }
        if pos[d] > 0 {
            step(Step::Sep(d))?;
        }
        match items[d].item(pos[d]) {
            None => {
                step(Step::Ellipsis)?;
                pos[d] += 1;
            }
            Some(i) => {
                // In bounds: `i` indexes an existing dimension (Note [Tensor bounds invariant]).
                base[d + 1] = base[d] + i * strides[d];
                if d + 1 == last {
                    step(Step::Row(t.as_strided(
                        &sizes[last..],
                        &strides[last..],
                        base[last],
                    )?))?;
                    pos[d] += 1;
                } else {
                    d += 1;
                    pos[d] = 0;
                    step(Step::Open)?;
                }
            }
        }
    }
}

/// The values of one row that PyTorch's `get_summarized_data` keeps.
fn row_values(row: &Tensor, summarize: bool, edge: i64, out: &mut Vec<Value>) -> Result<()> {
    let n = row.sizes()[0];
    if summarize && n > 2 * edge {
        out.extend(values(&row.narrow(0, 0, edge)?)?);
        out.extend(values(&row.narrow(0, n - edge, edge)?)?);
    } else {
        out.extend(values(row)?);
    }
    Ok(())
}

/// The elements PyTorch's `get_summarized_data` keeps, in order.
fn summarized(t: &Tensor, summarize: bool, edge: i64, out: &mut Vec<Value>) -> Result<()> {
    match t.dim() {
        0 => out.extend(values(t)?),
        _ if !summarize => out.extend(values(t)?),
        1 => row_values(t, summarize, edge, out)?,
        _ => walk(t, summarize, edge, |step| match step {
            Step::Row(row) => row_values(&row, summarize, edge, out),
            _ => Ok(()),
        })?,
    }
    Ok(())
}

fn vector_str(
    t: &Tensor,
    indent: usize,
    summarize: bool,
    f: &Formatter,
    opts: &PrintOptions,
    out: &mut String,
) -> Result<()> {
    let element_length = f.element_width() + 2;
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
    out.push('[');
    for (i, line) in data.chunks(per_line).enumerate() {
        if i > 0 {
            out.push_str(",\n");
            push_repeated(out, ' ', indent + 1);
        }
        out.push_str(&line.join(", "));
    }
    out.push(']');
    Ok(())
}

fn push_repeated(out: &mut String, c: char, n: usize) {
    out.extend(std::iter::repeat_n(c, n));
}

/// Writes the nested lists of `t` (without the `tensor(` prefix), starting at column `indent`.
fn tensor_str_with(
    t: &Tensor,
    indent: usize,
    summarize: bool,
    f: &Formatter,
    opts: &PrintOptions,
    out: &mut String,
) -> Result<()> {
    let dim = t.dim();
    match dim {
        0 => out.push_str(&f.format(values(t)?[0])),
        1 => vector_str(t, indent, summarize, f, opts, out)?,
        _ => walk(t, summarize, opts.edgeitems, |step| {
            match step {
                Step::Open => out.push('['),
                Step::Close => out.push(']'),
                // A sub-tensor at dimension `d` has `dim - d` dimensions and starts at column
                // `indent + d`: PyTorch's separator is `,`, one newline per dimension below
                // the items, and the column of the items.
                Step::Sep(d) => {
                    out.push(',');
                    push_repeated(out, '\n', dim - d - 1);
                    push_repeated(out, ' ', indent + d + 1);
                }
                Step::Ellipsis => out.push_str("..."),
                Step::Row(row) => vector_str(&row, indent + dim - 1, summarize, f, opts, out)?,
            }
            Ok(())
        })?,
    }
    Ok(())
}

fn tensor_str(t: &Tensor, indent: usize, opts: &PrintOptions) -> Result<String> {
    if t.numel() == 0 {
        return Ok("[]".into());
    }
    let summarize = t.numel() > opts.threshold;
    let mut vals = Vec::new();
    summarized(t, summarize, opts.edgeitems, &mut vals)?;
    let f = if t.dtype().is_complex() {
        Formatter::complex(&vals, opts)
    } else {
        Formatter::new(&vals, t.dtype().is_floating_point(), opts)
    };
    let mut out = String::new();
    tensor_str_with(t, indent, summarize, &f, opts, &mut out)?;
    Ok(out)
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
        // PyTorch's defaults: float32, its complex type complex64, int64 and bool.
        let has_default_dtype = matches!(
            self.dtype(),
            ScalarType::Float | ScalarType::ComplexFloat | ScalarType::Long | ScalarType::Bool
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

    /// Complex tensors print as PyTorch 2.15 prints them (outputs recorded from `repr`).
    #[test]
    fn complex_tensors() {
        use crate::{Complex32, Complex64};
        let c = |v: &[(f32, f32)], sizes: &[i64]| {
            let v = v.iter().map(|&(re, im)| Complex32::new(re, im)).collect();
            Tensor::from_vec::<Complex32>(v, sizes).unwrap().to_string()
        };
        assert_eq!(
            c(&[(1.0, 2.0), (3.5, -1.0)], &[2]),
            "tensor([1.0000+2.j, 3.5000-1.j])"
        );
        assert_eq!(
            c(&[(1.123456, 2.0), (-3.5e-5, -1e6)], &[2]),
            "tensor([ 1.1235e+00+2.0000e+00j, -3.5000e-05-1.0000e+06j])"
        );
        assert_eq!(c(&[(2.0, -0.5)], &[]), "tensor(2.-0.5000j)");
        assert_eq!(
            c(&[(f32::NAN, 1.0), (f32::NAN, f32::NEG_INFINITY)], &[2]),
            "tensor([nan+1.j, nan-infj])"
        );
        let wide: Vec<(f32, f32)> = (0..30).map(|i| (i as f32, i as f32)).collect();
        assert_eq!(
            c(&wide, &[30]),
            "tensor([ 0.+0.j,  1.+1.j,  2.+2.j,  3.+3.j,  4.+4.j,  5.+5.j,  6.+6.j,  7.+7.j,\n         \
             8.+8.j,  9.+9.j, 10.+10.j, 11.+11.j, 12.+12.j, 13.+13.j, 14.+14.j, 15.+15.j,\n        \
             16.+16.j, 17.+17.j, 18.+18.j, 19.+19.j, 20.+20.j, 21.+21.j, 22.+22.j, 23.+23.j,\n        \
             24.+24.j, 25.+25.j, 26.+26.j, 27.+27.j, 28.+28.j, 29.+29.j])"
        );
        let d: Vec<Complex64> = [(1.5, 2.0), (3.0, -1.0), (0.0, 0.0), (0.0, 1.0)]
            .iter()
            .map(|&(re, im)| Complex64::new(re, im))
            .collect();
        assert_eq!(
            Tensor::from_vec(d, &[2, 2]).unwrap().to_string(),
            "tensor([[1.5000+2.j, 3.0000-1.j],\n        [0.0000+0.j, 0.0000+1.j]], dtype=torch.complex128)"
        );
        let e = Tensor::zeros(&[0], ScalarType::ComplexFloat).unwrap();
        assert_eq!(e.to_string(), "tensor([], dtype=torch.complex64)");
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
    fn high_rank_prints_in_linear_time_and_memory() {
        // Issue #22: a 20,000-dim tensor overflowed the stack.
        let rank = 20_000;
        let t = Tensor::from_vec(vec![7i64], &vec![1; rank]).unwrap();
        let s = t.to_string();
        assert_eq!(
            s,
            format!("tensor({}7{})", "[".repeat(rank), "]".repeat(rank))
        );
        // Two items at the top: the separator has one newline per dimension below.
        let t = Tensor::from_vec(vec![1i64, 2], &[vec![2], vec![1; 999]].concat()).unwrap();
        let s = t.to_string();
        let sep = format!(",{}{}", "\n".repeat(999), " ".repeat(8));
        assert!(
            s.contains(&format!("1{}{sep}{}2", "]".repeat(999), "[".repeat(999))),
            "{s:.40}"
        );
        // Summarised along a high-rank shape.
        let t = Tensor::arange(0, 2000, 1, None)
            .unwrap()
            .view(&[vec![2000], vec![1; 500]].concat())
            .unwrap();
        let s = t.to_string();
        assert!(s.contains(",\n"), "{s:.40}");
        assert_eq!(s.matches("...").count(), 1);
    }

    #[test]
    fn views_print_their_own_elements() {
        let t = Tensor::arange(0, 24, 1, None)
            .unwrap()
            .view(&[2, 3, 4])
            .unwrap();
        let v = t.permute(&[2, 0, 1]).unwrap().select(1, 1).unwrap();
        assert_eq!(
            v.to_string(),
            "tensor([[12, 16, 20],\n        [13, 17, 21],\n        [14, 18, 22],\n        [15, 19, 23]])"
        );
        let s = t.slice(2, Some(1), None, 2).unwrap();
        assert_eq!(
            s.to_string(),
            "tensor([[[ 1,  3],\n         [ 5,  7],\n         [ 9, 11]],\n\n        [[13, 15],\n         [17, 19],\n         [21, 23]]])"
        );
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

//! [`FlopCounterMode`]: PyTorch's `torch.utils.flop_counter.FlopCounterMode`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::rc::Rc;

use switchboard_dispatcher::{DispatchKey, DispatchKeySet, IValue, OperatorHandle, Result, Stack};

use crate::{push, DispatchMode};

/// A FLOP formula: the operator's boxed arguments and outputs to a count.
pub type FlopFormula = fn(args: &[IValue], outputs: &[IValue]) -> Option<u64>;

/// Counts the theoretical FLOPs of the operators it sees, by PyTorch's formulas (dense, naive:
/// a matrix product of `m x k` by `k x n` is `2 m n k`; bias terms are not counted), totalled
/// per operator (the overload packet, `aten::mm`). Operators without a formula count zero,
/// except those with a CompositeImplicitAutograd kernel (`matmul`, `linear`), which are
/// decomposed with the counter still active and counted through their parts, as PyTorch's
/// `FlopCounterMode` does with `func.decompose()`.
///
/// ```
/// use switchboard_cpu as _; // links the CPU kernels
/// use switchboard_modes::{push_mode, FlopCounterMode};
/// use switchboard_ops as ops;
///
/// let (a, b) = (ops::ones(&[8, 16])?, ops::ones(&[16, 4])?);
/// let flops = FlopCounterMode::new(); // an Rc: the mode needs a handle to itself
/// {
///     let _mode = push_mode(flops.clone());
///     ops::mm(&a, &b)?;
/// }
/// assert_eq!(flops.total_flops(), 2 * 8 * 16 * 4);
/// assert_eq!(flops.flop_counts()["aten::mm"], 1024);
/// # Ok::<(), switchboard_dispatcher::DispatchError>(())
/// ```
pub struct FlopCounterMode {
    counts: RefCell<BTreeMap<String, u64>>,
    formulas: RefCell<BTreeMap<&'static str, FlopFormula>>,
    /// A handle to itself, to push while decomposing (set by [`FlopCounterMode::new`]).
    this: RefCell<std::rc::Weak<FlopCounterMode>>,
}

impl FlopCounterMode {
    /// A counter at zero with PyTorch's formulas (`mm`, `addmm`, `bmm`, `baddbmm`,
    /// `convolution`, `_convolution`, `convolution_backward`, and the CPU's fused attention
    /// `_scaled_dot_product_flash_attention_for_cpu` with its backward).
    pub fn new() -> Rc<FlopCounterMode> {
        let mut formulas: BTreeMap<&'static str, FlopFormula> = BTreeMap::new();
        formulas.insert("aten::mm", mm_flop);
        formulas.insert("aten::addmm", addmm_flop);
        formulas.insert("aten::bmm", bmm_flop);
        formulas.insert("aten::baddbmm", baddbmm_flop);
        formulas.insert("aten::convolution", conv_flop);
        formulas.insert("aten::_convolution", conv_flop);
        formulas.insert("aten::convolution_backward", conv_backward_flop);
        formulas.insert(
            "aten::_scaled_dot_product_flash_attention_for_cpu",
            sdpa_flop,
        );
        formulas.insert(
            "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
            sdpa_backward_flop,
        );
        let mode = Rc::new(FlopCounterMode {
            counts: RefCell::new(BTreeMap::new()),
            formulas: RefCell::new(formulas),
            this: RefCell::new(std::rc::Weak::new()),
        });
        *mode.this.borrow_mut() = Rc::downgrade(&mode);
        mode
    }

    /// Adds (or replaces) the formula of an operator (`"myops::scale"`, no overload):
    /// `register_flop_formula`.
    pub fn register_formula(&self, op: &'static str, formula: FlopFormula) {
        self.formulas.borrow_mut().insert(op, formula);
    }

    /// FLOPs per operator (`get_flop_counts()["Global"]`), operators with a formula only.
    pub fn flop_counts(&self) -> BTreeMap<String, u64> {
        self.counts.borrow().clone()
    }

    /// The sum over operators (`get_total_flops`).
    pub fn total_flops(&self) -> u64 {
        self.counts.borrow().values().sum()
    }

    /// Starts again from zero.
    pub fn reset(&self) {
        self.counts.borrow_mut().clear();
    }

    /// A table of the counts: one line per operator with its FLOPs and share of the total, the
    /// total first (`get_table`).
    pub fn table(&self) -> String {
        let counts = self.counts.borrow();
        let total = self.total_flops();
        let width = counts.keys().map(String::len).max().unwrap_or(0).max(6);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<width$}  {:>16}  {:>7}",
            "Operator", "FLOPs", "% Total"
        );
        let _ = writeln!(out, "{:<width$}  {:>16}  {:>7}", "Global", total, "100.00%");
        let mut rows: Vec<_> = counts.iter().collect();
        rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (op, flops) in rows {
            let share = if total == 0 {
                0.0
            } else {
                100.0 * *flops as f64 / total as f64
            };
            let _ = writeln!(out, "{op:<width$}  {flops:>16}  {share:>6.2}%");
        }
        out
    }
}

impl DispatchMode for FlopCounterMode {
    fn dispatch(&self, op: &OperatorHandle, keys: DispatchKeySet, stack: &mut Stack) -> Result<()> {
        let packet = op.name().name().to_owned();
        let formula = self.formulas.borrow().get(packet.as_str()).copied();
        let Some(formula) = formula else {
            // No formula: a CompositeImplicitAutograd operator runs its decomposition with the
            // counter active again (its parts reach the Python key and are counted); others
            // run below, the counter popped.
            if op.has_kernel_for_dispatch_key(DispatchKey::CompositeImplicitAutograd) {
                if let Some(this) = self.this.borrow().upgrade() {
                    push(this.clone());
                    let _pop = PopOnDrop(this);
                    return op.redispatch_boxed(
                        keys & DispatchKeySet::full_after(DispatchKey::Python),
                        stack,
                    );
                }
            }
            return op.call_boxed(stack);
        };
        let n_args = op
            .schema()
            .map_or(0, |r| r.schema.arguments().len())
            .min(stack.len());
        let base = stack.len() - n_args;
        let args: Vec<IValue> = stack[base..].to_vec();
        op.call_boxed(stack)?;
        if let Some(flops) = formula(&args, stack.get(base..).unwrap_or_default()) {
            *self.counts.borrow_mut().entry(packet).or_insert(0) += flops;
        }
        Ok(())
    }
}

/// Removes the mode pushed for a decomposition.
struct PopOnDrop(Rc<FlopCounterMode>);

impl Drop for PopOnDrop {
    fn drop(&mut self) {
        let _ = crate::stack::pop_if(&(self.0.clone() as Rc<dyn DispatchMode>));
    }
}

fn shape(v: &IValue) -> Option<&[i64]> {
    v.as_tensor().map(|t| t.sizes())
}

fn product(dims: &[i64]) -> u64 {
    dims.iter().map(|&d| d.max(0) as u64).product()
}

/// `2 m n k` for `[m, k] @ [k, n]`.
fn mm_count(a: &[i64], b: &[i64]) -> Option<u64> {
    match (a, b) {
        (&[m, k], &[k2, n]) if k == k2 => Some(2 * product(&[m, n, k])),
        _ => None,
    }
}

fn mm_flop(args: &[IValue], _out: &[IValue]) -> Option<u64> {
    mm_count(shape(args.first()?)?, shape(args.get(1)?)?)
}

fn addmm_flop(args: &[IValue], _out: &[IValue]) -> Option<u64> {
    mm_count(shape(args.get(1)?)?, shape(args.get(2)?)?)
}

fn bmm_count(a: &[i64], b: &[i64]) -> Option<u64> {
    match (a, b) {
        (&[b1, m, k], &[b2, k2, n]) if b1 == b2 && k == k2 => Some(2 * product(&[b1, m, n, k])),
        _ => None,
    }
}

fn bmm_flop(args: &[IValue], _out: &[IValue]) -> Option<u64> {
    bmm_count(shape(args.first()?)?, shape(args.get(1)?)?)
}

fn baddbmm_flop(args: &[IValue], _out: &[IValue]) -> Option<u64> {
    bmm_count(shape(args.get(1)?)?, shape(args.get(2)?)?)
}

/// `(b * h, s_q, s_k, d_qk, d_v)` of 4-d attention operands q, k, v of one batch and head
/// count (PyTorch's formulas assert that).
fn attention_dims(q: &IValue, k: &IValue, v: &IValue) -> Option<[i64; 5]> {
    let dims = |t: &IValue| -> Option<[i64; 4]> { shape(t)?.try_into().ok() };
    let ([b, h, s_q, d_q], [b2, h2, s_k, d_k], [b3, h3, s_v, d_v]) = (dims(q)?, dims(k)?, dims(v)?);
    let consistent = b == b2 && b == b3 && h == h2 && h == h3 && d_q == d_k && s_k == s_v;
    consistent.then_some([b * h, s_q, s_k, d_q, d_v])
}

/// `[bh, m, k] @ [bh, k, n]`.
fn batched(bh: i64, m: i64, k: i64, n: i64) -> Option<u64> {
    bmm_count(&[bh, m, k], &[bh, k, n])
}

/// `sdpa_flop_count`: the two batched products of attention, `q k^T` and `scores v` (a
/// causal mask saves nothing in the count, as in PyTorch's).
fn sdpa_flop(args: &[IValue], _out: &[IValue]) -> Option<u64> {
    let [bh, s_q, s_k, d_q, d_v] = attention_dims(args.first()?, args.get(1)?, args.get(2)?)?;
    Some(batched(bh, s_q, d_q, s_k)? + batched(bh, s_q, s_k, d_v)?)
}

/// `sdpa_backward_flop_count` (arguments `grad_out, q, k, v, ...`): the scores recomputed,
/// the gradient through `scores v` (`grad_out v^T`, and `grad_v`), then through `q k^T`
/// (`grad_q`, `grad_k`).
fn sdpa_backward_flop(args: &[IValue], _out: &[IValue]) -> Option<u64> {
    let [bh, s_q, s_k, d_q, d_v] = attention_dims(args.get(1)?, args.get(2)?, args.get(3)?)?;
    Some(
        batched(bh, s_q, d_q, s_k)?
            + batched(bh, s_q, d_v, s_k)?
            + batched(bh, s_k, s_q, d_v)?
            + batched(bh, s_q, s_k, d_q)?
            + batched(bh, d_q, s_q, s_k)?,
    )
}

/// `conv_flop_count`: every point of the output's spatial dims (the input's, transposed)
/// convolves the filter, for each batch and pair of channels; multiplications and additions.
fn conv_count(x: &[i64], w: &[i64], out: &[i64], transposed: bool) -> Option<u64> {
    let batch = *x.first()?;
    let conv_shape = if transposed { x } else { out }.get(2..)?;
    let (&c_out, rest) = w.split_first()?;
    let (&c_in, filter) = rest.split_first()?;
    Some(2 * product(conv_shape) * product(filter) * product(&[batch, c_out, c_in]))
}

fn conv_flop(args: &[IValue], out: &[IValue]) -> Option<u64> {
    let transposed = matches!(args.get(6)?, IValue::Bool(true));
    conv_count(
        shape(args.first()?)?,
        shape(args.get(1)?)?,
        shape(out.first()?)?,
        transposed,
    )
}

/// `[a, b, ...]` to `[b, a, ...]`.
fn swap01(s: &[i64]) -> Option<Vec<i64>> {
    let mut v = s.to_vec();
    if v.len() < 2 {
        return None;
    }
    v.swap(0, 1);
    Some(v)
}

/// `conv_backward_flop`: the input gradient is a transposed convolution of the output
/// gradient by the weight; the weight gradient a convolution of the input by the output
/// gradient (roles swapped for a transposed convolution).
fn conv_backward_flop(args: &[IValue], out: &[IValue]) -> Option<u64> {
    let grad_out = shape(args.first()?)?;
    let x = shape(args.get(1)?)?;
    let w = shape(args.get(2)?)?;
    let transposed = matches!(args.get(7)?, IValue::Bool(true));
    let IValue::BoolList(mask) = args.get(10)? else {
        return None;
    };
    let mut flops = 0;
    if mask.first() == Some(&true) {
        flops += conv_count(grad_out, w, shape(out.first()?)?, !transposed)?;
    }
    if mask.get(1) == Some(&true) {
        let grad_w = swap01(shape(out.get(1)?)?)?;
        flops += if transposed {
            conv_count(&swap01(grad_out)?, &swap01(x)?, &grad_w, false)?
        } else {
            conv_count(&swap01(x)?, &swap01(grad_out)?, &grad_w, false)?
        };
    }
    Some(flops)
}

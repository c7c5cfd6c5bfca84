//! The recording machinery shared by the pointwise (and loss) kernels: up to two
//! differentiable tensor inputs `a`, `b`, a non-differentiable tensor `c` (condition, mask,
//! target), a result, and a few scalars; the formula maps (grad, saved) to two gradients.

use std::sync::Arc;

use switchboard_dispatcher::{AutoDispatchBelowADInplaceOrView, Result};
use switchboard_tensor::{Scalar, Tensor};

use crate::node::{Node, SavedTensor};
use crate::recording::{fresh, grad_at, record_with};

/// Save `a`.
pub(crate) const A: u8 = 1;
/// Save `b`.
pub(crate) const B: u8 = 2;
/// Save `c`.
pub(crate) const C: u8 = 4;
/// Save the result.
pub(crate) const R: u8 = 8;

/// What a pointwise formula sees.
pub(crate) struct Args {
    pub a: Option<Tensor>,
    pub b: Option<Tensor>,
    pub c: Option<Tensor>,
    pub r: Option<Tensor>,
    pub s: Scalar,
    pub lo: Option<Scalar>,
    pub hi: Option<Scalar>,
    pub mode: &'static str,
    pub n: i64,
    /// Which of `a`, `b` need a gradient.
    pub need: [bool; 2],
}

impl Args {
    pub fn a(&self) -> &Tensor {
        self.a.as_ref().expect("saved a")
    }
    pub fn b(&self) -> &Tensor {
        self.b.as_ref().expect("saved b")
    }
    pub fn c(&self) -> &Tensor {
        self.c.as_ref().expect("saved c")
    }
    pub fn r(&self) -> &Tensor {
        self.r.as_ref().expect("saved result")
    }
}

/// Two optional gradients.
pub(crate) type G2 = Result<[Option<Tensor>; 2]>;
/// A pointwise formula.
pub(crate) type PwFn = fn(&Tensor, &Args) -> G2;

struct State {
    a: Option<SavedTensor>,
    b: Option<SavedTensor>,
    c: Option<SavedTensor>,
    r: Option<SavedTensor>,
    s: Scalar,
    lo: Option<Scalar>,
    hi: Option<Scalar>,
    mode: &'static str,
    n: i64,
    f: PwFn,
}

/// A pointwise op being recorded.
pub(crate) struct Pw<'a> {
    a: &'a Tensor,
    b: Option<&'a Tensor>,
    c: Option<&'a Tensor>,
    s: Scalar,
    lo: Option<Scalar>,
    hi: Option<Scalar>,
    mode: &'static str,
    n: i64,
}

impl<'a> Pw<'a> {
    pub fn new(a: &'a Tensor, b: Option<&'a Tensor>) -> Self {
        Pw {
            a,
            b,
            c: None,
            s: Scalar::Int(1),
            lo: None,
            hi: None,
            mode: "",
            n: 0,
        }
    }
    pub fn c(mut self, c: &'a Tensor) -> Self {
        self.c = Some(c);
        self
    }
    pub fn s(mut self, s: Scalar) -> Self {
        self.s = s;
        self
    }
    pub fn range(mut self, lo: Option<Scalar>, hi: Option<Scalar>) -> Self {
        self.lo = lo;
        self.hi = hi;
        self
    }
    pub fn mode(mut self, m: &'static str) -> Self {
        self.mode = m;
        self
    }
    pub fn n(mut self, n: i64) -> Self {
        self.n = n;
        self
    }

    /// Runs the forward below autograd and records the node.
    pub fn run(
        self,
        name: &'static str,
        save: u8,
        fwd: impl FnOnce() -> Result<Tensor>,
        f: PwFn,
    ) -> Result<Tensor> {
        let out = {
            let _g = AutoDispatchBelowADInplaceOrView::new();
            fwd()?
        };
        self.finish(name, save, out, f)
    }

    /// Records the node of `out` (not generic: one copy for every pointwise op).
    #[inline(never)]
    fn finish(self, name: &'static str, save: u8, out: Tensor, f: PwFn) -> Result<Tensor> {
        let out = match self.b {
            Some(b) => fresh(out, &[self.a, b]),
            None => fresh(out, &[self.a]),
        };
        let st = || State {
            a: (save & A != 0).then(|| SavedTensor::input(self.a)),
            b: if save & B != 0 {
                self.b.map(SavedTensor::input)
            } else {
                None
            },
            c: if save & C != 0 {
                self.c.map(SavedTensor::input)
            } else {
                None
            },
            r: (save & R != 0).then(|| SavedTensor::output(&out, 0, name)),
            s: self.s,
            lo: self.lo,
            hi: self.hi,
            mode: self.mode,
            n: self.n,
            f,
        };
        let inputs = [Some(self.a), self.b];
        let n = if self.b.is_some() { 2 } else { 1 };
        record_with(name, &inputs[..n], &[Some(&out)], st, formula);
        Ok(out)
    }
}

fn formula(
    st: &State,
    node: &Arc<dyn Node>,
    grads: &[Option<Tensor>],
    mask: &[bool],
) -> Result<Vec<Option<Tensor>>> {
    let g = grad_at(grads, 0)?;
    let un = |s: &Option<SavedTensor>| s.as_ref().map(|s| s.unpack(node)).transpose();
    let args = Args {
        a: un(&st.a)?,
        b: un(&st.b)?,
        c: un(&st.c)?,
        r: un(&st.r)?,
        s: st.s,
        lo: st.lo,
        hi: st.hi,
        mode: st.mode,
        n: st.n,
        need: [mask[0], mask.get(1).copied().unwrap_or(false)],
    };
    // Broadcast gradients are summed back to the input shapes by the engine (validate).
    let [ga, gb] = (st.f)(&g, &args)?;
    Ok(vec![ga, gb])
}

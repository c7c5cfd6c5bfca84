//! gradcheck and gradgradcheck of every differentiable entry of the operator-sample registry
//! (Note [Operator samples] in switchboard-opinfo), on its float64 samples: the functional
//! form, its in-place form (on a non-leaf copy of `self`), and the in-place operators with no
//! functional form. Random operators are reseeded before every call, so they are checked too.

use switchboard_autograd::{
    gradcheck, gradcheck_forward_ad, gradgradcheck, operator_autograd, AutogradKind,
    AutogradTensor, Result,
};
use switchboard_cpu as _;
use switchboard_dispatcher::{IValue, OperatorHandle};
use switchboard_opinfo::{
    aten_operators, operator, registry, returned_tensors, variants_of, Arg, Grad, Layout, OpInfo,
    Prepared, Sample,
};
use switchboard_ops as ops;
use switchboard_tensor::{Device, ScalarType, Tensor};

/// How a checked function calls the operator.
#[derive(Clone, Copy)]
enum Form<'a> {
    /// The functional form.
    Functional,
    /// In place on a non-leaf copy of `self` (the first tensor), through `op` (the in-place
    /// variant, or the entry itself when it has no functional form).
    InPlace(&'a OperatorHandle),
}

/// The function gradcheck differentiates: the sample's tensors with the differentiable ones
/// replaced by the leaves `t` (layouts applied inside), called in `form`; its differentiable
/// floating outputs (`keep`), flattened and joined when there are several.
fn call(p: &Prepared, grad: &[usize], form: Form, keep: &[usize], t: &[Tensor]) -> Result<Tensor> {
    let mut tensors = Vec::with_capacity(p.tensors.len());
    for (i, s) in p.tensors.iter().enumerate() {
        let base = match grad.iter().position(|&g| g == i) {
            Some(k) => complex_leaf_input(&t[k], s.base.dtype())?,
            None => s.base.clone(),
        };
        tensors.push(s.spec.view(&base)?);
    }
    p.reseed(7);
    let outs = match form {
        Form::Functional => returned_tensors(&p.call(&tensors)?),
        Form::InPlace(op) => {
            tensors[0] = ops::mul_scalar(&tensors[0], 1.0)?;
            p.call_variant(op, &tensors, &[])?;
            vec![tensors[0].clone()]
        }
    };
    let mut kept: Vec<Tensor> = keep
        .iter()
        .map(|&i| real_parts(&outs[i]))
        .collect::<Result<_>>()?;
    if kept.len() == 1 {
        return Ok(kept.remove(0));
    }
    let flat = kept
        .iter()
        .map(|o| ops::reshape(o, &[-1]))
        .collect::<Result<Vec<_>>>()?;
    ops::cat(&flat)
}

// Note [Gradcheck of complex functions]
// As PyTorch's gradcheck, a complex input or output is checked through its real and
// imaginary parts: a complex input's leaf is the float64 tensor of its parts (`view_as_real`),
// viewed back as complex (`view_as_complex`) inside the checked function, and a complex output
// is returned as its parts. The views are differentiable, so the Jacobian of the real function
// of real variables is checked, which is what the complex gradient convention encodes.

/// The operator's input made from a leaf: the leaf itself, or for a complex input the complex
/// view of its real-and-imaginary leaf.
fn complex_leaf_input(leaf: &Tensor, dtype: ScalarType) -> Result<Tensor> {
    if dtype.is_complex() {
        ops::view_as_complex(leaf)
    } else {
        Ok(leaf.clone())
    }
}

/// A complex output as its real and imaginary parts, others as they are.
fn real_parts(t: &Tensor) -> Result<Tensor> {
    if t.dtype().is_complex() {
        ops::view_as_real(t)
    } else {
        Ok(t.clone())
    }
}

/// The outputs that get gradients: floating ones with history, on one call with leaves.
fn differentiable_outputs(p: &Prepared, grad: &[usize], form: Form) -> Result<Vec<usize>> {
    let leaves = leaves(p, grad)?;
    let mut tensors = Vec::new();
    for (i, s) in p.tensors.iter().enumerate() {
        let base = match grad.iter().position(|&g| g == i) {
            Some(k) => complex_leaf_input(&leaves[k], s.base.dtype())?,
            None => s.base.clone(),
        };
        tensors.push(s.spec.view(&base)?);
    }
    p.reseed(7);
    let outs = match form {
        Form::Functional => returned_tensors(&p.call(&tensors)?),
        Form::InPlace(_) => return Ok(vec![0]),
    };
    Ok((0..outs.len())
        .filter(|&i| {
            let dtype = outs[i].dtype();
            (dtype.is_floating_point() || dtype.is_complex()) && outs[i].requires_grad()
        })
        .collect())
}

/// Fresh float64 leaves for the differentiable tensors.
fn leaves(p: &Prepared, grad: &[usize]) -> Result<Vec<Tensor>> {
    grad.iter()
        .map(|&i| {
            let base = &p.tensors[i].base;
            let t = if base.dtype().is_complex() {
                ops::clone(&ops::view_as_real(base)?)?
            } else {
                ops::clone(base)?
            };
            t.requires_grad_(true)?;
            Ok(t)
        })
        .collect()
}

/// The differentiable inputs of an entry: its formula's, or any for a composite operator.
fn differentiable_inputs(info: &OpInfo) -> Option<&'static [&'static str]> {
    let a = operator_autograd(info.name).expect("in the generated table");
    match a.kind {
        AutogradKind::Composite => None,
        _ => Some(a.differentiable_inputs),
    }
}

/// Whether the in-place form can run the sample: the result has `self`'s shape, and `self`
/// is not a broadcast view.
fn inplace_fits(p: &Prepared, s: &Sample) -> bool {
    let Some(first) = p.tensors.first() else {
        return false;
    };
    if matches!(first.spec.layout, Layout::Expanded(_)) || s.error {
        return false;
    }
    match p.fresh_inputs().and_then(|t| p.call(&t)) {
        Ok(r) => returned_tensors(&r)
            .first()
            .is_some_and(|y| y.sizes() == first.spec.shape.as_slice()),
        Err(_) => false,
    }
}

/// What forward AD must do on an operator.
#[derive(Clone, Copy, PartialEq)]
enum Forward {
    /// It has a forward formula: the forward-mode Jacobian must match.
    Formula,
    /// It has none: PyTorch's "Trying to use forward AD with ..." error.
    Unsupported,
    /// A composite: its decomposition either passes or reaches an operator without one.
    Composite,
    /// PyTorch's formula gives this sample no tangent (`scatter_reduce`'s `prod`, which
    /// PyTorch's OpInfo does not check in forward mode either): nothing to compare.
    NoTangent,
}

/// [`forward_of`] for one sample of `entry`.
fn forward_of_sample(name: &str, entry: &str, s: &Sample) -> Forward {
    if without_tangent_in_pytorch(entry, s) {
        Forward::NoTangent
    } else {
        forward_of(name)
    }
}

/// Whether PyTorch's forward formula gives no tangent for this sample.
fn without_tangent_in_pytorch(name: &str, s: &Sample) -> bool {
    name.starts_with("scatter_reduce")
        && s.args
            .iter()
            .any(|a| matches!(a, Arg::Value(IValue::Str(r)) if r.as_str() == "prod"))
}

fn forward_of(name: &str) -> Forward {
    match operator_autograd(name) {
        Some(a) if a.kind == AutogradKind::Composite => Forward::Composite,
        Some(a) if a.forward_formula => Forward::Formula,
        _ => Forward::Unsupported,
    }
}

struct Checker {
    failures: Vec<String>,
    gradchecks: usize,
    gradgradchecks: usize,
    forward_checks: usize,
    forward_unsupported: usize,
    /// The operators that raised PyTorch's "Trying to use forward AD with ..." error.
    without_forward_ad: std::collections::BTreeSet<String>,
}

impl Checker {
    fn run(
        &mut self,
        what: &str,
        p: &Prepared,
        grad: &[usize],
        form: Form,
        second: bool,
        forward: Forward,
    ) {
        let keep = match differentiable_outputs(p, grad, form) {
            Ok(k) if k.is_empty() => {
                self.failures
                    .push(format!("{what}: no output requires grad"));
                return;
            }
            Ok(k) => k,
            Err(e) => {
                self.failures.push(format!("{what}: {e}"));
                return;
            }
        };
        let inputs = match leaves(p, grad) {
            Ok(l) => l,
            Err(e) => {
                self.failures.push(format!("{what}: {e}"));
                return;
            }
        };
        let f = |t: &[Tensor]| call(p, grad, form, &keep, t);
        self.gradchecks += 1;
        match gradcheck(f, &inputs, 1e-6, 1e-5, 1e-3) {
            Ok(true) => {}
            Ok(false) => self.failures.push(format!("{what}: gradcheck false")),
            Err(e) => self.failures.push(format!("{what}: {e}")),
        }
        let unsupported = "Trying to use forward AD with ";
        if forward == Forward::NoTangent {
            return self.run_second(what, f, &inputs, second);
        }
        match (gradcheck_forward_ad(f, &inputs, 1e-6, 1e-5, 1e-3), forward) {
            (Ok(_), Forward::Formula | Forward::Composite) => self.forward_checks += 1,
            (Err(e), Forward::Unsupported | Forward::Composite)
                if e.to_string().starts_with(unsupported) =>
            {
                self.forward_unsupported += 1;
                let message = e.to_string();
                let op = message[unsupported.len()..].split(' ').next().unwrap_or("");
                self.without_forward_ad.insert(op.to_owned());
            }
            // Nothing to differentiate: no Jacobian-vector product was taken.
            (Ok(_), Forward::Unsupported) if inputs.iter().all(|t| t.numel() == 0) => {}
            (Ok(_), Forward::Unsupported | Forward::NoTangent) => self
                .failures
                .push(format!("{what}: forward AD ran without a forward formula")),
            (Err(e), _) => self.failures.push(format!("{what} (forward AD): {e}")),
        }
        self.run_second(what, f, &inputs, second);
    }

    fn run_second(
        &mut self,
        what: &str,
        f: impl Fn(&[Tensor]) -> Result<Tensor>,
        inputs: &[Tensor],
        second: bool,
    ) {
        if second {
            self.gradgradchecks += 1;
            match gradgradcheck(f, inputs, 17, 1e-6, 1e-5, 1e-3) {
                Ok(true) => {}
                Ok(false) => self.failures.push(format!("{what}: gradgradcheck false")),
                Err(e) => self.failures.push(format!("{what} (gradgradcheck): {e}")),
            }
        }
    }
}

#[test]
fn every_differentiable_entry_passes_gradcheck() {
    let all = aten_operators();
    let mut c = Checker {
        failures: Vec::new(),
        gradchecks: 0,
        gradgradchecks: 0,
        forward_checks: 0,
        forward_unsupported: 0,
        without_forward_ad: Default::default(),
    };
    for info in registry() {
        if !info.grad.checks() {
            continue;
        }
        let differentiable = differentiable_inputs(&info);
        let (own, schema) = operator(info.name).unwrap();
        let (inplace, _) = variants_of(&schema, &all);
        let mut second_left = match info.grad {
            Grad::Check => info.gradgrad_samples,
            _ => 0,
        };
        for (k, s) in info.samples.iter().enumerate() {
            if !s.for_gradcheck() {
                continue;
            }
            let p = match Prepared::new(info.name, s, Device::CPU, Some(ScalarType::Double)) {
                Ok(p) => p,
                Err(e) => {
                    c.failures.push(format!("{} sample {k}: {e}", info.name));
                    continue;
                }
            };
            let grad = p.grad_inputs(differentiable);
            if grad.is_empty() {
                continue;
            }
            let what = format!("{} sample {k}", info.name);
            if info.is_inplace_only() {
                // An integer `self` (copy_ into int64) has no gradient.
                if p.tensors[0].spec.dtype.is_floating_point() {
                    c.run(
                        &what,
                        &p,
                        &grad,
                        Form::InPlace(&own),
                        false,
                        forward_of_sample(info.name, info.name, s),
                    );
                }
                continue;
            }
            let second = second_left > 0;
            second_left -= usize::from(second);
            c.run(
                &what,
                &p,
                &grad,
                Form::Functional,
                second,
                forward_of_sample(info.name, info.name, s),
            );
            if let Some((op, vs)) = inplace {
                if inplace_fits(&p, s) && grad.contains(&0) {
                    let what = format!("{} sample {k}", vs.name());
                    let variant = match vs.overload_name() {
                        "" => vs.base_name().to_owned(),
                        o => format!("{}.{o}", vs.base_name()),
                    };
                    c.run(
                        &what,
                        &p,
                        &grad,
                        Form::InPlace(op),
                        false,
                        forward_of_sample(&variant, info.name, s),
                    );
                }
            }
        }
    }
    eprintln!(
        "{} gradchecks, {} gradgradchecks, {} forward-mode checks, {} without forward AD",
        c.gradchecks, c.gradgradchecks, c.forward_checks, c.forward_unsupported
    );
    eprintln!(
        "{} operators without forward AD: {:?}",
        c.without_forward_ad.len(),
        c.without_forward_ad
    );
    assert!(c.gradchecks > 400, "{} gradchecks", c.gradchecks);
    assert!(
        c.forward_checks > 300,
        "{} forward checks",
        c.forward_checks
    );
    let lines: Vec<String> = c
        .failures
        .iter()
        .map(|f| f.chars().take(300).collect())
        .collect();
    assert!(
        c.failures.is_empty(),
        "{} failures:\n{}",
        c.failures.len(),
        lines.join("\n")
    );
}

//! The plain unary operators (PyTorch's `build_borrowing_unary_op`: `neg`, `ceil`, `abs`,
//! `silu`, `gelu`, ...) compute in `self`'s dtype, and their iterator refuses a given output of
//! any other dtype, even one the result casts to safely (`check_all_same_dtype`), on Meta as
//! on the CPU. Operators that promote (`exp`, `sigmoid`: `build_borrowing_unary_float_op`)
//! write into any output their result casts to.

use switchboard_cpu as _;
use switchboard_dispatcher::{Dispatcher, IValue};
use switchboard_meta as _;
use switchboard_ops as ops;
use switchboard_tensor::{Device, ScalarType, Tensor};

/// Calls the out= overload `name` on `input` with `out`, every other argument defaulted.
fn call_out(name: &str, input: &Tensor, out: &Tensor) -> switchboard_dispatcher::Result<()> {
    let op = Dispatcher::global().find_schema_or_throw(name)?;
    let record = op.schema().unwrap();
    let mut stack = Vec::new();
    for (i, a) in record.schema.arguments().iter().enumerate() {
        stack.push(match (i, a.is_out()) {
            (0, _) => input.into(),
            (_, true) => out.into(),
            // The one argument without a default: `round.decimals_out`'s `decimals`.
            _ => a
                .default_value()
                .and_then(|v| IValue::from_schema_default(v, a.ty(), a.n()))
                .unwrap_or(IValue::Int(0)),
        });
    }
    op.call_boxed(&mut stack)
}

fn empty(dtype: ScalarType, d: Device) -> Tensor {
    ops::empty_with(&[3], ops::EmptyOptions::default().dtype(dtype).device(d)).unwrap()
}

/// As PyTorch 2.15 (`torch.neg(torch.ones(3), out=torch.empty(3, dtype=torch.float64))`:
/// "Found dtype Double but expected Float").
#[test]
fn plain_unary_operators_want_an_output_of_selfs_dtype() {
    let float_ops = [
        "aten::abs.out",
        "aten::neg.out",
        "aten::ceil.out",
        "aten::floor.out",
        "aten::round.out",
        "aten::round.decimals_out",
        "aten::trunc.out",
        "aten::sign.out",
        "aten::sgn.out",
        "aten::silu.out",
        "aten::gelu.out",
        "aten::elu.out",
        "aten::leaky_relu.out",
        "aten::hardtanh.out",
    ];
    let mut failures = Vec::new();
    for d in [Device::META, Device::CPU] {
        let x = empty(ScalarType::Float, d);
        let cases = float_ops.iter().map(|name| {
            (
                *name,
                ScalarType::Double,
                "Found dtype Double but expected Float",
            )
        });
        let int = empty(ScalarType::Int, d);
        let bitwise = [(
            "aten::bitwise_not.out",
            ScalarType::Long,
            "Found dtype Long but expected Int",
        )];
        for (name, out_dtype, message) in cases.chain(bitwise) {
            let input = if name == "aten::bitwise_not.out" {
                &int
            } else {
                &x
            };
            match call_out(name, input, &empty(out_dtype, d)) {
                Err(e) if e.first_line() == message => {}
                Err(e) => failures.push(format!("{name} on {d}: `{}`", e.first_line())),
                Ok(()) => failures.push(format!("{name} on {d}: no error")),
            }
        }
        // An output of the input's dtype is fine; operators that promote take any output
        // their result casts to.
        for name in ["aten::neg.out", "aten::exp.out", "aten::sigmoid.out"] {
            let out = match name {
                "aten::neg.out" => empty(ScalarType::Float, d),
                _ => empty(ScalarType::Double, d),
            };
            if let Err(e) = call_out(name, &x, &out) {
                failures.push(format!("{name} on {d}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

//! The differentiable functional collectives: PyTorch's `_c10d_functional_autograd` namespace.
//! The gradient of a gather is the summed scatter of the output's gradient, and the other way
//! round; each forward waits for its collective (the result is an ordinary tensor).

use switchboard_autograd::{apply, Function, FunctionCtx};
use switchboard_dispatcher::{
    library, AutoDispatchBelowADInplaceOrView, IValue, KernelFunction, Result,
};
use switchboard_tensor::Tensor;

use crate::error::DistError;
use crate::functional;
use crate::reduce_op::ReduceOp;

/// The schemas, as PyTorch 2.15 defines them (torch/csrc/distributed/c10d/Functional.cpp).
pub const SCHEMAS: [&str; 3] = [
    "all_gather_into_tensor(Tensor input, int group_size, str group_name) -> Tensor",
    "reduce_scatter_tensor(Tensor input, str reduce_op, int group_size, str group_name) -> Tensor",
    "all_to_all_single(Tensor input, SymInt[] output_split_sizes, SymInt[] input_split_sizes, \
     str group_name) -> Tensor",
];

library!(DEF _c10d_functional_autograd, |lib| {
    for s in SCHEMAS {
        lib.def(s)?;
    }
    Ok(())
});

library!(IMPL _c10d_functional_autograd, Autograd, |lib| {
    lib.impl_(
        "all_gather_into_tensor",
        None,
        KernelFunction::from_fn(all_gather_into_tensor_autograd),
    )?;
    lib.impl_(
        "reduce_scatter_tensor",
        None,
        KernelFunction::from_fn(reduce_scatter_tensor_autograd),
    )?;
    lib.impl_(
        "all_to_all_single",
        None,
        KernelFunction::from_fn(all_to_all_single_autograd),
    )?;
    Ok(())
});

/// `_c10d_functional_autograd::all_gather_into_tensor`: every rank's `input` along the first
/// dimension, differentiable (the gradient is the summed scatter of the output's).
pub fn all_gather_into_tensor(input: &Tensor, group_size: i64, group_name: &str) -> Result<Tensor> {
    functional::call_op(
        "_c10d_functional_autograd::all_gather_into_tensor",
        vec![
            IValue::Tensor(input.clone()),
            IValue::Int(group_size),
            functional::s(group_name),
        ],
    )
}

/// `_c10d_functional_autograd::reduce_scatter_tensor` (sum only): this rank's chunk of the
/// sum, differentiable (the gradient is the gather of the output's).
pub fn reduce_scatter_tensor(input: &Tensor, group_size: i64, group_name: &str) -> Result<Tensor> {
    functional::call_op(
        "_c10d_functional_autograd::reduce_scatter_tensor",
        vec![
            IValue::Tensor(input.clone()),
            functional::s("sum"),
            IValue::Int(group_size),
            functional::s(group_name),
        ],
    )
}

/// `_c10d_functional_autograd::all_to_all_single`: the all-to-all of `input`'s rows,
/// differentiable (the gradient is the all-to-all of the output's gradient with the split
/// sizes swapped: each row goes back where it came from).
pub fn all_to_all_single(
    input: &Tensor,
    output_split_sizes: &[i64],
    input_split_sizes: &[i64],
    group_name: &str,
) -> Result<Tensor> {
    functional::call_op(
        "_c10d_functional_autograd::all_to_all_single",
        vec![
            IValue::Tensor(input.clone()),
            output_split_sizes.to_vec().into(),
            input_split_sizes.to_vec().into(),
            functional::s(group_name),
        ],
    )
}

struct AllToAllSingle {
    output_split_sizes: Vec<i64>,
    input_split_sizes: Vec<i64>,
    group_name: String,
}

impl Function for AllToAllSingle {
    fn forward(&self, _: &mut FunctionCtx, x: &[Tensor]) -> Result<Vec<Tensor>> {
        let _below = AutoDispatchBelowADInplaceOrView::new();
        let out = functional::all_to_all_single(
            &x[0],
            &self.output_split_sizes,
            &self.input_split_sizes,
            &self.group_name,
        )?;
        Ok(vec![functional::wait_tensor(&out)?])
    }

    fn backward(&self, _: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let grad = functional::all_to_all_single(
            &g[0],
            &self.input_split_sizes,
            &self.output_split_sizes,
            &self.group_name,
        )?;
        Ok(vec![Some(functional::wait_tensor(&grad)?)])
    }
}

fn all_to_all_single_autograd(
    input: &Tensor,
    output_split_sizes: &[i64],
    input_split_sizes: &[i64],
    group_name: &str,
) -> Result<Tensor> {
    let f = AllToAllSingle {
        output_split_sizes: output_split_sizes.to_vec(),
        input_split_sizes: input_split_sizes.to_vec(),
        group_name: group_name.to_string(),
    };
    Ok(apply(f, std::slice::from_ref(input))?.remove(0))
}

struct AllGatherIntoTensor {
    group_size: i64,
    group_name: String,
}

impl Function for AllGatherIntoTensor {
    fn forward(&self, _: &mut FunctionCtx, x: &[Tensor]) -> Result<Vec<Tensor>> {
        let _below = AutoDispatchBelowADInplaceOrView::new();
        let out = functional::all_gather_into_tensor(&x[0], self.group_size, &self.group_name)?;
        Ok(vec![functional::wait_tensor(&out)?])
    }

    fn backward(&self, _: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let grad = functional::reduce_scatter_tensor(
            &g[0],
            ReduceOp::Sum,
            self.group_size,
            &self.group_name,
        )?;
        Ok(vec![Some(functional::wait_tensor(&grad)?)])
    }
}

struct ReduceScatterTensor {
    group_size: i64,
    group_name: String,
}

impl Function for ReduceScatterTensor {
    fn forward(&self, _: &mut FunctionCtx, x: &[Tensor]) -> Result<Vec<Tensor>> {
        let _below = AutoDispatchBelowADInplaceOrView::new();
        let out = functional::reduce_scatter_tensor(
            &x[0],
            ReduceOp::Sum,
            self.group_size,
            &self.group_name,
        )?;
        Ok(vec![functional::wait_tensor(&out)?])
    }

    fn backward(&self, _: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let grad = functional::all_gather_into_tensor(&g[0], self.group_size, &self.group_name)?;
        Ok(vec![Some(functional::wait_tensor(&grad)?)])
    }
}

fn all_gather_into_tensor_autograd(
    input: &Tensor,
    group_size: i64,
    group_name: &str,
) -> Result<Tensor> {
    let f = AllGatherIntoTensor {
        group_size,
        group_name: group_name.to_string(),
    };
    Ok(apply(f, std::slice::from_ref(input))?.remove(0))
}

fn reduce_scatter_tensor_autograd(
    input: &Tensor,
    reduce_op: &str,
    group_size: i64,
    group_name: &str,
) -> Result<Tensor> {
    if reduce_op != "sum" {
        return Err(DistError::Invalid("Only sum reduce op is supported".into()).into());
    }
    let f = ReduceScatterTensor {
        group_size,
        group_name: group_name.to_string(),
    };
    Ok(apply(f, std::slice::from_ref(input))?.remove(0))
}

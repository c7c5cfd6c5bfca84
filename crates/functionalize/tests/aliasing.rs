//! Aliasing under functionalization, modelled on PyTorch's test/test_functionalization.py
//! (written anew): every alias sees every write, inputs written are written back.

use switchboard_cpu as _;
use switchboard_functionalize::{functionalize, Remove};
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::Tensor;

type R = switchboard_dispatcher::Result<Vec<Tensor>>;

fn both(f: impl Fn(&[Tensor]) -> R + Copy, inputs: &[Tensor]) {
    let eager_inputs: Vec<Tensor> = inputs.iter().map(|t| t.deep_clone().unwrap()).collect();
    let eager = f(&eager_inputs).unwrap();
    for remove in [Remove::Mutations, Remove::MutationsAndViews] {
        let fresh: Vec<Tensor> = inputs.iter().map(|t| t.deep_clone().unwrap()).collect();
        let got = functionalize(f, remove)(&fresh).unwrap();
        assert_eq!(got.len(), eager.len());
        for (g, e) in got.iter().zip(&eager) {
            assert_eq!(g.sizes(), e.sizes(), "{remove:?}");
            assert_eq!(
                g.to_vec::<f32>().unwrap(),
                e.to_vec::<f32>().unwrap(),
                "{remove:?}"
            );
        }
        for (i, e) in fresh.iter().zip(&eager_inputs) {
            assert_eq!(
                i.to_vec::<f32>().unwrap(),
                e.to_vec::<f32>().unwrap(),
                "input after, {remove:?}"
            );
        }
    }
}

fn arange(n: i64) -> Tensor {
    Tensor::from_vec((0..n).map(|v| v as f32).collect(), &[n]).unwrap()
}

#[test]
fn mutate_a_view_read_the_base() {
    both(
        |xs| {
            let base = ops::ones(&[4, 2])?;
            let v = base.view(&[8])?;
            v.add_(&xs[0])?;
            Ok(vec![base])
        },
        &[arange(8)],
    );
}

#[test]
fn mutate_the_base_read_a_view() {
    both(
        |xs| {
            let base = xs[0].mul_scalar(1.0)?;
            let v = base.t()?;
            base.mul_(&base)?;
            Ok(vec![v.contiguous()?, v.sum()?])
        },
        &[arange(6).view(&[2, 3]).unwrap()],
    );
}

#[test]
fn views_of_views() {
    both(
        |xs| {
            let base = ops::zeros(&[3, 4])?;
            let a = base.transpose(0, 1)?; // [4, 3]
            let b = a.select(1, 2)?; // [4]: column 2 of a = row 2 of base
            let c = b.narrow(0, 1, 2)?; // [2], a slice
            c.add_(&xs[0])?;
            Ok(vec![base, a.contiguous()?, b.contiguous()?])
        },
        &[arange(2)],
    );
}

#[test]
fn views_of_another_dtype() {
    both(
        |xs| {
            let base = xs[0].mul_scalar(1.0)?;
            let ints = base.view_dtype(switchboard_tensor::ScalarType::Int)?;
            ints.zero_()?;
            Ok(vec![base])
        },
        &[arange(4)],
    );
}

#[test]
fn input_mutation_is_written_back() {
    both(
        |xs| {
            xs[0].add_(&ops::ones(&[3])?)?;
            xs[1].select(0, 0)?.mul_(&xs[0].select(0, 2)?)?;
            Ok(vec![])
        },
        &[arange(3), arange(3)],
    );
}

#[test]
fn out_arguments_are_written() {
    both(
        |xs| {
            let out = ops::zeros(&[3])?;
            ops::add_out(&xs[0], &xs[0], &out)?;
            Ok(vec![out])
        },
        &[arange(3)],
    );
}

#[test]
fn diagonal_and_alias_views_write_through_to_their_base() {
    // A write through `diagonal` reaches the base (`diagonal_scatter` functionally), and the
    // base's write reaches an `alias`.
    both(
        |xs| {
            let base = xs[0].mul_scalar(1.0)?;
            let d = base.diagonal_with(ops::DiagonalOptions::default().offset(1))?;
            d.mul_scalar_(10.0)?;
            let a = base.alias()?;
            base.add_scalar_(1.0)?;
            Ok(vec![base.clone(), a.contiguous()?, d.contiguous()?])
        },
        &[arange(12).view(&[3, 4]).unwrap()],
    );
}

#[test]
fn split_and_unbind_views_write_through_to_their_base() {
    // Each element of a list of views is a view: writes through the second piece of
    // `split_with_sizes`, the last of `split` and one row of `unbind` reach the base (their
    // inverses are `slice_scatter` and `select_scatter`), and the base's write reaches them.
    both(
        |xs| {
            let base = xs[0].mul_scalar(1.0)?;
            let pieces =
                base.split_with_sizes_with(&[1, 3], ops::SplitWithSizesOptions { dim: 1 })?;
            pieces[1].mul_scalar_(10.0)?;
            let rows = base.split(2)?;
            rows[1].add_scalar_(100.0)?;
            let row = base.unbind()?;
            row[0].sub_scalar_(1000.0)?;
            base.add_scalar_(0.5)?;
            Ok(vec![
                base.clone(),
                pieces[0].contiguous()?,
                row[2].contiguous()?,
            ])
        },
        &[arange(12).view(&[3, 4]).unwrap()],
    );
}

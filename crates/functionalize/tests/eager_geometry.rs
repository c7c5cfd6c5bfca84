//! What functional tensors keep of eager's geometry when they are written: a write into an
//! expanded view, which PyTorch's functionalization takes where eager refuses it, and the
//! storage an out= tensor is resized within (Note [Resized out= tensors under
//! functionalization]).

use switchboard_cpu as _;
// The Meta kernels check a write's arguments before the functional call runs.
use switchboard_functionalize::{
    from_functional, functionalize, to_functional_below_autograd, Remove,
};
use switchboard_meta as _;
use switchboard_ops as ops;
use switchboard_tensor::{ScalarType, Tensor};

fn seq(sizes: &[i64]) -> Tensor {
    let n: i64 = sizes.iter().product();
    let v: Vec<f32> = (1..=n).map(|i| i as f32).collect();
    Tensor::from_slice(&v, sizes).unwrap()
}

fn values(t: &Tensor) -> Vec<f32> {
    from_functional(t).unwrap().to_vec::<f32>().unwrap()
}

/// Eager refuses a write into an expanded view; PyTorch's functionalization runs a write's
/// check on meta tensors, which take it (Meta has no internal-overlap error), and the write
/// sums into the base through `expand`'s inverse; the view read afterwards is regenerated from
/// the base (Note [Reading a view after writing it]). PyTorch 2.15 gives these numbers on lazy
/// tensors and under `torch.func.functionalize` alike.
#[test]
fn a_write_to_an_expanded_view_sums_into_its_base_as_pytorchs_functionalization() {
    let eager = ops::mul_(&ops::expand(&seq(&[1, 3]), &[4, 3]).unwrap(), &seq(&[4, 3]))
        .unwrap_err()
        .to_string();
    assert!(eager.contains("more than one element"), "{eager}");
    let x = to_functional_below_autograd(&seq(&[1, 3])).unwrap();
    let e = ops::expand(&x, &[4, 3]).unwrap();
    ops::mul_(&e, &seq(&[4, 3])).unwrap();
    assert_eq!(values(&x), [19.0, 46.0, 81.0]);
    assert_eq!(values(&e), [19.0, 46.0, 81.0].repeat(4));
    // Under `functionalize(f)`, views kept or removed.
    for remove in [Remove::Mutations, Remove::MutationsAndViews] {
        let f = |xs: &[Tensor]| {
            let e = ops::expand(&xs[0], &[4, 3])?;
            ops::mul_(&e, &seq(&[4, 3]))?;
            Ok(vec![e])
        };
        let x = seq(&[1, 3]);
        let out = functionalize(f, remove)(std::slice::from_ref(&x)).unwrap();
        assert_eq!(
            out[0].to_vec::<f32>().unwrap(),
            [19.0, 46.0, 81.0].repeat(4)
        );
        assert_eq!(x.to_vec::<f32>().unwrap(), [19.0, 46.0, 81.0]);
    }
}

#[test]
fn an_out_tensor_resized_within_its_storage_shares_it_as_in_eager() {
    let run = |wrap: &dyn Fn(Tensor) -> Tensor| {
        let a = wrap(seq(&[2, 2]));
        let small = wrap(Tensor::zeros(&[10], ScalarType::Float).unwrap());
        let r = ops::cat_out(&[a.clone(), a.clone()], &small).unwrap();
        let big = wrap(Tensor::zeros(&[1], ScalarType::Float).unwrap());
        let dim1 = ops::CatOutOptions::default().dim(1);
        let r2 = ops::cat_out_with(&[a.clone(), a], &big, dim1).unwrap();
        (small, r, big, r2)
    };
    let (small, r, big, r2) = run(&|t| t);
    let (f_small, f_r, f_big, f_r2) = run(&|t| to_functional_below_autograd(&t).unwrap());
    // Within the storage: the handle passed reads the result's elements.
    assert_eq!(small.sizes(), f_small.sizes());
    assert_eq!((r.sizes(), r.strides()), (f_r.sizes(), f_r.strides()));
    assert_eq!(small.to_vec::<f32>().unwrap(), values(&f_small));
    assert_eq!(r.to_vec::<f32>().unwrap(), values(&f_r));
    assert!(f_r.is_alias_of(&f_small));
    assert_eq!(
        (small.version(), r.version()),
        (f_small.version(), f_r.version())
    );
    // In a new storage: the handle keeps its elements, the result its version counter.
    assert_eq!(big.to_vec::<f32>().unwrap(), values(&f_big));
    assert_eq!(r2.to_vec::<f32>().unwrap(), values(&f_r2));
    assert_eq!(
        (big.version(), r2.version()),
        (f_big.version(), f_r2.version())
    );
}

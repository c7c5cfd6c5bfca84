//! vmap and the autograd transforms: per-sample gradients against a loop, the composition
//! orders (`vmap(grad)`, `grad(vmap)`, `jacrev(jacrev)`, `vmap(jacrev)`), nesting, the
//! randomness modes, in-place rules and PyTorch's errors. Expected values and messages were
//! checked against PyTorch 2.15 (`torch.func`).

use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_dispatcher::Result;
use switchboard_functorch::{
    grad, grad_and_value, hessian, jacrev, vjp, vmap, Dims, Randomness, Tree, Vmap,
};
use switchboard_ops as ops;
use switchboard_tensor::{manual_seed, ScalarType, Tensor};

/// Held by the tests that draw from the default generator: "same" randomness replays the
/// generator's state for each sample (Note [Randomness under vmap]), which a test seeding or
/// drawing on another thread at the same time would disturb.
static DEFAULT_GENERATOR: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn close(a: &Tensor, b: &Tensor, what: &str) {
    assert_eq!(a.sizes(), b.sizes(), "{what}: sizes");
    let (x, y) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    for (i, (p, q)) in x.iter().zip(&y).enumerate() {
        assert!(
            (p - q).abs() <= 1e-4 + 1e-4 * q.abs(),
            "{what}: element {i} is {p}, expected {q}"
        );
    }
}

fn floats(values: &[f32], sizes: &[i64]) -> Tensor {
    Tensor::from_vec(values.to_vec(), sizes).unwrap()
}

/// The MLP's loss for one sample: `params` are (w1, b1, w2, b2, w3, b3), then `x` and `y`.
fn mlp_loss(args: &[Tensor]) -> Result<Tensor> {
    let (params, x, y) = (&args[..6], &args[6], &args[7]);
    let mut h = ops::unsqueeze(x, 0)?;
    for (i, layer) in params.chunks(2).enumerate() {
        h = ops::add(&ops::linear(&h, &layer[0])?, &layer[1])?;
        if i < 2 {
            h = ops::relu(&h)?;
        }
    }
    ops::cross_entropy_loss(&h, &ops::unsqueeze(y, 0)?)
}

fn mlp_params(sizes: &[i64]) -> Vec<Tensor> {
    manual_seed(0);
    sizes
        .windows(2)
        .flat_map(|w| {
            [
                ops::mul_scalar(&ops::randn(&[w[1], w[0]]).unwrap(), 0.3).unwrap(),
                ops::mul_scalar(&ops::randn(&[w[1]]).unwrap(), 0.1).unwrap(),
            ]
        })
        .collect()
}

#[test]
fn per_sample_gradients_of_the_mlp_equal_a_loop_of_single_sample_gradients() {
    let _generator = DEFAULT_GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    let params = mlp_params(&[20, 16, 16, 5]);
    let batch = 8;
    let x = ops::randn(&[batch, 20]).unwrap();
    let y = ops::randint(5, &[batch]).unwrap();
    let argnums: Vec<usize> = (0..6).collect();
    let mut in_dims = vec![None; 6];
    in_dims.extend([Some(0), Some(0)]);
    let mut args: Vec<Tree> = params.iter().cloned().map(Tree::Tensor).collect();
    args.extend([Tree::Tensor(x.clone()), Tree::Tensor(y.clone())]);
    let per_sample = Vmap::new()
        .in_dims(Dims::from(&in_dims[..]))
        .call(
            |xs| {
                let ts: Vec<Tensor> = xs.iter().filter_map(|t| t.as_tensor().cloned()).collect();
                let gs = grad(mlp_loss, &ts, &argnums)?;
                Ok(Tree::List(gs.into_iter().map(Tree::Tensor).collect()))
            },
            &args,
        )
        .unwrap();
    let Tree::List(per_sample) = per_sample else {
        panic!("a list of gradients")
    };
    for b in 0..batch {
        let mut one = params.clone();
        one.push(ops::select(&x, 0, b).unwrap());
        one.push(ops::select(&y, 0, b).unwrap());
        let looped = grad(mlp_loss, &one, &argnums).unwrap();
        for (i, g) in looped.iter().enumerate() {
            let got = ops::select(per_sample[i].as_tensor().unwrap(), 0, b).unwrap();
            close(&got, g, &format!("sample {b} parameter {i}"));
        }
    }
    // Nothing leaks: the parameters are untouched leaves without gradients.
    assert!(params
        .iter()
        .all(|p| !p.requires_grad() && p.grad().is_none()));
}

#[test]
fn grad_of_vmap_differentiates_through_the_batched_computation() {
    let x = floats(&[1., 2., 3., 4., 5., 6.], &[3, 2]);
    // d/dx sum_rows(sum(row^2) * w) = 2 x w.
    let w = floats(&[10., 20.], &[2]);
    let g = grad(
        |a| {
            let rows = vmap(
                |r| ops::sum(&ops::mul(&ops::mul(&r[0], &r[0])?, &r[1])?),
                &[Some(0), None],
                &[a[0].clone(), a[1].clone()],
            )?;
            ops::sum(&rows)
        },
        &[x.clone(), w.clone()],
        &[0, 1],
    )
    .unwrap();
    close(
        &g[0],
        &floats(&[20., 80., 60., 160., 100., 240.], &[3, 2]),
        "dx",
    );
    close(&g[1], &floats(&[35., 56.], &[2]), "dw");
}

#[test]
fn jacrev_of_jacrev_is_the_hessian() {
    let x = floats(&[1., 2., 3.], &[3]);
    let cube_sum = |a: &[Tensor]| ops::sum(&ops::mul(&ops::mul(&a[0], &a[0])?, &a[0])?);
    let h = hessian(cube_sum, std::slice::from_ref(&x), 0).unwrap();
    close(
        &h,
        &floats(&[6., 0., 0., 0., 12., 0., 0., 0., 18.], &[3, 3]),
        "hessian",
    );
    // jacrev of an elementwise function: the diagonal of its derivative.
    let j = jacrev(|a| ops::exp(&a[0]), std::slice::from_ref(&x), &[0]).unwrap();
    let e = ops::exp(&x).unwrap().to_vec::<f32>().unwrap();
    let want = [e[0], 0., 0., 0., e[1], 0., 0., 0., e[2]];
    close(&j[0], &floats(&want, &[3, 3]), "jacobian of exp");
    // grad of grad: d2/dx2 x^3 = 6x.
    let gg = grad(
        |a| ops::sum(&grad(cube_sum, a, &[0])?.remove(0)),
        &[x],
        &[0],
    )
    .unwrap();
    close(&gg[0], &floats(&[6., 12., 18.], &[3]), "grad of grad");
}

#[test]
fn vmap_of_jacrev_gives_per_sample_jacobians() {
    let x = floats(&[1., 2., 3., 4.], &[2, 2]);
    let j = vmap(
        |a| Ok(jacrev(|b| ops::mul(&b[0], &b[0]), a, &[0])?.remove(0)),
        &[Some(0)],
        &[x],
    )
    .unwrap();
    close(
        &j,
        &floats(&[2., 0., 0., 4., 6., 0., 0., 8.], &[2, 2, 2]),
        "per-sample jacobians",
    );
}

#[test]
fn grad_and_value_and_vjp_under_vmap() {
    let x = floats(&[1., 2., 3., 4.], &[2, 2]);
    let (g, v) = grad_and_value(
        |a| ops::sum(&ops::mul(&a[0], &a[0])?),
        std::slice::from_ref(&x),
        &[0],
    )
    .unwrap();
    close(&g[0], &floats(&[2., 4., 6., 8.], &[2, 2]), "grad");
    close(&v, &floats(&[30.], &[]), "value");
    assert!(
        !v.requires_grad(),
        "the value is released from the transform's graph"
    );
    let (out, vjp_fn) = vjp(
        |a| Ok(vec![ops::mul(&a[0], &a[0])?]),
        std::slice::from_ref(&x),
    )
    .unwrap();
    close(&out[0], &floats(&[1., 4., 9., 16.], &[2, 2]), "vjp output");
    let ct = vjp_fn.call(&[floats(&[1., 0., 0., 1.], &[2, 2])]).unwrap();
    close(&ct[0], &floats(&[2., 0., 0., 8.], &[2, 2]), "vjp");
    let rowwise = vmap(
        |a| {
            let (_, f) = vjp(|b| Ok(vec![ops::mul(&b[0], &b[0])?]), &[a[0].clone()])?;
            Ok(f.call(&[a[1].clone()])?.remove(0))
        },
        &[Some(0), Some(0)],
        &[x.clone(), floats(&[1., 1., 2., 2.], &[2, 2])],
    )
    .unwrap();
    close(&rowwise, &floats(&[2., 4., 12., 16.], &[2, 2]), "vmap(vjp)");
}

#[test]
fn nested_vmap_and_dims() {
    let x = ops::reshape(&ops::arange(24).unwrap(), &[2, 3, 4]).unwrap();
    let x = ops::_to_copy_with(&x, ops::ToCopyOptions::default().dtype(ScalarType::Float)).unwrap();
    let y = floats(&[1., 2., 3.], &[3]);
    // Outer over dim 2 of x, inner over dim 1 of x's sample and dim 0 of y.
    let out = vmap(
        |a| {
            vmap(
                |b| ops::mul(&ops::sum(&b[0])?, &b[1]),
                &[Some(1), Some(0)],
                &[a[0].clone(), a[1].clone()],
            )
        },
        &[Some(2), None],
        &[x.clone(), y],
    )
    .unwrap();
    // out[k][j] = sum_i x[i][j][k] * y[j]
    let want = ops::mul(
        &ops::permute(&ops::sum_dim_int_list(&x, Some(&[0])).unwrap(), &[1, 0]).unwrap(),
        &floats(&[1., 2., 3.], &[1, 3]),
    )
    .unwrap();
    close(&out, &want, "nested vmap");
    // out_dims moves the batch; an unbatched output is expanded.
    let moved = Vmap::new()
        .out_dims(Dims::Dim(Some(1)))
        .call(|a| Ok(a[0].clone()), &[Tree::Tensor(x.clone())])
        .unwrap();
    assert_eq!(moved.as_tensor().unwrap().sizes(), &[3, 2, 4]);
    let expanded = vmap(
        |_| Ok(floats(&[7.], &[1])),
        &[Some(0)],
        std::slice::from_ref(&x),
    )
    .unwrap();
    assert_eq!(expanded.sizes(), &[2, 1]);
    // chunk_size gives the same result in pieces.
    let chunked = Vmap::new()
        .chunk_size(Some(1))
        .call(
            |a| Ok(Tree::Tensor(ops::sum(a[0].as_tensor().unwrap())?)),
            &[Tree::Tensor(x.clone())],
        )
        .unwrap();
    close(
        chunked.as_tensor().unwrap(),
        &floats(&[66., 210.], &[2]),
        "chunks",
    );
}

fn err<T: std::fmt::Debug>(r: Result<T>) -> String {
    r.expect_err("an error").to_string()
}

#[test]
fn randomness_modes() {
    let _generator = DEFAULT_GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    let x = ops::zeros(&[4, 3]).unwrap();
    let random = |mode: Randomness| {
        Vmap::new().randomness(mode).call(
            |a| {
                Ok(Tree::Tensor(ops::add(
                    a[0].as_tensor().unwrap(),
                    &ops::rand(&[3])?,
                )?))
            },
            &[Tree::Tensor(x.clone())],
        )
    };
    assert_eq!(
        err(random(Randomness::Error)),
        "vmap: called random operation while in randomness error mode. Please either use the \
         'same' or 'different' randomness flags on vmap or perform the randomness operation out \
         of vmap"
    );
    let rows = |t: &Tree| -> Vec<Vec<f32>> {
        let t = t.as_tensor().unwrap();
        (0..4)
            .map(|i| ops::select(t, 0, i).unwrap().to_vec::<f32>().unwrap())
            .collect()
    };
    let same = rows(&random(Randomness::Same).unwrap());
    assert!(same.iter().all(|r| r == &same[0]), "same: {same:?}");
    let different = rows(&random(Randomness::Different).unwrap());
    assert!(different[0] != different[1], "different: {different:?}");
    // An operator on a batched tensor: dropout's masks alike in "same", not in "different".
    let ones = ops::ones(&[4, 64]).unwrap();
    let dropout = |mode: Randomness| {
        Vmap::new()
            .randomness(mode)
            .call(
                |a| {
                    Ok(Tree::Tensor(ops::dropout(
                        a[0].as_tensor().unwrap(),
                        0.5,
                        true,
                    )?))
                },
                &[Tree::Tensor(ones.clone())],
            )
            .unwrap()
    };
    let same = rows(&dropout(Randomness::Same));
    assert!(same.iter().all(|r| r == &same[0]));
    let different = rows(&dropout(Randomness::Different));
    assert!(different[0] != different[1]);
    // A primitive in-place draw on a batched tensor draws once in "same" mode (functorch's
    // random batching rules); an operator whose batched input gives values is PyTorch's error.
    let on_batched = |mode: Randomness, f: fn(&Tensor) -> Result<Tensor>| {
        Vmap::new().randomness(mode).call(
            move |a| Ok(Tree::Tensor(f(a[0].as_tensor().unwrap())?)),
            &[Tree::Tensor(ones.clone())],
        )
    };
    let uniform = |x: &Tensor| ops::uniform_(&ops::clone(x)?);
    let same = rows(&on_batched(Randomness::Same, uniform).unwrap());
    assert!(
        same.iter().all(|r| r == &same[0]),
        "same uniform_: {same:?}"
    );
    let different = rows(&on_batched(Randomness::Different, uniform).unwrap());
    assert!(different[0] != different[1]);
    assert_eq!(
        err(on_batched(Randomness::Same, |x| ops::bernoulli(x, 0.5))),
        "Vmap does not currently support same randomness with a batched tensor input. Please \
         file an issue with functorch"
    );
    assert_eq!(
        err(Randomness::parse("foo")),
        "Only allowed values for randomness are 'error', 'different', or 'same'. Got foo"
    );
}

#[test]
fn in_place_rules_and_errors() {
    let x = floats(&[1., 2., 3., 4., 5., 6.], &[3, 2]);
    let shared = floats(&[0., 0.], &[2]);
    // Writing a batched value into a tensor every sample shares is PyTorch's error.
    let e = err(vmap(
        |a| ops::add_(&a[1], &a[0]),
        &[Some(0), None],
        &[x.clone(), shared.clone()],
    ));
    assert!(
        e.starts_with(
            "vmap: inplace arithmetic(self, *extra_args) is not possible because there exists a \
             Tensor `other` in extra_args that has more elements than `self`."
        ),
        "{e}"
    );
    let m = floats(&[1., 0., 0., 1.], &[2, 2]);
    let xs = ops::reshape(&ops::cat(&[x.clone(), x.clone()]).unwrap(), &[3, 2, 2]).unwrap();
    let e = err(vmap(
        |a| ops::addmm_(&a[1], &a[0], &a[0]),
        &[Some(0), None],
        &[xs, m],
    ));
    assert!(
        e.starts_with(
            "vmap: aten::addmm_(self, *extra_args) is not possible because there exists a \
             Tensor `other` in extra_args that has more elements than `self`. This happened due \
             to `other` being vmapped over but `self` not being vmapped over at level 1."
        ),
        "{e}"
    );
    // In place on a batched tensor writes the physical tensor.
    let target = ops::clone(&x).unwrap();
    vmap(
        |a| ops::mul_scalar_(&a[0], 2),
        &[Some(0)],
        std::slice::from_ref(&target),
    )
    .unwrap();
    close(&target, &ops::mul_scalar(&x, 2).unwrap(), "in place");
    assert_eq!(shared.to_vec::<f32>().unwrap(), [0., 0.]);
}

#[test]
fn data_dependent_operators_and_argument_errors() {
    let x = floats(&[1., 0., 3., 4.], &[2, 2]);
    assert_eq!(
        err(vmap(
            |a| ops::nonzero(&a[0]),
            &[Some(0)],
            std::slice::from_ref(&x)
        )),
        "vmap: We do not support batching operators that can output dynamic shape. Attempted \
         to vmap over aten::nonzero. Please file an issue at \
         https://github.com/pytorch/pytorch/issues if you need this feature."
    );
    assert!(err(vmap(
        |a| {
            ops::item(&ops::sum(&a[0])?)?;
            Ok(a[0].clone())
        },
        &[Some(0)],
        std::slice::from_ref(&x)
    ))
    .starts_with("vmap: It looks like you're calling .item() on a Tensor."));
    assert_eq!(
        err(vmap(
            |a| Ok(a[0].clone()),
            &[Some(2)],
            std::slice::from_ref(&x)
        )),
        "vmap(<function>, in_dims=(2,), ...)(<inputs>): Got in_dim=2 for some input, but that \
         input is a Tensor of dimensionality 2 so expected in_dim to satisfy -2 <= in_dim < 2."
    );
    assert_eq!(
        err(vmap(
            |a| ops::add(&a[0], &a[1]),
            &[Some(0), Some(0)],
            &[x.clone(), floats(&[1., 2., 3.], &[3])]
        )),
        "vmap: Expected all tensors to have the same size in the mapped dimension, got sizes \
         [2, 3] for the mapped dimension"
    );
    assert_eq!(
        err(vmap(
            |a| Ok(a[0].clone()),
            &[None],
            std::slice::from_ref(&x)
        )),
        "vmap: Expected at least one Tensor to vmap over"
    );
    assert_eq!(
        err(Vmap::new()
            .out_dims(Dims::Dim(None))
            .call(|a| Ok(a[0].clone()), &[Tree::Tensor(x.clone())])),
        "vmap(<function>, ...): `<function>` can not return a BatchedTensor when out_dim is None"
    );
    assert_eq!(
        err(Vmap::new()
            .chunk_size(Some(0))
            .call(|a| Ok(a[0].clone()), &[Tree::Tensor(x.clone())])),
        "vmap: chunk_size should be None or greater than 0. (got 0)"
    );
    assert_eq!(
        err(grad(|a| Ok(a[0].clone()), std::slice::from_ref(&x), &[0])),
        "grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor \
         with 2 dims. Maybe you wanted to use the vjp or jacrev APIs instead?"
    );
    assert_eq!(
        err(grad(|a| ops::sum(&a[0]), &[x], &[2])),
        "Got argnum=2, but only 1 positional inputs"
    );
}

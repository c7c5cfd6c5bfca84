//! `vmap` (`torch.func.vmap`): runs a function over a batch as if on one sample.

use std::fmt;

use switchboard_dispatcher::{DispatchError, DispatchErrorKind, Result};
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

use crate::batched_tensor::{batched_value, make_batched};
use crate::layers::{self, Randomness};

/// A (nested) structure of arguments or results, as PyTorch's pytrees: tensors, lists of them,
/// and `None` for anything that is not a tensor.
#[derive(Clone, Debug)]
pub enum Tree {
    /// A tensor.
    Tensor(Tensor),
    /// A list (or tuple) of values.
    List(Vec<Tree>),
    /// A value that is not a tensor.
    None,
}

impl Tree {
    /// The tensor, if this is one.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Tree::Tensor(t) => Some(t),
            _ => None,
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Tree::Tensor(_) => "Tensor",
            Tree::List(_) => "tuple",
            Tree::None => "NoneType",
        }
    }
}

/// `in_dims` / `out_dims`: one dimension (or `None`: not batched) for a whole subtree, or one
/// entry per element of a list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dims {
    /// The same dimension for every tensor of the subtree.
    Dim(Option<i64>),
    /// One entry per element.
    List(Vec<Dims>),
}

impl fmt::Display for Dims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dims::Dim(Some(d)) => write!(f, "{d}"),
            Dims::Dim(None) => write!(f, "None"),
            Dims::List(ds) => {
                write!(f, "(")?;
                for (i, d) in ds.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{d}")?;
                }
                if ds.len() == 1 {
                    write!(f, ",")?;
                }
                write!(f, ")")
            }
        }
    }
}

impl From<&[Option<i64>]> for Dims {
    fn from(dims: &[Option<i64>]) -> Dims {
        Dims::List(dims.iter().map(|&d| Dims::Dim(d)).collect())
    }
}

/// `torch.func.vmap`'s options: `in_dims`, `out_dims`, `randomness`, `chunk_size`, and the
/// function's name for error messages.
#[derive(Clone, Debug)]
pub struct Vmap {
    in_dims: Dims,
    out_dims: Dims,
    randomness: Randomness,
    chunk_size: Option<usize>,
    name: String,
}

impl Default for Vmap {
    fn default() -> Self {
        Vmap {
            in_dims: Dims::Dim(Some(0)),
            out_dims: Dims::Dim(Some(0)),
            randomness: Randomness::Error,
            chunk_size: None,
            name: "<function>".into(),
        }
    }
}

fn value_error(message: String) -> DispatchError {
    DispatchError::from(DispatchErrorKind::Kernel(message))
}

impl Vmap {
    /// PyTorch's defaults: `in_dims=0`, `out_dims=0`, `randomness="error"`, no chunks.
    pub fn new() -> Vmap {
        Vmap::default()
    }
    /// `in_dims`.
    pub fn in_dims(mut self, in_dims: Dims) -> Self {
        self.in_dims = in_dims;
        self
    }
    /// `out_dims`.
    pub fn out_dims(mut self, out_dims: Dims) -> Self {
        self.out_dims = out_dims;
        self
    }
    /// `randomness`.
    pub fn randomness(mut self, randomness: Randomness) -> Self {
        self.randomness = randomness;
        self
    }
    /// `chunk_size`: at most this many samples per call of the function.
    pub fn chunk_size(mut self, chunk_size: Option<usize>) -> Self {
        self.chunk_size = chunk_size;
        self
    }
    /// The function's name in error messages.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Runs `f` over the batch of `args`.
    pub fn call(&self, f: impl Fn(&[Tree]) -> Result<Tree>, args: &[Tree]) -> Result<Tree> {
        if self.chunk_size == Some(0) {
            return Err(value_error(
                "vmap: chunk_size should be None or greater than 0. (got 0)".into(),
            ));
        }
        let prefix = format!(
            "vmap({}, in_dims={}, ...)(<inputs>)",
            self.name, self.in_dims
        );
        let mut mapped: Vec<(Tensor, i64)> = Vec::new();
        let args_tree = Tree::List(args.to_vec());
        let dims = match &self.in_dims {
            Dims::Dim(None) => {
                return Err(value_error(format!(
                    "{prefix}: expected `in_dims` to be int or a (potentially nested) tuple \
                     matching the structure of inputs, got: <class 'NoneType'>."
                )))
            }
            d => d.clone(),
        };
        collect_mapped(&args_tree, &dims, &prefix, &mut mapped)?;
        if mapped.is_empty() {
            return Err(value_error(
                "vmap: Expected at least one Tensor to vmap over".into(),
            ));
        }
        let sizes: Vec<i64> = mapped.iter().map(|(t, d)| t.sizes()[*d as usize]).collect();
        if sizes.iter().any(|&s| s != sizes[0]) {
            return Err(value_error(format!(
                "vmap: Expected all tensors to have the same size in the mapped dimension, got \
                 sizes {sizes:?} for the mapped dimension"
            )));
        }
        let batch_size = sizes[0];
        match self.chunk_size {
            Some(chunk) if (chunk as i64) < batch_size => {
                self.call_chunked(&f, &args_tree, &dims, batch_size, chunk as i64)
            }
            _ => self.call_once(&f, &args_tree, &dims, batch_size),
        }
    }

    fn call_once(
        &self,
        f: &impl Fn(&[Tree]) -> Result<Tree>,
        args: &Tree,
        dims: &Dims,
        batch_size: i64,
    ) -> Result<Tree> {
        let (level, guard) = layers::push_vmap(batch_size, self.randomness);
        let wrapped = map_tensors(args, dims, &mut |t, d| match d {
            Some(d) => make_batched(t.clone(), wrap(d, t.dim())? as usize, level),
            None => Ok(t.clone()),
        })?;
        let Tree::List(wrapped) = wrapped else {
            unreachable!("the arguments are a list")
        };
        let out = f(&wrapped);
        drop(guard);
        let out = out?;
        self.unwrap_outputs(out, level, batch_size)
    }

    /// `chunk_size`: the batch in slices of at most `chunk` samples, each a vmap of its own,
    /// concatenated along the output dimensions.
    fn call_chunked(
        &self,
        f: &impl Fn(&[Tree]) -> Result<Tree>,
        args: &Tree,
        dims: &Dims,
        batch_size: i64,
        chunk: i64,
    ) -> Result<Tree> {
        let mut outputs = Vec::new();
        let mut start = 0;
        while start < batch_size {
            let len = chunk.min(batch_size - start);
            let sliced = map_tensors(args, dims, &mut |t, d| match d {
                Some(d) => ops::narrow(t, d, start, len),
                None => Ok(t.clone()),
            })?;
            outputs.push(self.call_once(f, &sliced, dims, len)?);
            start += len;
        }
        concat_outputs(&outputs, &self.out_dims)
    }

    fn unwrap_outputs(&self, out: Tree, level: u32, batch_size: i64) -> Result<Tree> {
        let name = &self.name;
        let out_dims = match (&out, &self.out_dims) {
            // One output and one out_dim for it.
            (Tree::Tensor(_), d) => d.clone(),
            (_, d) => d.clone(),
        };
        unwrap_tree(
            out,
            &out_dims,
            &mut |t: Option<&Tensor>, d: Option<i64>, ty| {
                let Some(t) = t else {
                    return match d {
                        None => Ok(None),
                        Some(_) => Err(value_error(format!(
                            "vmap({name}, ...): `{name}` must only return Tensors, got type {ty}. \
                         Did you mean to set out_dims= to None for output?"
                        ))),
                    };
                };
                let batched_here = batched_value(t).filter(|b| b.level == level);
                match (batched_here, d) {
                    (Some(_), None) => Err(value_error(format!(
                    "vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is \
                     None"
                ))),
                    (None, None) => Ok(Some(t.clone())),
                    (Some(b), Some(d)) => {
                        let d = wrap(d, b.value.dim())?;
                        Ok(Some(move_dim(&b.value, b.bdim as i64, d)?))
                    }
                    (None, Some(d)) => {
                        let d = wrap(d, t.dim() + 1)?;
                        let mut sizes: Vec<i64> = t.sizes().to_vec();
                        sizes.insert(d as usize, batch_size);
                        Ok(Some(ops::expand(&ops::unsqueeze(t, d)?, &sizes)?))
                    }
                }
            },
        )
    }
}

/// Wraps dimension `d` of a tensor of `rank` dimensions, with PyTorch's message.
fn wrap(d: i64, rank: usize) -> Result<i64> {
    let r = rank.max(1) as i64;
    if d < -r || d >= r {
        return Err(value_error(format!(
            "Dimension out of range (expected to be in range of [{}, {}], but got {d})",
            -r,
            r - 1
        )));
    }
    Ok(if d < 0 { d + r } else { d })
}

/// `t` with dimension `from` moved to `to` (a view).
fn move_dim(t: &Tensor, from: i64, to: i64) -> Result<Tensor> {
    if from == to {
        return Ok(t.clone());
    }
    let mut order: Vec<i64> = (0..t.dim() as i64).filter(|&d| d != from).collect();
    order.insert(to as usize, from);
    ops::permute(t, &order)
}

/// The mapped tensors of `tree` with their (wrapped) in_dims, checking the structure.
fn collect_mapped(
    tree: &Tree,
    dims: &Dims,
    prefix: &str,
    out: &mut Vec<(Tensor, i64)>,
) -> Result<()> {
    match (tree, dims) {
        (Tree::List(items), Dims::List(ds)) => {
            if items.len() != ds.len() {
                return Err(value_error(format!(
                    "{prefix}: in_dims is not compatible with the structure of `inputs`. in_dims \
                     has {} elements but inputs has {}.",
                    ds.len(),
                    items.len()
                )));
            }
            for (item, d) in items.iter().zip(ds) {
                collect_mapped(item, d, prefix, out)?;
            }
            Ok(())
        }
        (Tree::List(items), d @ Dims::Dim(_)) => {
            for item in items {
                collect_mapped(item, d, prefix, out)?;
            }
            Ok(())
        }
        (Tree::Tensor(t), Dims::Dim(Some(d))) => {
            let n = t.dim() as i64;
            if *d < -n || *d >= n {
                return Err(value_error(format!(
                    "{prefix}: Got in_dim={d} for some input, but that input is a Tensor of \
                     dimensionality {n} so expected in_dim to satisfy -{n} <= in_dim < {n}."
                )));
            }
            out.push((t.clone(), if *d < 0 { d + n } else { *d }));
            Ok(())
        }
        (Tree::None, Dims::Dim(Some(d))) => Err(value_error(format!(
            "{prefix}: Got in_dim={d} for an input but the input is of type {}. We cannot vmap \
             over non-Tensor arguments, please use None as the respective in_dim",
            tree.type_name()
        ))),
        (_, Dims::Dim(None)) => Ok(()),
        (_, Dims::List(_)) => Err(value_error(format!(
            "{prefix}: in_dims is not compatible with the structure of `inputs`."
        ))),
    }
}

/// `tree` with each tensor replaced by `f(tensor, its dim)`.
fn map_tensors(
    tree: &Tree,
    dims: &Dims,
    f: &mut impl FnMut(&Tensor, Option<i64>) -> Result<Tensor>,
) -> Result<Tree> {
    Ok(match (tree, dims) {
        (Tree::List(items), Dims::List(ds)) => Tree::List(
            items
                .iter()
                .zip(ds)
                .map(|(i, d)| map_tensors(i, d, f))
                .collect::<Result<_>>()?,
        ),
        (Tree::List(items), d) => Tree::List(
            items
                .iter()
                .map(|i| map_tensors(i, d, f))
                .collect::<Result<_>>()?,
        ),
        (Tree::Tensor(t), Dims::Dim(d)) => Tree::Tensor(f(t, *d)?),
        (other, _) => other.clone(),
    })
}

type Unwrap<'a> = dyn FnMut(Option<&Tensor>, Option<i64>, &str) -> Result<Option<Tensor>> + 'a;

/// The outputs, each leaf through `f` with its out_dim.
fn unwrap_tree(tree: Tree, dims: &Dims, f: &mut Unwrap<'_>) -> Result<Tree> {
    match (tree, dims) {
        (Tree::List(items), Dims::List(ds)) => {
            if items.len() != ds.len() {
                return Err(value_error(format!(
                    "vmap: out_dims is not compatible with the structure of `outputs`. out_dims \
                     has {} elements but outputs has {}.",
                    ds.len(),
                    items.len()
                )));
            }
            Ok(Tree::List(
                items
                    .into_iter()
                    .zip(ds)
                    .map(|(i, d)| unwrap_tree(i, d, f))
                    .collect::<Result<_>>()?,
            ))
        }
        (Tree::List(items), d @ Dims::Dim(_)) => Ok(Tree::List(
            items
                .into_iter()
                .map(|i| unwrap_tree(i, d, f))
                .collect::<Result<_>>()?,
        )),
        (Tree::Tensor(t), Dims::Dim(d)) => Ok(f(Some(&t), *d, "Tensor")?
            .map(Tree::Tensor)
            .unwrap_or(Tree::None)),
        (Tree::None, Dims::Dim(d)) => {
            f(None, *d, "<class 'NoneType'>")?;
            Ok(Tree::None)
        }
        (_, Dims::List(_)) => Err(value_error(
            "vmap: out_dims is not compatible with the structure of `outputs`.".into(),
        )),
    }
}

/// The chunks' outputs concatenated along their out_dims.
fn concat_outputs(chunks: &[Tree], dims: &Dims) -> Result<Tree> {
    match (&chunks[0], dims) {
        (Tree::Tensor(_), Dims::Dim(Some(d))) => {
            let ts: Vec<Tensor> = chunks
                .iter()
                .filter_map(|c| c.as_tensor().cloned())
                .collect();
            let d = wrap(*d, ts[0].dim())?;
            Ok(Tree::Tensor(ops::cat_with(
                &ts,
                ops::CatOptions::default().dim(d),
            )?))
        }
        (Tree::List(first), _) => {
            let mut out = Vec::with_capacity(first.len());
            for i in 0..first.len() {
                let column: Vec<Tree> = chunks
                    .iter()
                    .map(|c| match c {
                        Tree::List(items) => items[i].clone(),
                        other => other.clone(),
                    })
                    .collect();
                let d = match dims {
                    Dims::List(ds) => ds[i].clone(),
                    d => d.clone(),
                };
                out.push(concat_outputs(&column, &d)?);
            }
            Ok(Tree::List(out))
        }
        (other, _) => Ok(other.clone()),
    }
}

/// `vmap(f, in_dims)(*args)` for a function of tensors returning one tensor, `out_dims=0`.
///
/// ```
/// use switchboard_cpu as _;
/// use switchboard_functorch::vmap;
/// use switchboard_ops as ops;
/// use switchboard_tensor::Tensor;
/// let x = Tensor::from_vec(vec![1.0f32, 2., 3., 4.], &[2, 2])?;
/// let w = Tensor::from_vec(vec![10.0f32, 20.], &[2])?;
/// // Each row of x times the shared w (in_dims=(0, None)).
/// let y = vmap(|a| ops::mul(&a[0], &a[1]), &[Some(0), None], &[x, w])?;
/// assert_eq!(y.to_vec::<f32>()?, [10., 40., 30., 80.]);
/// # Ok::<(), switchboard_dispatcher::DispatchError>(())
/// ```
pub fn vmap(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    in_dims: &[Option<i64>],
    args: &[Tensor],
) -> Result<Tensor> {
    let trees: Vec<Tree> = args.iter().cloned().map(Tree::Tensor).collect();
    let out = Vmap::new().in_dims(Dims::from(in_dims)).call(
        |xs| {
            let ts: Vec<Tensor> = xs.iter().filter_map(|x| x.as_tensor().cloned()).collect();
            f(&ts).map(Tree::Tensor)
        },
        &trees,
    )?;
    match out {
        Tree::Tensor(t) => Ok(t),
        _ => unreachable!("one tensor in, one tensor out"),
    }
}

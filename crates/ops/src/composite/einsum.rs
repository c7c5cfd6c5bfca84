//! `einsum` (CompositeImplicitAutograd, as in PyTorch): the operands are aligned to one
//! dimension order (output subscripts first, then the contracted ones; repeated subscripts
//! of one operand taken as a diagonal, missing ones as size 1), then contracted left to right,
//! each pair as one `bmm` over its batch, left-only, right-only and summed dimensions (a
//! product when nothing is summed), as PyTorch's `sumproduct_pair`.

use switchboard_dispatcher::Result;
use switchboard_tensor::Tensor;

use super::error;

/// Subscripts `A`-`Z` and `a`-`z`, numbered with the upper case first (the order of an
/// implicit output).
const LABELS: usize = 52;

fn label_index(c: u8) -> Option<usize> {
    match c {
        b'A'..=b'Z' => Some((c - b'A') as usize),
        b'a'..=b'z' => Some((c - b'a') as usize + 26),
        _ => None,
    }
}

fn label_char(l: usize) -> char {
    if l < 26 {
        (b'A' + l as u8) as char
    } else {
        (b'a' + (l - 26) as u8) as char
    }
}

/// One side of the equation: its subscripts, with `None` for the ellipsis.
type Subscripts = Vec<Option<usize>>;

fn invalid_subscript(i: usize) -> switchboard_dispatcher::DispatchError {
    error(format!(
        "einsum(): invalid subscript given at index {i} in the equation string, subscripts must \
         be in [a-zA-Z]"
    ))
}

/// The operands' subscripts and the output's (if the equation has `->`).
fn parse(equation: &str) -> Result<(Vec<Subscripts>, Option<Subscripts>)> {
    let bytes = equation.as_bytes();
    let mut operands: Vec<Subscripts> = vec![Vec::new()];
    let mut output: Option<Subscripts> = None;
    let mut dots = 0;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let in_output = output.is_some();
        let whose = if in_output {
            "output".to_string()
        } else {
            format!("operand {}", operands.len() - 1)
        };
        let side = match &mut output {
            Some(out) => out,
            None => operands.last_mut().expect("one operand at least"),
        };
        match c {
            b' ' => {}
            b'.' => {
                if side.contains(&None) {
                    let already = if in_output {
                        "but an ellipsis (...) was already found"
                    } else {
                        "for which an ellipsis was already found"
                    };
                    return Err(error(format!("einsum(): found '.' for {whose} {already}")));
                }
                dots += 1;
                let next_is_dot = bytes.get(i + 1) == Some(&b'.');
                if dots == 3 {
                    side.push(None);
                    dots = 0;
                } else if !next_is_dot {
                    let tail = if in_output { " (...)" } else { "" };
                    return Err(error(format!(
                        "einsum(): found '.' for {whose} that is not part of any ellipsis{tail}"
                    )));
                }
            }
            b',' if !in_output => operands.push(Vec::new()),
            b'-' if !in_output && bytes.get(i + 1) == Some(&b'>') => {
                output = Some(Vec::new());
                i += 1;
            }
            _ => match label_index(c) {
                Some(l) => side.push(Some(l)),
                None => return Err(invalid_subscript(i)),
            },
        }
        i += 1;
    }
    Ok((operands, output))
}

/// `einsum(str equation, Tensor[] tensors, *, int[]? path=None) -> Tensor`: the contraction
/// `equation` describes (numpy's notation: `ij,jk->ik`, an ellipsis for broadcast dimensions,
/// an implicit output of the subscripts seen once, in order). Operands are contracted two at a
/// time, left to right, or in the order `path` gives (opt_einsum's format, flattened: each
/// pair of indices names two operands of the current list, which are replaced by their
/// contraction at its end).
pub fn einsum(equation: &str, tensors: &[Tensor], path: Option<&[i64]>) -> Result<Tensor> {
    if tensors.is_empty() {
        return Err(error("einsum(): must provide at least one operand"));
    }
    if let Some(path) = path {
        let expected = if tensors.len() == 1 {
            1
        } else {
            (tensors.len() - 1) * 2
        };
        if path.len() != expected {
            return Err(error(format!(
                "einsum(): expected contraction path given in path parameter to have size \
                 {expected} but got {}",
                path.len()
            )));
        }
    }
    let (operands, output) = parse(equation)?;
    if operands.len() < tensors.len() {
        return Err(error(
            "einsum(): more operands were provided than specified in the equation",
        ));
    }
    if operands.len() > tensors.len() {
        return Err(error(
            "einsum(): fewer operands were provided than specified in the equation",
        ));
    }
    // The number of dimensions each ellipsis stands for, and the most of any operand.
    let mut ell_dims = vec![0usize; tensors.len()];
    let mut label_count = [0usize; LABELS];
    for (i, (subs, t)) in operands.iter().zip(tensors).enumerate() {
        let labels = subs.iter().flatten().count();
        let ndim = t.dim();
        if subs.contains(&None) {
            if labels > ndim {
                return Err(error(format!(
                    "einsum(): the number of subscripts in the equation ({labels}) is more than \
                     the number of dimensions ({ndim}) for operand {i}"
                )));
            }
            ell_dims[i] = ndim - labels;
        } else if labels != ndim {
            return Err(error(format!(
                "einsum(): the number of subscripts in the equation ({labels}) does not match \
                 the number of dimensions ({ndim}) for operand {i} and no ellipsis was given"
            )));
        }
        for &l in subs.iter().flatten() {
            label_count[l] += 1;
        }
    }
    let ell = ell_dims.iter().copied().max().unwrap_or(0);
    // The output: explicit, or the ellipsis then the subscripts seen once, in order.
    let output = match output {
        Some(out) => {
            let mut seen = [false; LABELS];
            for &l in out.iter().flatten() {
                if seen[l] {
                    return Err(error(format!(
                        "einsum(): output subscript {} appears more than once in the output",
                        label_char(l)
                    )));
                }
                if label_count[l] == 0 {
                    return Err(error(format!(
                        "einsum(): output subscript {} does not appear in the equation for any \
                         input operand",
                        label_char(l)
                    )));
                }
                seen[l] = true;
            }
            out
        }
        None => {
            let mut out: Subscripts = Vec::new();
            if operands.iter().any(|s| s.contains(&None)) {
                out.push(None);
            }
            out.extend((0..LABELS).filter(|&l| label_count[l] == 1).map(Some));
            out
        }
    };
    // The aligned order: the output (the ellipsis where it stands), then the summed
    // dimensions (the ellipsis first if the output has none, then the other subscripts).
    let mut position = [usize::MAX; LABELS];
    let mut ell_position = usize::MAX;
    let mut next = 0;
    for &sub in &output {
        match sub {
            None => {
                ell_position = next;
                next += ell;
            }
            Some(l) => {
                position[l] = next;
                next += 1;
            }
        }
    }
    let out_dims = next;
    if !output.contains(&None) {
        ell_position = next;
        next += ell;
    }
    for l in 0..LABELS {
        if label_count[l] > 0 && position[l] == usize::MAX {
            position[l] = next;
            next += 1;
        }
    }
    let total = next;
    // Each operand permuted into that order, with size-1 dimensions where it has none.
    let mut sizes = vec![1i64; total];
    let mut aligned = Vec::with_capacity(tensors.len());
    for (i, (subs, t)) in operands.iter().zip(tensors).enumerate() {
        let mut t = t.clone();
        // target[d]: the aligned position of the operand's dimension d.
        let mut target: Vec<usize> = Vec::with_capacity(t.dim());
        for &sub in subs {
            match sub {
                None => target.extend((ell - ell_dims[i]..ell).map(|k| ell_position + k)),
                Some(l) => {
                    let d = target.len();
                    if let Some(prev) = target.iter().position(|&p| p == position[l]) {
                        // A repeated subscript: the diagonal of the two dimensions.
                        let (a, b) = (t.sizes()[prev], t.sizes()[d]);
                        if a != b {
                            return Err(error(format!(
                                "einsum(): subscript {} is repeated for operand {i} but the sizes \
                                 don't match, {b} != {a}",
                                label_char(l)
                            )));
                        }
                        let diag = crate::diagonal_with(
                            &t,
                            crate::DiagonalOptions::default()
                                .dim1(prev as i64)
                                .dim2(d as i64),
                        )?;
                        // The diagonal comes last: back to the first dimension's place.
                        let n = diag.dim() as i64;
                        let mut perm: Vec<i64> = (0..n - 1).collect();
                        perm.insert(prev, n - 1);
                        t = crate::permute(&diag, &perm)?;
                        continue;
                    }
                    target.push(position[l]);
                }
            }
        }
        for (d, &p) in target.iter().enumerate() {
            let s = t.sizes()[d];
            if s != 1 && sizes[p] != 1 && sizes[p] != s {
                return Err(error(match output_or_label(&position, p) {
                    Some(l) => format!(
                        "einsum(): subscript {} has size {s} for operand {i} which does not \
                         broadcast with previously seen size {}",
                        label_char(l),
                        sizes[p]
                    ),
                    None => format!(
                        "einsum(): dimension {} covered by ellipsis in operand {i}has size {s} \
                         which does not broadcast with previously seen ellipsis with size {} for \
                         the respective dimension",
                        p - ell_position,
                        sizes[p]
                    ),
                }));
            }
            if s != 1 {
                sizes[p] = s;
            }
        }
        // Missing dimensions as trailing size-1 ones, then the permutation into place.
        let mut perm = vec![usize::MAX; total];
        for (d, &p) in target.iter().enumerate() {
            perm[p] = d;
        }
        let mut shape = t.sizes().to_vec();
        for (extra, p) in (target.len()..).zip(perm.iter_mut().filter(|p| **p == usize::MAX)) {
            *p = extra;
            shape.push(1);
        }
        let t = crate::reshape(&t, &shape)?;
        let perm: Vec<i64> = perm.iter().map(|&d| d as i64).collect();
        aligned.push(crate::permute(&t, &perm)?);
    }
    let summed: Vec<usize> = (out_dims..total).collect();
    if aligned.len() == 1 {
        let t = aligned.pop().expect("one operand");
        if summed.is_empty() {
            return Ok(t);
        }
        let dims: Vec<i64> = summed.iter().map(|&d| d as i64).collect();
        return crate::sum_dim_int_list(&t, Some(&dims));
    }
    // How many operands each summed dimension has more than one element in: a dimension is
    // summed in the contraction that leaves it in one operand, or beforehand in the only
    // operand that has it, as PyTorch counts.
    let mut counts: Vec<usize> = (0..total)
        .map(|d| aligned.iter().filter(|t| t.sizes()[d] != 1).count())
        .collect();
    let mut pairs = path.unwrap_or_default().chunks_exact(2);
    while aligned.len() > 1 {
        let (i, j) = match pairs.next() {
            Some(&[a, b]) => {
                let (i, j) = if b < a { (b, a) } else { (a, b) };
                if i == j || i < 0 || j >= aligned.len() as i64 {
                    return Err(error(format!(
                        "einsum(): invalid contraction ({i}, {j}){}",
                        if i == j {
                            " cannot contract an operand with itself"
                        } else {
                            " operand index is out of bounds"
                        }
                    )));
                }
                (i as usize, j as usize)
            }
            _ => (0, 1),
        };
        let b = aligned.remove(j);
        let a = aligned.remove(i);
        let (mut sum_now, mut a_only, mut b_only) = (Vec::new(), Vec::new(), Vec::new());
        for (d, count) in counts.iter_mut().enumerate().skip(out_dims) {
            let (in_a, in_b) = (a.sizes()[d] != 1, b.sizes()[d] != 1);
            if in_a && in_b {
                *count -= 1;
                if *count == 1 {
                    sum_now.push(d);
                    *count = 0;
                }
            } else if *count == 1 && (in_a || in_b) {
                if in_a { &mut a_only } else { &mut b_only }.push(d as i64);
                *count = 0;
            }
        }
        let keep = crate::SumDimIntListOptions::default().keepdim(true);
        let a = match a_only.is_empty() {
            true => a,
            false => crate::sum_dim_int_list_with(&a, Some(&a_only), keep)?,
        };
        let b = match b_only.is_empty() {
            true => b,
            false => crate::sum_dim_int_list_with(&b, Some(&b_only), keep)?,
        };
        // Without a path the result is contracted next (it goes first); with one it goes
        // last, where opt_einsum's indices expect it.
        let product = sumproduct_pair(&a, &b, &sum_now)?;
        match path {
            Some(_) => aligned.push(product),
            None => aligned.insert(0, product),
        }
    }
    let result = aligned.pop().expect("one operand left");
    let out_shape: Vec<i64> = result.sizes()[..out_dims].to_vec();
    crate::reshape(&result, &out_shape)
}

/// The subscript placed at aligned position `p`, `None` for an ellipsis dimension.
fn output_or_label(position: &[usize; LABELS], p: usize) -> Option<usize> {
    position.iter().position(|&q| q == p)
}

/// `left * right` summed over `sum_dims` (kept as size 1): both have the same number of
/// dimensions, each of size 1 or the other's. One `bmm` of `[batch, left-only, summed]` by
/// `[batch, summed, right-only]`.
fn sumproduct_pair(left: &Tensor, right: &Tensor, sum_dims: &[usize]) -> Result<Tensor> {
    if sum_dims.is_empty() {
        return crate::mul(left, right);
    }
    let ndim = left.dim();
    let (mut left, mut right) = (left.clone(), right.clone());
    let (mut batch, mut lonly, mut ronly, mut sum) = (vec![], vec![], vec![], vec![]);
    let (mut batch_size, mut lonly_size, mut ronly_size, mut sum_size) = (1i64, 1i64, 1i64, 1i64);
    for d in 0..ndim {
        let (l, r) = (left.sizes()[d], right.sizes()[d]);
        if sum_dims.contains(&d) {
            if l != 1 && r != 1 {
                sum.push(d);
                sum_size *= l;
            } else if l != 1 {
                left = crate::sum_dim_int_list_with(
                    &left,
                    Some(&[d as i64]),
                    crate::SumDimIntListOptions::default().keepdim(true),
                )?;
            } else if r != 1 {
                right = crate::sum_dim_int_list_with(
                    &right,
                    Some(&[d as i64]),
                    crate::SumDimIntListOptions::default().keepdim(true),
                )?;
            }
        } else if l != 1 && r != 1 {
            batch.push(d);
            batch_size *= l;
        } else if l != 1 {
            lonly.push(d);
            lonly_size *= l;
        } else {
            ronly.push(d);
            ronly_size *= r;
        }
    }
    // Summed dimensions of size 1 on both sides stay where they are, as size 1.
    let ones: Vec<usize> = sum_dims
        .iter()
        .copied()
        .filter(|d| !sum.contains(d))
        .collect();
    let order = |parts: [&[usize]; 5]| -> Vec<i64> {
        parts
            .iter()
            .flat_map(|p| p.iter())
            .map(|&d| d as i64)
            .collect()
    };
    let l = crate::permute(&left, &order([&batch, &lonly, &sum, &ronly, &ones]))?;
    let l = crate::reshape(&l, &[batch_size, lonly_size, sum_size])?;
    let r = crate::permute(&right, &order([&batch, &sum, &ronly, &lonly, &ones]))?;
    let r = crate::reshape(&r, &[batch_size, sum_size, ronly_size])?;
    let product = crate::bmm(&l, &r)?;
    // Back to the operands' order, the summed dimensions as size 1.
    let out_order: Vec<usize> = [&batch, &lonly, &ronly, &sum, &ones]
        .iter()
        .flat_map(|p| p.iter().copied())
        .collect();
    let out_sizes: Vec<i64> = out_order
        .iter()
        .map(|&d| {
            if sum_dims.contains(&d) {
                1
            } else {
                left.sizes()[d].max(right.sizes()[d])
            }
        })
        .collect();
    let product = crate::reshape(&product, &out_sizes)?;
    let mut inverse = vec![0i64; ndim];
    for (k, &d) in out_order.iter().enumerate() {
        inverse[d] = k as i64;
    }
    crate::permute(&product, &inverse)
}

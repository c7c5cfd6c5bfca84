//! Property tests of the CPU kernels over random shapes, broadcasting, strides (permuted
//! views) and dtypes, against a reference computed element by element in f64 from the
//! tensor crate's own (non-kernel) strided reads.

use proptest::prelude::*;
use switchboard_cpu as cpu;
use switchboard_tensor::{promote_types, RawOps, Scalar, ScalarType, Tensor};

const DTYPES: &[ScalarType] = &[
    ScalarType::Float,
    ScalarType::Double,
    ScalarType::Int,
    ScalarType::Long,
    ScalarType::Short,
];

/// A tensor of `shape` and `dtype` with small integer values, built permuted then permuted
/// back when `perm_seed` asks for it, so its strides are not contiguous.
fn make(shape: &[i64], dtype: ScalarType, values: &[i8], perm_seed: usize) -> Tensor {
    let n: i64 = shape.iter().product();
    let data: Vec<f64> = (0..n as usize)
        .map(|i| values[i % values.len()] as f64)
        .collect();
    let rank = shape.len();
    if rank < 2 || perm_seed.is_multiple_of(2) {
        let t = Tensor::from_vec(data, shape).unwrap();
        return cpu::cast(&t, dtype).unwrap();
    }
    // Reverse the dims: store the tensor transposed, then view it back.
    let rev: Vec<i64> = shape.iter().rev().copied().collect();
    let t = cpu::cast(&Tensor::from_vec(data, &rev).unwrap(), dtype).unwrap();
    let perm: Vec<i64> = (0..rank as i64).rev().collect();
    t.permute(&perm).unwrap()
}

fn shapes() -> impl Strategy<Value = (Vec<i64>, Vec<i64>)> {
    prop::collection::vec(1i64..4, 0..4).prop_flat_map(|a| {
        let len = a.len();
        (
            Just(a.clone()),
            prop::collection::vec(any::<bool>(), len),
            0..=len,
        )
            .prop_map(|(a, ones, drop)| {
                // b: a suffix of a's dims, some set to 1 (broadcast).
                let b: Vec<i64> = a[drop..]
                    .iter()
                    .zip(&ones[drop..])
                    .map(|(&s, &one)| if one { 1 } else { s })
                    .collect();
                (a, b)
            })
    })
}

fn reference(a: &Tensor, b: &Tensor, out_shape: &[i64], f: impl Fn(f64, f64) -> f64) -> Vec<f64> {
    let ea = a.expand(out_shape).unwrap().to_vec_as::<f64>().unwrap();
    let eb = b.expand(out_shape).unwrap().to_vec_as::<f64>().unwrap();
    ea.iter().zip(&eb).map(|(x, y)| f(*x, *y)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn add_mul_broadcast_promote(
        (sa, sb) in shapes(),
        da in 0..DTYPES.len(), db in 0..DTYPES.len(),
        va in prop::collection::vec(-5i8..5, 1..7), vb in prop::collection::vec(-5i8..5, 1..7),
        pa in 0usize..2, pb in 0usize..2, swap in any::<bool>(),
    ) {
        let (sa, sb) = if swap { (sb, sa) } else { (sa, sb) };
        let (ta, tb) = (DTYPES[da], DTYPES[db]);
        let a = make(&sa, ta, &va, pa);
        let b = make(&sb, tb, &vb, pb);
        let out_shape = switchboard_tensor::infer_size(&sa, &sb).unwrap().to_vec();
        // PyTorch's result_type: a zero-dim operand only decides the dtype when its category
        // (integral < floating) is higher than the dimensioned operand's.
        let cat = |t: ScalarType| t.is_floating_point() as u8;
        let want_dtype = match (sa.is_empty(), sb.is_empty()) {
            (true, false) if cat(ta) <= cat(tb) => tb,
            (false, true) if cat(tb) <= cat(ta) => ta,
            _ => promote_types(ta, tb),
        };

        let sum = cpu::add_tensor(&a, &b, Scalar::Int(2)).unwrap();
        prop_assert_eq!(sum.sizes(), &out_shape[..]);
        prop_assert_eq!(sum.dtype(), want_dtype);
        prop_assert_eq!(sum.to_vec_as::<f64>().unwrap(), reference(&a, &b, &out_shape, |x, y| x + 2.0 * y));

        let prod = cpu::mul_tensor(&a, &b).unwrap();
        prop_assert_eq!(prod.to_vec_as::<f64>().unwrap(), reference(&a, &b, &out_shape, |x, y| x * y));

        let gt = cpu::gt_tensor(&a, &b).unwrap();
        prop_assert_eq!(gt.dtype(), ScalarType::Bool);
        prop_assert_eq!(gt.to_vec_as::<f64>().unwrap(), reference(&a, &b, &out_shape, |x, y| (x > y) as i32 as f64));
    }

    #[test]
    fn sum_over_dims_matches_reference(
        shape in prop::collection::vec(1i64..5, 1..4),
        d in 0..DTYPES.len(),
        v in prop::collection::vec(-5i8..5, 1..7),
        p in 0usize..2, keepdim in any::<bool>(), dim_seed in any::<usize>(),
    ) {
        let t = make(&shape, DTYPES[d], &v, p);
        let dim = (dim_seed % shape.len()) as i64;
        let s = cpu::sum_dim_int_list(&t, Some(&[dim]), keepdim, None).unwrap();
        // Reference: sum the selected slices.
        let mut want: Option<Vec<f64>> = None;
        for i in 0..shape[dim as usize] {
            let slice = t.select(dim, i).unwrap().to_vec_as::<f64>().unwrap();
            want = Some(match want {
                None => slice,
                Some(w) => w.iter().zip(&slice).map(|(x, y)| x + y).collect(),
            });
        }
        prop_assert_eq!(s.to_vec_as::<f64>().unwrap(), want.unwrap());
        let mut want_shape = shape.clone();
        if keepdim { want_shape[dim as usize] = 1 } else { want_shape.remove(dim as usize); }
        prop_assert_eq!(s.sizes(), &want_shape[..]);
        let integral = !DTYPES[d].is_floating_point();
        prop_assert_eq!(s.dtype(), if integral { ScalarType::Long } else { DTYPES[d] });
    }

    #[test]
    fn mm_matches_naive_on_strided_inputs(
        n in 1i64..6, k in 1i64..6, m in 1i64..6,
        v in prop::collection::vec(-5i8..5, 1..9), ta in any::<bool>(), tb in any::<bool>(),
        d in 0usize..2,
    ) {
        let dtype = [ScalarType::Float, ScalarType::Double][d];
        let a = if ta { make(&[k, n], dtype, &v, 0).t().unwrap() } else { make(&[n, k], dtype, &v, 0) };
        let b = if tb { make(&[m, k], dtype, &v[1..].iter().chain(&v[..1]).copied().collect::<Vec<_>>(), 0).t().unwrap() } else { make(&[k, m], dtype, &v, 1) };
        let c = cpu::mm(&a, &b).unwrap();
        let (av, bv) = (a.to_vec_as::<f64>().unwrap(), b.to_vec_as::<f64>().unwrap());
        let mut want = vec![0.0; (n * m) as usize];
        for i in 0..n as usize { for j in 0..m as usize { for p in 0..k as usize {
            want[i * m as usize + j] += av[i * k as usize + p] * bv[p * m as usize + j];
        }}}
        prop_assert_eq!(c.to_vec_as::<f64>().unwrap(), want);
    }
}

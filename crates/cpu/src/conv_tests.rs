//! Tests of the convolutions against a direct f64 reference and finite differences.

use super::*;
use crate::nn_testutil::{assert_close, dot, numeric_grad, ramp};

/// Convolution parameters for the reference: (stride, padding, dilation) per spatial dim.
struct P {
    s: [usize; 2],
    p: [usize; 2],
    d: [usize; 2],
    groups: usize,
}

/// A direct 2-d convolution of `(N, C, H, W)` by `(O, C/g, KH, KW)` in f64.
fn reference(x: &Tensor, w: &Tensor, b: Option<&Tensor>, p: &P) -> (Vec<f64>, Vec<usize>) {
    let (xs, ws) = (x.sizes(), w.sizes());
    let (n, c, h, wd) = (
        xs[0] as usize,
        xs[1] as usize,
        xs[2] as usize,
        xs[3] as usize,
    );
    let (o, cg, kh, kw) = (
        ws[0] as usize,
        ws[1] as usize,
        ws[2] as usize,
        ws[3] as usize,
    );
    let og = o / p.groups;
    let oh = (h + 2 * p.p[0] - p.d[0] * (kh - 1) - 1) / p.s[0] + 1;
    let ow = (wd + 2 * p.p[1] - p.d[1] * (kw - 1) - 1) / p.s[1] + 1;
    let xv = x.to_vec_as::<f64>().unwrap();
    let wv = w.to_vec_as::<f64>().unwrap();
    let bv = b.map(|b| b.to_vec_as::<f64>().unwrap());
    let mut out = vec![0.0; n * o * oh * ow];
    for ni in 0..n {
        for oc in 0..o {
            let g = oc / og;
            for y in 0..oh {
                for xx in 0..ow {
                    let mut acc = bv.as_ref().map_or(0.0, |b| b[oc]);
                    for ci in 0..cg {
                        let cin = g * cg + ci;
                        for i in 0..kh {
                            for j in 0..kw {
                                let iy = (y * p.s[0] + i * p.d[0]) as i64 - p.p[0] as i64;
                                let ix = (xx * p.s[1] + j * p.d[1]) as i64 - p.p[1] as i64;
                                if iy < 0 || ix < 0 || iy >= h as i64 || ix >= wd as i64 {
                                    continue;
                                }
                                acc += xv[((ni * c + cin) * h + iy as usize) * wd + ix as usize]
                                    * wv[((oc * cg + ci) * kh + i) * kw + j];
                            }
                        }
                    }
                    out[((ni * o + oc) * oh + y) * ow + xx] = acc;
                }
            }
        }
    }
    (out, vec![n, o, oh, ow])
}

fn run(x: &Tensor, w: &Tensor, b: Option<&Tensor>, p: &P) -> Tensor {
    let dim = x.dim() - 2;
    let s: Vec<i64> = p.s[2 - dim..].iter().map(|&v| v as i64).collect();
    let pd: Vec<i64> = p.p[2 - dim..].iter().map(|&v| v as i64).collect();
    let d: Vec<i64> = p.d[2 - dim..].iter().map(|&v| v as i64).collect();
    convolution(x, w, b, &s, &pd, &d, false, &[0], p.groups as i64).unwrap()
}

/// The last two keep the output as wide as the input at unit strides (Note [im2col rows as
/// one copy]).
const CASES: [P; 6] = [
    P {
        s: [1, 1],
        p: [0, 0],
        d: [1, 1],
        groups: 1,
    },
    P {
        s: [2, 1],
        p: [1, 2],
        d: [1, 1],
        groups: 1,
    },
    P {
        s: [1, 2],
        p: [2, 1],
        d: [2, 1],
        groups: 2,
    },
    P {
        s: [3, 3],
        p: [1, 1],
        d: [1, 2],
        groups: 4,
    },
    P {
        s: [1, 1],
        p: [1, 1],
        d: [1, 2],
        groups: 1,
    },
    P {
        s: [1, 1],
        p: [2, 1],
        d: [2, 2],
        groups: 2,
    },
];

#[test]
fn conv2d_matches_direct() {
    for p in &CASES {
        for n in [1, 3] {
            let x = ramp(&[n, 4, 7, 9], ScalarType::Float);
            let w = ramp(&[8, 4 / p.groups, 3, 2], ScalarType::Float);
            let b = ramp(&[8], ScalarType::Float);
            let y = run(&x, &w, Some(&b), p);
            let (want, shape) = reference(&x, &w, Some(&b), p);
            let shape: Vec<i64> = shape.iter().map(|&v| v as i64).collect();
            assert_eq!(y.sizes(), shape.as_slice());
            assert_close(&y.to_vec_as::<f64>().unwrap(), &want, 1e-4);
            let y = run(&x, &w, None, p);
            let (want, _) = reference(&x, &w, None, p);
            assert_close(&y.to_vec_as::<f64>().unwrap(), &want, 1e-4);
        }
    }
}

#[test]
fn conv_layouts_dtypes_and_1d() {
    // Strided (transposed-then-back) input and a pointwise kernel.
    let x = ramp(&[2, 5, 3, 6], ScalarType::Double)
        .transpose(2, 3)
        .unwrap()
        .contiguous()
        .unwrap()
        .transpose(2, 3)
        .unwrap();
    let w = ramp(&[4, 5, 1, 1], ScalarType::Double);
    let p = P {
        s: [1, 1],
        p: [0, 0],
        d: [1, 1],
        groups: 1,
    };
    let (want, _) = reference(&x, &w, None, &p);
    assert_close(
        &run(&x, &w, None, &p).to_vec::<f64>().unwrap(),
        &want,
        1e-12,
    );
    // Half and BFloat16 compute in f32.
    for dt in [ScalarType::Half, ScalarType::BFloat16] {
        let xh = cast(&x, dt).unwrap();
        let wh = cast(&w, dt).unwrap();
        let y = run(&xh, &wh, None, &p);
        assert_eq!(y.dtype(), dt);
        let (want, _) = reference(&xh, &wh, None, &p);
        assert_close(&y.to_vec_as::<f64>().unwrap(), &want, 3e-2);
    }
    // 1-d = 2-d with height 1; unbatched inputs drop the batch dim.
    let x1 = ramp(&[2, 4, 11], ScalarType::Float);
    let w1 = ramp(&[6, 2, 3], ScalarType::Float);
    let y1 = convolution(&x1, &w1, None, &[2], &[1], &[2], false, &[0], 2).unwrap();
    let p1 = P {
        s: [1, 2],
        p: [0, 1],
        d: [1, 2],
        groups: 2,
    };
    let (want, shape) = reference(
        &x1.unsqueeze(2).unwrap(),
        &w1.unsqueeze(2).unwrap(),
        None,
        &p1,
    );
    assert_eq!(
        y1.sizes(),
        &[shape[0] as i64, shape[1] as i64, shape[3] as i64]
    );
    assert_close(&y1.to_vec_as::<f64>().unwrap(), &want, 1e-4);
    let yu = convolution(
        &x1.select(0, 1).unwrap(),
        &w1,
        None,
        &[2],
        &[1],
        &[2],
        false,
        &[0],
        2,
    )
    .unwrap();
    assert_eq!(yu.sizes(), &y1.sizes()[1..]);
    assert_eq!(
        yu.to_vec::<f32>().unwrap(),
        y1.select(0, 1).unwrap().to_vec::<f32>().unwrap()
    );
    // Meta.
    let xm = Tensor::empty_on(&[2, 3, 10, 10], ScalarType::Float, Device::META).unwrap();
    let wm = Tensor::empty_on(&[5, 3, 3, 3], ScalarType::Float, Device::META).unwrap();
    let ym = convolution(&xm, &wm, None, &[2], &[1], &[1], false, &[0], 1).unwrap();
    assert!(ym.is_meta());
    assert_eq!(ym.sizes(), &[2, 5, 5, 5]);
    // Empty batch.
    let x0 = Tensor::zeros(&[0, 3, 5, 5], ScalarType::Float).unwrap();
    let y0 = convolution(
        &x0,
        &ramp(&[2, 3, 3, 3], ScalarType::Float),
        None,
        &[1],
        &[0],
        &[1],
        false,
        &[0],
        1,
    )
    .unwrap();
    assert_eq!(y0.sizes(), &[0, 2, 3, 3]);
}

#[test]
fn conv_errors() {
    let x = ramp(&[1, 4, 5, 5], ScalarType::Float);
    let w = ramp(&[2, 3, 3, 3], ScalarType::Float);
    let c = |x: &Tensor, w: &Tensor, b: Option<&Tensor>, s: &[i64], p: &[i64], g: i64| {
        convolution(x, w, b, s, p, &[1], false, &[0], g)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        c(&x, &w, None, &[1], &[0], 1),
        "Given groups=1, weight of size [2, 3, 3, 3], expected input[1, 4, 5, 5] to have 3 \
         channels, but got 4 channels instead"
    );
    let w4 = ramp(&[2, 4, 3, 3], ScalarType::Float);
    assert_eq!(
        c(&x, &w4, Some(&ramp(&[3], ScalarType::Float)), &[1], &[0], 1),
        "Given weight of size [2, 4, 3, 3], expected bias to be 1-dimensional with 2 elements, \
         but got bias of size [3] instead"
    );
    assert_eq!(
        c(
            &x,
            &ramp(&[2, 4, 7, 3], ScalarType::Float),
            None,
            &[1],
            &[0],
            1
        ),
        "Calculated padded input size per channel: (5 x 5). Kernel size: (7 x 3). Kernel size \
         can't be greater than actual input size"
    );
    assert_eq!(
        c(&x, &w4, None, &[1, 1, 1], &[0], 1),
        "expected stride to be a single integer value or a list of 2 values to match the \
         convolution dimensions, but got stride=[1, 1, 1]"
    );
    assert_eq!(
        c(&x, &w4, None, &[0], &[0], 1),
        "non-positive stride is not supported"
    );
    assert_eq!(
        c(&x, &w4, None, &[1], &[-1], 1),
        "negative padding is not supported"
    );
    assert_eq!(
        c(
            &x,
            &ramp(&[3, 2, 3, 3], ScalarType::Float),
            None,
            &[1],
            &[0],
            2
        ),
        "Given groups=2, expected weight to be divisible by 2 at dimension 0, but got weight of \
         size [[3, 2, 3, 3]] instead"
    );
    assert_eq!(
        c(&ramp(&[4, 5], ScalarType::Float), &w4, None, &[1], &[0], 1),
        "Expected 4-dimensional input for 4-dimensional weight [2, 4, 3, 3], but got \
         2-dimensional input of size [4, 5] instead"
    );
    assert_eq!(
        c(
            &x,
            &cast(&w4, ScalarType::Double).unwrap(),
            None,
            &[1],
            &[0],
            1
        ),
        "expected scalar type Float but found Double"
    );
    let xi = cast(&x, ScalarType::Long).unwrap();
    assert_eq!(
        c(
            &xi,
            &cast(&w4, ScalarType::Long).unwrap(),
            None,
            &[1],
            &[0],
            1
        ),
        "\"slow_conv2d_cpu\" not implemented for 'Long'"
    );
    assert!(convolution(&x, &w4, None, &[1], &[0], &[1], true, &[0], 1)
        .unwrap_err()
        .to_string()
        .contains("transposed convolution is not implemented"));
    assert_eq!(
        c(&x, &w4, None, &[1], &[0], 0),
        "non-positive groups is not supported"
    );
}

/// Checks all three gradients of one convolution against finite differences.
fn check_grads(xs: &[usize], ws: &[usize], s: &[i64], p: &[i64], d: &[i64], groups: i64) {
    let x = ramp(xs, ScalarType::Double);
    let w = ramp(ws, ScalarType::Double);
    let b = ramp(&[ws[0]], ScalarType::Double);
    let conv = |x: &Tensor, w: &Tensor, b: &Tensor| {
        convolution(x, w, Some(b), s, p, d, false, &[0], groups).unwrap()
    };
    let y = conv(&x, &w, &b);
    let g = ramp(
        &y.sizes().iter().map(|&v| v as usize).collect::<Vec<_>>(),
        ScalarType::Double,
    );
    let (gx, gw, gb) = convolution_backward(
        &g,
        &x,
        &w,
        Some(&[ws[0] as i64]),
        s,
        p,
        d,
        false,
        &[0],
        groups,
        &[true, true, true],
    )
    .unwrap();
    assert_eq!(gx.sizes(), x.sizes());
    assert_eq!(gw.sizes(), w.sizes());
    let nx = numeric_grad(&x, |x| dot(&conv(x, &w, &b), &g));
    let nw = numeric_grad(&w, |w| dot(&conv(&x, w, &b), &g));
    let nb = numeric_grad(&b, |b| dot(&conv(&x, &w, b), &g));
    assert_close(&gx.to_vec::<f64>().unwrap(), &nx, 1e-6);
    assert_close(&gw.to_vec::<f64>().unwrap(), &nw, 1e-6);
    assert_close(&gb.to_vec::<f64>().unwrap(), &nb, 1e-6);
}

#[test]
fn backward_matches_finite_differences() {
    check_grads(&[2, 4, 5, 6], &[6, 2, 3, 2], &[2, 1], &[1, 1], &[1, 2], 2);
    check_grads(&[3, 2, 4, 4], &[3, 2, 1, 1], &[1], &[0], &[1], 1);
    check_grads(&[1, 3, 9], &[2, 3, 3], &[2], &[2], &[1], 1);
    check_grads(&[3, 8], &[4, 3, 2], &[1], &[0], &[3], 1);
}

/// The unit-stride input gradients computed as convolutions of `grad_out` (Note [Input
/// gradient as a convolution]): padded, dilated, grouped, rectangular kernels; and the cases
/// that keep col2im (more output than input channels, padding past the kernel's extent).
#[test]
fn input_gradient_as_convolution_matches_finite_differences() {
    check_grads(&[2, 4, 6, 5], &[4, 2, 3, 3], &[1], &[2, 1], &[2, 1], 2);
    check_grads(&[2, 3, 5, 5], &[3, 3, 3, 3], &[1], &[1], &[1], 1);
    check_grads(&[1, 2, 4, 7], &[2, 2, 2, 3], &[1], &[1, 1], &[1], 1);
    check_grads(&[2, 3, 5, 5], &[4, 3, 3, 3], &[1], &[1], &[1], 1);
    check_grads(&[2, 2, 4, 4], &[2, 2, 1, 1], &[1], &[1], &[1], 1);
}

#[test]
fn backward_masks_meta_and_errors() {
    let x = ramp(&[2, 3, 5, 5], ScalarType::Float);
    let w = ramp(&[4, 3, 3, 3], ScalarType::Float);
    let go = ramp(&[2, 4, 3, 3], ScalarType::Float);
    let args = |go: &Tensor, x: &Tensor, mask: &[bool]| {
        convolution_backward(go, x, &w, None, &[1], &[0], &[1], false, &[0], 1, mask)
    };
    let (gx, gw, gb) = args(&go, &x, &[false, true, false]).unwrap();
    assert_eq!((gx.numel(), gb.numel()), (0, 0));
    assert_eq!(gw.sizes(), &[4, 3, 3, 3]);
    let (_, gw_all, gb_all) = args(&go, &x, &[true, true, true]).unwrap();
    assert_eq!(gw.to_vec::<f32>().unwrap(), gw_all.to_vec::<f32>().unwrap());
    assert_eq!(gb_all.sizes(), &[4]);
    // BFloat16 goes through f32.
    let xb = cast(&x, ScalarType::BFloat16).unwrap();
    let gob = cast(&go, ScalarType::BFloat16).unwrap();
    let wb = cast(&w, ScalarType::BFloat16).unwrap();
    let (gxb, _, _) = convolution_backward(
        &gob,
        &xb,
        &wb,
        None,
        &[1],
        &[0],
        &[1],
        false,
        &[0],
        1,
        &[true, false, false],
    )
    .unwrap();
    assert_eq!(gxb.dtype(), ScalarType::BFloat16);
    let m = |s: &[i64]| Tensor::empty_on(s, ScalarType::Float, Device::META).unwrap();
    let (mx, mw, mb) = convolution_backward(
        &m(&[2, 4, 3, 3]),
        &m(&[2, 3, 5, 5]),
        &m(&[4, 3, 3, 3]),
        Some(&[4]),
        &[1],
        &[0],
        &[1],
        false,
        &[0],
        1,
        &[true, true, true],
    )
    .unwrap();
    assert!(mx.is_meta() && mw.is_meta() && mb.is_meta());
    assert_eq!(mx.sizes(), &[2, 3, 5, 5]);
    assert_eq!(mb.sizes(), &[4]);
    assert!(args(
        &ramp(&[2, 4, 2, 3], ScalarType::Float),
        &x,
        &[true, true, true]
    )
    .unwrap_err()
    .to_string()
    .contains("expected grad_output of size [2, 4, 3, 3]"));
}

#[test]
fn sizes_from_huge_arguments_are_checked() {
    let x = ramp(&[1, 1, 5, 5], ScalarType::Float);
    let w = ramp(&[1, 1, 3, 3], ScalarType::Float);
    let meta = |t: &Tensor| Tensor::empty_on(t.sizes(), t.dtype(), Device::META).unwrap();
    let err = |x: &Tensor, w: &Tensor, p: &[i64], d: &[i64]| {
        convolution(x, w, None, &[1], p, d, false, &[0], 1)
            .unwrap_err()
            .to_string()
    };
    // A padding near i64::MAX used to wrap and give a 1x1 zero tensor.
    let e = "convolution: the padded input size (5 + 2 * padding 9223372036854775806) overflows \
             int64";
    assert_eq!(err(&x, &w, &[i64::MAX - 1], &[1]), e);
    assert_eq!(err(&meta(&x), &meta(&w), &[i64::MAX - 1], &[1]), e);
    assert_eq!(
        err(&x, &w, &[0, 1 << 62], &[1]),
        e.replace("9223372036854775806", "4611686018427387904")
    );
    // A huge dilation used to overflow the kernel extent and panic in the kernel.
    assert_eq!(
        err(&x, &w, &[0], &[i64::MAX]),
        "convolution: the dilated kernel size (dilation 9223372036854775807 * (3 - 1) + 1) \
         overflows int64"
    );
    assert_eq!(
        err(&x, &w, &[0], &[1 << 61]),
        "Calculated padded input size per channel: (5 x 5). Kernel size: (4611686018427387905 x \
         4611686018427387905). Kernel size can't be greater than actual input size"
    );
    let x1 = ramp(&[1, 2, 7], ScalarType::Float);
    let w1 = ramp(&[3, 2, 2], ScalarType::Float);
    assert!(err(&x1, &w1, &[0], &[i64::MAX]).contains("overflows int64"));
    assert!(err(&x1, &w1, &[0], &[1 << 40]).contains("Kernel size can't be greater"));
    // A 1-tap kernel ignores the dilation: any value works.
    let w1x1 = ramp(&[3, 2, 1], ScalarType::Float);
    let y = convolution(&x1, &w1x1, None, &[1], &[0], &[i64::MAX], false, &[0], 1).unwrap();
    let y1 = convolution(&x1, &w1x1, None, &[1], &[0], &[1], false, &[0], 1).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), y1.to_vec::<f32>().unwrap());
    // Outputs too large for memory (or for a size) are errors, not aborts.
    let tiny = ramp(&[1, 1, 1, 1], ScalarType::Float);
    assert!(convolution(&tiny, &tiny, None, &[1], &[1 << 30], &[1], false, &[0], 1).is_err());
    let e = err(&tiny, &tiny, &[1 << 40], &[1]);
    assert!(e.contains("overflow"), "{e}");
    // The backward pass shares the checks.
    let g = ramp(&[1, 1, 3, 3], ScalarType::Float);
    let e = convolution_backward(
        &g,
        &x,
        &w,
        None,
        &[1],
        &[i64::MAX - 1],
        &[1],
        false,
        &[0],
        1,
        &[true, true, true],
    )
    .unwrap_err();
    assert!(e.to_string().contains("overflows int64"), "{e}");
}

/// A tensor of `shape` with values other than `ramp(shape)`'s (a direction for an adjoint
/// identity).
fn other_ramp(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let vals = ramp(&[n + 1], ScalarType::Double).to_vec::<f64>().unwrap();
    let dims: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
    Tensor::from_vec(vals[1..].to_vec(), &dims).unwrap()
}

/// Shapes whose im2col buffer holds several blocks of output rows (Note [im2col in
/// cache-sized blocks]: 16 input channels, a 3x3 kernel and rows 32 wide in f64 make 7 rows a
/// block): the forward pass against the direct reference, and both gradients against the
/// adjoint identities `<gx, u> = <conv(u, w), g>` and `<gw, v> = <conv(x, v), g>` (the
/// convolution is linear in each argument). Same-padded (one copy per row), unpadded, and
/// strided.
#[test]
fn convolutions_over_several_im2col_blocks() {
    for (pad, stride) in [(1, 1), (0, 1), (1, 2)] {
        let p = P {
            s: [stride; 2],
            p: [pad; 2],
            d: [1, 1],
            groups: 1,
        };
        let x = ramp(&[2, 16, 32, 32], ScalarType::Double);
        let w = ramp(&[4, 16, 3, 3], ScalarType::Double);
        let y = run(&x, &w, None, &p);
        let (want, shape) = reference(&x, &w, None, &p);
        assert_close(&y.to_vec::<f64>().unwrap(), &want, 1e-12);
        let g = ramp(&shape, ScalarType::Double);
        let (s, pd) = ([stride as i64], [pad as i64]);
        let (gx, gw, _) = convolution_backward(
            &g,
            &x,
            &w,
            None,
            &s,
            &pd,
            &[1],
            false,
            &[0],
            1,
            &[true, true, false],
        )
        .unwrap();
        let (u, v) = (other_ramp(&[2, 16, 32, 32]), other_ramp(&[4, 16, 3, 3]));
        let conv = |x: &Tensor, w: &Tensor| run(x, w, None, &p);
        let (lhs, rhs) = (dot(&gx, &u), dot(&conv(&u, &w), &g));
        assert!((lhs - rhs).abs() <= 1e-9 * rhs.abs(), "{lhs} vs {rhs}");
        let (lhs, rhs) = (dot(&gw, &v), dot(&conv(&x, &v), &g));
        assert!((lhs - rhs).abs() <= 1e-9 * rhs.abs(), "{lhs} vs {rhs}");
    }
}

#[test]
fn a_stride_far_beyond_the_input_gives_one_output_not_a_huge_buffer() {
    // One output position per dimension; the im2col buffers follow the output, not the stride.
    let x = ramp(&[1, 2, 5, 5], ScalarType::Float);
    let w = ramp(&[3, 2, 3, 3], ScalarType::Float);
    let huge = 1i64 << 60;
    for stride in [[huge, huge], [2, huge], [huge, 2]] {
        let y = convolution(&x, &w, None, &stride, &[1, 1], &[1, 1], false, &[0, 0], 1).unwrap();
        assert_eq!(y.sizes()[..2], [1, 3]);
        assert!(
            y.sizes()[2..].iter().all(|&s| s == 1 || s == 3),
            "{:?}",
            y.sizes()
        );
    }
}

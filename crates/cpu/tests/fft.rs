//! The FFT kernels against values recorded from PyTorch 2.15 (`torch.ops.aten._fft_*` on
//! float64), and their argument errors.

use switchboard_cpu::{_fft_c2c, _fft_c2r, _fft_r2c, _fft_r2c_out};
use switchboard_tensor::{Complex64, Device, ScalarType, Tensor};

fn x() -> Tensor {
    let v = vec![
        0.5, -1.0, 2.0, 3.0, 0.25, 1.0, 0.0, -2.0, 4.0, 1.5, 0.0, 2.0, 1.0, -1.0, 0.5f64,
    ];
    Tensor::from_vec(v, &[3, 5]).unwrap()
}

fn close_complex(t: &Tensor, expected: &[(f64, f64)]) {
    let got = t.to_vec::<Complex64>().unwrap();
    assert_eq!(got.len(), expected.len());
    for (g, (re, im)) in got.iter().zip(expected) {
        assert!(
            (g.re - re).abs() < 1e-12 && (g.im - im).abs() < 1e-12,
            "{got:?}"
        );
    }
}

fn close_real(t: &Tensor, expected: &[f64]) {
    let got = t.to_vec::<f64>().unwrap();
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(expected) {
        assert!((g - e).abs() < 1e-12, "{got:?}");
    }
}

const R2C_ORTHO: [(f64, f64); 9] = [
    (3.033836954529143, 0.0),
    (-0.8156021977216327, 1.065779668501122),
    (0.2669295570089156, -1.0381018085314677),
    (0.32274861218395134, -0.44721359549995787),
    (0.634484598198816, 0.36248157287860844),
    (-0.41341185640322387, -0.10743648727868321),
    (0.32274861218395134, 0.44721359549995787),
    (-2.7444160628057785, -0.052108230496422984),
    (2.2005947088262348, 0.977973709346285),
];

#[test]
fn r2c_matches_pytorch() {
    let r = _fft_r2c(&x(), &[0, 1], 1, true).unwrap();
    assert_eq!(
        (r.sizes(), r.dtype()),
        (&[3i64, 3][..], ScalarType::ComplexDouble)
    );
    close_complex(&r, &R2C_ORTHO);
    let full = _fft_r2c(&x(), &[0], 0, false).unwrap();
    assert_eq!(full.sizes(), &[3, 5]);
    let s3 = 3f64.sqrt();
    close_complex(
        &full,
        &[
            (1.5, 0.0),
            (1.0, 0.0),
            (1.0, 0.0),
            (6.0, 0.0),
            (2.25, 0.0),
            (0.0, -s3 / 2.0),
            (-2.0, s3),
            (2.5, 2.598076211353316),
            (1.5, -4.330127018922193),
            (-0.75, -s3 / 2.0),
            (0.0, s3 / 2.0),
            (-2.0, -s3),
            (2.5, -2.598076211353316),
            (1.5, 4.330127018922193),
            (-0.75, s3 / 2.0),
        ],
    );
    // A negative dim wraps.
    let neg = _fft_r2c(&x(), &[0, -1], 1, true).unwrap();
    close_complex(&neg, &R2C_ORTHO);
}

#[test]
fn c2c_and_c2r_match_pytorch() {
    let r = _fft_r2c(&x(), &[0, 1], 1, true).unwrap();
    let c = _fft_c2c(&r, &[1], 2, false).unwrap();
    close_complex(
        &c,
        &[
            (0.8283881046054751, 0.009225953323218109),
            (0.4953861564079173, -0.317112976661609),
            (1.7100626935157504, 0.3078870233383909),
            (0.1812737846598478, -0.06405616996667754),
            (-0.06491624550238778, 0.11092293730703084),
            (0.2063910730264913, -0.4940803628403112),
            (-0.07369091393186414, 0.45769302478327323),
            (0.4955788056856874, -1.4327413647153284),
            (-0.0991392795698719, 1.422261935432013),
        ],
    );
    // The inverse of the ortho r2c gives the input back.
    let back = _fft_c2r(&r, &[0, 1], 1, 5).unwrap();
    assert_eq!(
        (back.sizes(), back.dtype()),
        (&[3i64, 5][..], ScalarType::Double)
    );
    close_real(&back, &x().to_vec::<f64>().unwrap());
    let even = _fft_c2r(&r, &[1], 2, 4).unwrap();
    close_real(
        &even,
        &[
            0.4173905290236983,
            0.15883701512949577,
            1.232992726745331,
            1.2246166836306178,
            0.29457648804458986,
            0.0027993307074895835,
            -0.3399081101542261,
            0.365280903586098,
            -0.7413722011503427,
            -0.44340740891235936,
            2.003043861655436,
            -0.49551563940878235,
        ],
    );
}

#[test]
fn meta_out_and_errors() {
    let m = Tensor::zeros_on(&[2, 6], ScalarType::Float, Device::META).unwrap();
    let r = _fft_r2c(&m, &[1], 0, true).unwrap();
    assert_eq!(
        (r.sizes(), r.dtype(), r.is_meta()),
        (&[2i64, 4][..], ScalarType::ComplexFloat, true)
    );
    let out = Tensor::zeros(&[0], ScalarType::ComplexDouble).unwrap();
    let written = _fft_r2c_out(&x(), &[0, 1], 1, true, &out).unwrap();
    close_complex(&written, &R2C_ORTHO);
    let err = |r: switchboard_tensor::Result<Tensor>| r.unwrap_err().to_string();
    let longs = Tensor::zeros(&[3], ScalarType::Long).unwrap();
    assert_eq!(
        err(_fft_r2c(&longs, &[0], 0, true)),
        "Only supports floating-point dtypes, but found: Long"
    );
    assert_eq!(
        err(_fft_c2c(&x(), &[0], 0, true)),
        "Only supports complex dtypes, but found: Double"
    );
    assert_eq!(
        err(_fft_r2c(&x(), &[], 0, true)),
        "ArrayRef: attempted to access back() of empty list"
    );
    assert_eq!(
        err(_fft_r2c(&x(), &[1, 1], 0, true)),
        "FFT dims must be unique"
    );
    assert_eq!(
        err(_fft_r2c(&x(), &[0], 3, true)),
        "Unsupported normalization type 3"
    );
    assert!(err(_fft_r2c(&x(), &[2], 0, true)).contains("Dimension out of range"));
    let empty = Tensor::zeros(&[0, 2], ScalarType::Float).unwrap();
    assert_eq!(
        err(_fft_r2c(&empty, &[0], 0, true)),
        "cannot reshape tensor of 0 elements into shape [-1, 0] because the unspecified \
         dimension size -1 can be any value and is ambiguous"
    );
    assert_eq!(
        err(_fft_c2r(&r, &[1], 0, -1)),
        "Trying to create tensor with negative dimension -1: [2, -1]"
    );
}

/// The output layouts of PyTorch 2.15's CPU kernels (`_exec_fft`: batch dims outermost in the
/// input's stride order, then the transformed dims in transform order), also on Meta.
#[test]
fn output_layouts_are_pytorchs() {
    use switchboard_tensor::RawOps;
    let arange = |n: usize, sizes: &[i64]| {
        Tensor::from_vec((0..n).map(|i| i as f64).collect::<Vec<_>>(), sizes).unwrap()
    };
    let x = arange(24, &[4, 6]).t().unwrap();
    let r = _fft_r2c(&x, &[0], 0, true).unwrap();
    assert_eq!((r.sizes(), r.strides()), (&[4i64, 4][..], &[1i64, 4][..]));
    let y = arange(24, &[2, 3, 4]);
    assert_eq!(
        _fft_r2c(&y, &[2, 0], 1, true).unwrap().strides(),
        &[1, 8, 2]
    );
    let z = Tensor::zeros(&[2, 3, 4], ScalarType::ComplexDouble).unwrap();
    assert_eq!(_fft_c2r(&z, &[0, 2], 1, 6).unwrap().strides(), &[6, 12, 1]);
    let zt = z.transpose(0, 2).unwrap();
    assert_eq!(_fft_c2c(&zt, &[1], 0, true).unwrap().strides(), &[3, 1, 12]);
    let m = Tensor::zeros_on(&[2, 3, 4], ScalarType::ComplexDouble, Device::META).unwrap();
    assert_eq!(_fft_c2r(&m, &[0, 2], 1, 6).unwrap().strides(), &[6, 12, 1]);
}

//! `conv1d.padding` / `conv2d.padding` (`padding="same"` / `"valid"`): values against an
//! explicitly zero-padded convolution, gradients, unbatched inputs, Meta shapes and PyTorch's
//! errors.

use switchboard::ops::{self, Conv1dPaddingOptions, Conv2dOptions, Conv2dPaddingOptions};
use switchboard::prelude::*;

mod common;
use common::*;

/// `t` (`(N, C, H, W)`) with `pads[d] = (before, after)` zeros around spatial dim `d`.
fn zero_pad_2d(t: &Tensor, pads: [(i64, i64); 2]) -> Tensor {
    let s = t.sizes().to_vec();
    let (h, w) = (s[2] + pads[0].0 + pads[0].1, s[3] + pads[1].0 + pads[1].1);
    let v = vals(t);
    let mut out = vec![0.0; (s[0] * s[1] * h * w) as usize];
    for nc in 0..s[0] * s[1] {
        for i in 0..s[2] {
            for j in 0..s[3] {
                let src = ((nc * s[2] + i) * s[3] + j) as usize;
                let dst = ((nc * h + i + pads[0].0) * w + j + pads[1].0) as usize;
                out[dst] = v[src];
            }
        }
    }
    Tensor::from_vec(out, &[s[0], s[1], h, w]).unwrap()
}

/// "same" padding of one dimension: `total / 2` before, the rest after.
fn same_pads(kernel: i64, dilation: i64) -> (i64, i64) {
    let total = dilation * (kernel - 1);
    (total / 2, total - total / 2)
}

#[test]
fn conv2d_same_matches_explicit_asymmetric_padding() {
    // Even kernels with odd dilation pad one more zero after than before.
    for (kh, kw, dil) in [
        (2, 3, [1, 1]),
        (4, 2, [1, 3]),
        (3, 3, [2, 2]),
        (2, 2, [2, 1]),
    ] {
        let input = r(&[2, 4, 5, 6], 1, -1.0, 1.0);
        let weight = r(&[6, 2, kh, kw], 2, -1.0, 1.0);
        let bias = r(&[6], 3, -1.0, 1.0);
        let got = ops::conv2d_padding_with(
            &input,
            &weight,
            Conv2dPaddingOptions::default()
                .bias(&bias)
                .padding("same")
                .dilation(&dil)
                .groups(2),
        )
        .unwrap();
        assert_eq!(got.sizes(), &[2, 6, 5, 6]);
        let padded = zero_pad_2d(&input, [same_pads(kh, dil[0]), same_pads(kw, dil[1])]);
        let want = ops::conv2d_with(
            &padded,
            &weight,
            Conv2dOptions::default()
                .bias(&bias)
                .dilation(&dil)
                .groups(2),
        )
        .unwrap();
        assert_close(&got, &want, &format!("k=({kh},{kw}) d={dil:?}"));
    }
}

#[test]
fn conv1d_same_and_valid() {
    let input = r(&[1, 2, 7], 4, -1.0, 1.0);
    let weight = r(&[3, 2, 4], 5, -1.0, 1.0);
    let same = ops::conv1d_padding_with(
        &input,
        &weight,
        Conv1dPaddingOptions::default()
            .padding("same")
            .dilation(&[3]),
    )
    .unwrap();
    assert_eq!(same.sizes(), &[1, 3, 7]);
    // Total padding 9: 4 before, 5 after; as a 2-d convolution over a height of 1.
    let padded = zero_pad_2d(&input.unsqueeze(2).unwrap(), [(0, 0), (4, 5)]);
    let want = ops::conv2d_with(
        &padded,
        &weight.unsqueeze(2).unwrap(),
        Conv2dOptions::default().dilation(&[1, 3]),
    )
    .unwrap()
    .squeeze_dim(2)
    .unwrap();
    assert_close(&same, &want, "conv1d same");
    // "valid" (the default) is no padding at all.
    let valid = ops::conv1d_padding(&input, &weight).unwrap();
    assert_close(&valid, &ops::conv1d(&input, &weight).unwrap(), "valid");
    assert_eq!(valid.sizes(), &[1, 3, 4]);
    // Unbatched input: (C, L) in, (O, L) out.
    let unbatched = ops::conv1d_padding_with(
        &input.squeeze_dim(0).unwrap(),
        &weight,
        Conv1dPaddingOptions::default()
            .padding("same")
            .dilation(&[3]),
    )
    .unwrap();
    assert_close(&unbatched, &same.squeeze_dim(0).unwrap(), "unbatched");
}

#[test]
fn same_padding_has_gradients() {
    let input = x(&[2, 2, 4, 5], 6);
    let weight = x(&[2, 2, 2, 3], 7);
    let bias = x(&[2], 8);
    check_grad(
        "conv2d.padding same",
        |t| {
            ops::conv2d_padding_with(
                &t[0],
                &t[1],
                Conv2dPaddingOptions::default()
                    .bias(&t[2])
                    .padding("same")
                    .dilation(&[1, 2]),
            )
        },
        &[input, weight, bias],
    );
    check_grad(
        "conv1d.padding same",
        |t| {
            ops::conv1d_padding_with(
                &t[0],
                &t[1],
                Conv1dPaddingOptions::default().padding("same"),
            )
        },
        &[x(&[2, 3, 6], 9), x(&[2, 3, 4], 10)],
    );
}

#[test]
fn meta_shapes() {
    let input = ops::empty_with(
        &[8, 3, 32, 30],
        ops::EmptyOptions::default().device(Device::META),
    )
    .unwrap();
    let weight = ops::empty_with(
        &[16, 3, 4, 4],
        ops::EmptyOptions::default().device(Device::META),
    )
    .unwrap();
    let out = ops::conv2d_padding_with(
        &input,
        &weight,
        Conv2dPaddingOptions::default().padding("same"),
    )
    .unwrap();
    assert_eq!(out.sizes(), &[8, 16, 32, 30]);
    assert!(out.device().is_meta());
}

fn err(r: Result<Tensor, DispatchError>) -> String {
    r.expect_err("an error").to_string()
}

#[test]
fn errors_are_pytorchs() {
    let input = r(&[1, 2, 7], 4, -1.0, 1.0);
    let weight = r(&[3, 2, 4], 5, -1.0, 1.0);
    let e = err(ops::conv1d_padding_with(
        &input,
        &weight,
        Conv1dPaddingOptions::default().padding("full"),
    ));
    assert!(e.contains("Invalid padding string: 'full'"), "{e}");
    let e = err(ops::conv1d_padding_with(
        &input,
        &weight,
        Conv1dPaddingOptions::default().padding("same").stride(&[2]),
    ));
    assert!(
        e.contains("padding='same' is not supported for strided convolutions"),
        "{e}"
    );
    let e = err(ops::conv1d_padding_with(
        &input,
        &weight,
        Conv1dPaddingOptions::default()
            .padding("same")
            .dilation(&[1, 1]),
    ));
    assert!(
        e.contains("dilation cannot broadcast to 1 dimensions"),
        "{e}"
    );
    let e = err(ops::conv2d_padding(&r(&[2, 7], 4, -1.0, 1.0), &weight));
    assert!(
        e.contains(
            "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: \
             [2, 7]"
        ),
        "{e}"
    );
    let e = err(ops::conv1d_padding_with(
        &r(&[1, 1, 2, 7], 4, -1.0, 1.0),
        &weight,
        Conv1dPaddingOptions::default().padding("same"),
    ));
    assert!(
        e.contains("Expected 2D (unbatched) or 3D (batched) input to conv1d"),
        "{e}"
    );
}

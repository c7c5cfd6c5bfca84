//! BatchNorm2d, GroupNorm, AdaptiveAvgPool2d and AvgPool2d against values recorded from
//! PyTorch 2.15 (`torch.nn` with the same inputs), and the train()/eval() modes.

use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_nn::{AdaptiveAvgPool2d, AvgPool2d, BatchNorm2d, GroupNorm, Module, Sequential};
use switchboard_tensor::Tensor;

/// A `[2, 3, 2, 2]` input (the one the values below were computed from).
fn input() -> Tensor {
    let v = [
        -0.5,
        -0.12729401886463165,
        0.4937877058982849,
        0.9235676527023315,
        1.2250721454620361,
        0.43062353134155273,
        -0.10302740335464478,
        0.24609774351119995,
        1.0992071628570557,
        1.0123751163482666,
        1.1768499612808228,
        1.572756290435791,
        1.2923587560653687,
        1.4034193754196167,
        1.9316314458847046,
        2.5227010250091553,
        3.2433738708496094,
        2.703734874725342,
        1.911111831665039,
        1.7255809307098389,
        2.979567527770996,
        2.835681200027466,
        2.8428688049316406,
        3.1258645057678223f64,
    ];
    let v: Vec<f32> = v.iter().map(|&v| v as f32).collect();
    Tensor::from_vec(v, &[2, 3, 2, 2]).unwrap()
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (*g as f64 - w).abs() < 1e-5,
            "{what}[{i}]: {g} != {w} (got {got:?})"
        );
    }
}

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

#[test]
fn batch_norm_trains_with_batch_statistics_and_updates_running_ones() {
    let mut bn = BatchNorm2d::new(3).unwrap();
    assert!(bn.is_training());
    let y = bn.forward(&input()).unwrap();
    assert_close(
        &values(&y)[..6],
        &[
            -1.57137, -1.178974, -0.525081, -0.072597, -0.17668, -0.886484,
        ],
        "train output",
    );
    let rm = bn.running_mean.clone().unwrap();
    let rv = bn.running_var.clone().unwrap();
    assert_close(
        &values(&rm),
        &[
            0.09925214946269989,
            0.14228209853172302,
            0.20806463062763214,
        ],
        "running_mean",
    );
    // Updated with the unbiased variance.
    assert_close(
        &values(&rv),
        &[1.0031030178070068, 1.0431671142578125, 0.989011824131012],
        "running_var",
    );
    let count = bn.num_batches_tracked.clone().unwrap();
    assert_eq!(count.to_vec::<i64>().unwrap(), [1]);
    bn.forward(&input()).unwrap();
    assert_close(
        &values(&rm),
        &[0.18857908248901367, 0.27033597230911255, 0.3953227996826172],
        "running_mean after two steps",
    );
    assert_eq!(count.to_vec::<i64>().unwrap(), [2]);

    bn.eval();
    assert!(!bn.is_training());
    let y = bn.forward(&input()).unwrap();
    assert_close(
        &values(&y)[..6],
        &[-0.686555, -0.314944, 0.304311, 0.732828, 0.917834, 0.154092],
        "eval output",
    );
    // Evaluation leaves the running statistics and the count alone.
    assert_close(
        &values(&rm),
        &[0.18857908248901367, 0.27033597230911255, 0.3953227996826172],
        "running_mean after eval",
    );
    assert_eq!(count.to_vec::<i64>().unwrap(), [2]);
}

#[test]
fn batch_norm_names_and_gradients() {
    let bn = BatchNorm2d::new(3).unwrap();
    let names: Vec<_> = bn.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["weight", "bias"]);
    let names: Vec<_> = bn.named_buffers().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        ["running_mean", "running_var", "num_batches_tracked"]
    );
    assert_eq!(
        bn.describe(),
        "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, \
         track_running_stats=True)"
    );
    let loss = switchboard_ops::sum(&bn.forward(&input()).unwrap()).unwrap();
    loss.backward().unwrap();
    // The output sums to sum(bias) * N*H*W whatever the weight: d/dbias = 8, d/dweight = 0.
    let gb = bn.bias.as_ref().unwrap().grad().unwrap();
    assert_eq!(values(&gb), [8.0, 8.0, 8.0]);
    let gw = bn.weight.as_ref().unwrap().grad().unwrap();
    assert!(values(&gw).iter().all(|v| v.abs() < 1e-5), "{gw}");
}

#[test]
fn batch_norm_cumulative_average_without_momentum() {
    let bn = BatchNorm2d::with_options(3, 1e-5, None, false, true).unwrap();
    assert_eq!(
        bn.describe(),
        "BatchNorm2d(3, eps=1e-05, momentum=None, affine=False, bias=False, \
         track_running_stats=True)"
    );
    bn.forward(&input()).unwrap();
    let twice = switchboard_ops::mul_scalar(&input(), 2.0).unwrap();
    bn.forward(&twice).unwrap();
    assert_close(
        &values(bn.running_mean.as_ref().unwrap()),
        &[1.4887821674346924, 2.1342313289642334, 3.120969295501709],
        "cumulative running_mean",
    );
}

#[test]
fn batch_norm_errors_are_pytorchs() {
    let bn = BatchNorm2d::new(3).unwrap();
    let e = bn.forward(&Tensor::zeros(&[3, 1, 1], switchboard_tensor::ScalarType::Float).unwrap());
    assert_eq!(
        e.unwrap_err().to_string(),
        "expected 4D input (got 3D input)"
    );
    let e =
        bn.forward(&Tensor::zeros(&[1, 3, 1, 1], switchboard_tensor::ScalarType::Float).unwrap());
    assert_eq!(
        e.unwrap_err().to_string(),
        "Expected more than 1 value per channel when training, got input size \
         torch.Size([1, 3, 1, 1])"
    );
    let e =
        bn.forward(&Tensor::zeros(&[2, 4, 1, 1], switchboard_tensor::ScalarType::Float).unwrap());
    assert_eq!(
        e.unwrap_err().to_string(),
        "running_mean should contain 4 elements not 3"
    );
}

#[test]
fn train_and_eval_reach_every_layer() {
    let mut model = Sequential::new()
        .append(BatchNorm2d::new(3).unwrap())
        .append(AdaptiveAvgPool2d::new(&[1]));
    assert!(model.is_training() && model.layers()[0].is_training());
    model.eval();
    assert!(!model.is_training() && !model.layers()[0].is_training());
    let names: Vec<_> = model.named_buffers().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        ["0.running_mean", "0.running_var", "0.num_batches_tracked"]
    );
    model.train(true);
    assert!(model.layers()[0].is_training());
    let y = model.forward(&input()).unwrap();
    assert_eq!(y.sizes(), [2, 3, 1, 1]);
}

#[test]
fn group_norm_matches_pytorch() {
    let gn = GroupNorm::new(1, 3).unwrap();
    assert_eq!(
        gn.describe(),
        "GroupNorm(1, 3, eps=1e-05, affine=True, bias=True)"
    );
    let y = gn.forward(&input()).unwrap();
    assert_close(
        &values(&y)[..6],
        &[-1.812872, -1.210046, -0.20549, 0.48965, 0.977312, -0.307653],
        "group norm",
    );
    let e = GroupNorm::new(2, 3).err().unwrap().to_string();
    assert_eq!(e, "num_channels (3) must be divisible by num_groups (2)");
}

#[test]
fn pooling_modules() {
    assert_eq!(
        AdaptiveAvgPool2d::new(&[1]).describe(),
        "AdaptiveAvgPool2d(output_size=1)"
    );
    assert_eq!(
        AdaptiveAvgPool2d::new(&[2, 3]).describe(),
        "AdaptiveAvgPool2d(output_size=(2, 3))"
    );
    assert_eq!(
        AvgPool2d::new(&[2], None, &[0]).describe(),
        "AvgPool2d(kernel_size=2, stride=2, padding=0)"
    );
    assert_eq!(
        AvgPool2d::new(&[2, 3], Some(&[1]), &[1, 1]).describe(),
        "AvgPool2d(kernel_size=(2, 3), stride=1, padding=(1, 1))"
    );
    let x = Tensor::from_vec((0..16).map(|v| v as f32).collect(), &[1, 1, 4, 4]).unwrap();
    let y = AvgPool2d::new(&[2], None, &[0]).forward(&x).unwrap();
    assert_eq!(values(&y), [2.5, 4.5, 10.5, 12.5]);
    let y = AdaptiveAvgPool2d::new(&[1]).forward(&x).unwrap();
    assert_eq!((y.sizes(), values(&y)), (&[1i64, 1, 1, 1][..], vec![7.5]));
    let y = AdaptiveAvgPool2d::new(&[3, 2]).forward(&x).unwrap();
    assert_eq!(y.sizes(), [1, 1, 3, 2]);
}

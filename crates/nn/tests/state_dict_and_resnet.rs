//! The ResNet's PyTorch names and initialization, state dicts written by PyTorch loaded into
//! it, and `load_state_dict`'s errors, against PyTorch 2.15.
//!
//! `data/tiny_resnet.safetensors` was written by PyTorch 2.15: the same model (torchvision's
//! module names; `ResNet(1, 10, widths [4, 8], blocks [1, 1])` after `torch.manual_seed(0)`)
//! after one SGD step (lr 0.1, momentum 0.9) on `input()` with labels [3, 7], by
//! `safetensors.torch.save_file(model.state_dict(), path)`.

use std::collections::BTreeMap;

use switchboard_autograd::AutogradTensor;
use switchboard_cpu as _;
use switchboard_nn::{
    load_state_dict, load_state_dict_file, mlp, save_state_dict, state_dict, Module, Optimizer,
    ResNet, Sgd,
};
use switchboard_ops as ops;
use switchboard_tensor::Tensor;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/tiny_resnet.safetensors"
);

fn input() -> Tensor {
    let v: Vec<f32> = (0..128).map(|i| (i as f32 * 0.37).sin()).collect();
    Tensor::from_vec(v, &[2, 1, 8, 8]).unwrap()
}

fn tiny() -> ResNet {
    ResNet::new(1, 10, &[4, 8], &[1, 1], 0).unwrap()
}

fn close(a: &[f32], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((*x as f64 - y).abs() < tol, "{a:?} vs {b:?}");
    }
}

/// The model's outputs in evaluation mode: sample 0's first 4 logits, sample 1's first 2.
fn eval_logits(m: &mut ResNet) -> Vec<f32> {
    m.eval();
    let y = m.forward(&input()).unwrap().to_vec::<f32>().unwrap();
    [&y[..4], &y[10..12]].concat()
}

/// PyTorch's eval-mode logits after the step (the fixture's model).
const AFTER_STEP: [f64; 6] = [
    -0.05185028165578842,
    0.07295943796634674,
    0.07962112128734589,
    0.41087469458580017,
    0.040480148047208786,
    0.16651056706905365,
];

#[test]
fn resnet_names_and_init_match_pytorch() {
    let m = tiny();
    let names: Vec<String> = state_dict(&m).into_iter().map(|(n, _)| n).collect();
    let mut sorted = names.clone();
    sorted.sort();
    let mut torch_keys: Vec<String> = "conv1.weight bn1.weight bn1.bias bn1.running_mean \
        bn1.running_var bn1.num_batches_tracked"
        .split(' ')
        .map(String::from)
        .collect();
    for block in ["layer1.0", "layer2.0"] {
        for bn in ["bn1", "bn2"] {
            for b in [
                "weight",
                "bias",
                "running_mean",
                "running_var",
                "num_batches_tracked",
            ] {
                torch_keys.push(format!("{block}.{bn}.{b}"));
            }
        }
        torch_keys.push(format!("{block}.conv1.weight"));
        torch_keys.push(format!("{block}.conv2.weight"));
    }
    torch_keys.push("layer2.0.downsample.0.weight".into());
    for b in [
        "weight",
        "bias",
        "running_mean",
        "running_var",
        "num_batches_tracked",
    ] {
        torch_keys.push(format!("layer2.0.downsample.1.{b}"));
    }
    torch_keys.extend(["fc.weight".to_string(), "fc.bias".to_string()]);
    torch_keys.sort();
    assert_eq!(sorted, torch_keys);
    // The parameters come first, in module order.
    assert_eq!(names[0], "conv1.weight");
    assert_eq!(m.named_parameters().last().unwrap().0, "fc.bias");

    let first3 = |name: &str| {
        let t = &m
            .named_parameters()
            .into_iter()
            .find(|(n, _)| n == name)
            .unwrap()
            .1;
        t.to_vec::<f32>().unwrap()[..3].to_vec()
    };
    close(
        &first3("conv1.weight"),
        &[
            -0.0024956068955361843,
            0.17881453037261963,
            -0.2743483781814575,
        ],
        1e-6,
    );
    close(
        &first3("layer2.0.downsample.0.weight"),
        &[0.34623491764068604, 0.4505568742752075, 0.29387545585632324],
        1e-6,
    );
    close(
        &first3("fc.bias"),
        &[
            -0.04886994510889053,
            0.007633847650140524,
            0.1817077398300171,
        ],
        1e-6,
    );
}

#[test]
fn resnet_training_step_matches_pytorch() {
    let mut m = tiny();
    let mut opt = Sgd::new(m.parameters(), 0.1).momentum(0.9);
    let y = Tensor::from_vec(vec![3i64, 7], &[2]).unwrap();
    let loss = ops::cross_entropy_loss(&m.forward(&input()).unwrap(), &y).unwrap();
    opt.zero_grad();
    loss.backward().unwrap();
    opt.step().unwrap();
    close(&eval_logits(&mut m), &AFTER_STEP, 1e-5);
}

#[test]
fn state_dict_written_by_pytorch_loads_and_round_trips() {
    let mut m = tiny();
    load_state_dict_file(&m, FIXTURE).unwrap();
    close(&eval_logits(&mut m), &AFTER_STEP, 1e-5);
    let count = state_dict(&m)
        .into_iter()
        .find(|(n, _)| n == "bn1.num_batches_tracked")
        .unwrap()
        .1;
    assert_eq!(count.item().unwrap().to_i64(), 1);

    // Saved and loaded again into a fresh model: the same outputs.
    let dir = std::env::temp_dir().join(format!("sb-state-dict-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("resnet.safetensors");
    save_state_dict(&m, &path).unwrap();
    let mut again = tiny();
    load_state_dict_file(&again, &path).unwrap();
    close(&eval_logits(&mut again), &AFTER_STEP, 1e-5);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn load_state_dict_errors_as_pytorch() {
    // nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)).load_state_dict(...)
    let m = mlp(&[2, 3, 1], 0).unwrap();
    let before = m.parameters()[1].to_vec::<f32>().unwrap();
    let mut sd = BTreeMap::new();
    sd.insert("0.weight".to_string(), ops::zeros(&[3, 3]).unwrap());
    sd.insert("0.bias".to_string(), ops::zeros(&[3]).unwrap());
    sd.insert("2.weight".to_string(), ops::zeros(&[1, 3]).unwrap());
    sd.insert("extra".to_string(), ops::zeros(&[1]).unwrap());
    sd.insert("1.bias".to_string(), ops::zeros(&[1]).unwrap());
    let e = load_state_dict(&m, &sd).err().unwrap().to_string();
    // PyTorch lists the unexpected keys in the dict's order; a safetensors file's are sorted.
    assert!(
        e.contains(
            "Error(s) in loading state_dict for Sequential:\n\tMissing key(s) in state_dict: \
             \"2.bias\". \n\tUnexpected key(s) in state_dict: \"1.bias\", \"extra\". \n\tsize \
             mismatch for 0.weight: copying a param with shape torch.Size([3, 3]) from \
             checkpoint, the shape in current model is torch.Size([3, 2])."
        ),
        "{e}"
    );
    // Note [All-or-nothing state dict loading]: nothing was copied.
    assert_eq!(m.parameters()[1].to_vec::<f32>().unwrap(), before);

    // A PyTorch ResNet file into an MLP: every key is unexpected, every parameter missing.
    let e = load_state_dict_file(&m, FIXTURE).err().unwrap().to_string();
    assert!(
        e.contains("Missing key(s) in state_dict: \"0.weight\", \"0.bias\""),
        "{e}"
    );
    assert!(
        e.contains("Unexpected key(s) in state_dict: \"bn1.bias\""),
        "{e}"
    );
    // A file that is not there.
    assert!(load_state_dict_file(&m, "/nonexistent/model.safetensors").is_err());
}

//! Every operator family gives the same output metadata (sizes, strides, dtype) on the Meta
//! backend as on CPU, produces no data on Meta, and fails on Meta exactly when (and with the
//! message with which) it fails on CPU.

use switchboard_dispatcher::Result;
use switchboard_ops::{self as ops, TensorOps};
use switchboard_tensor::{Device, ScalarType, Tensor};

use switchboard_cpu as _;
use switchboard_meta as _;

fn randn(shape: &[i64], dev: Device) -> Result<Tensor> {
    ops::randn_with(shape, ops::RandnOptions::default().device(dev))
}

fn ints(shape: &[i64], high: i64, dev: Device) -> Result<Tensor> {
    ops::randint_with(
        high,
        shape,
        ops::RandintOptions {
            dtype: None,
            device: Some(dev),
            ..Default::default()
        },
    )
}

type Case = (&'static str, fn(Device) -> Result<Vec<Tensor>>);

fn one(t: Result<Tensor>) -> Result<Vec<Tensor>> {
    Ok(vec![t?])
}

const CASES: &[Case] = &[
    ("add broadcast", |d| {
        one(ops::add_with(
            &randn(&[3, 1, 5], d)?,
            &randn(&[4, 1], d)?,
            ops::AddOptions::default().alpha(2),
        ))
    }),
    ("add promotes int+float", |d| {
        one(ops::add(&ints(&[4], 5, d)?, &randn(&[4], d)?))
    }),
    ("add shape error", |d| {
        one(ops::add(&randn(&[3], d)?, &randn(&[4], d)?))
    }),
    ("mul_scalar", |d| {
        one(ops::mul_scalar(&randn(&[2, 3], d)?, 2.5))
    }),
    ("div int", |d| {
        one(ops::div(&ints(&[2, 3], 9, d)?, &ints(&[3], 9, d)?))
    }),
    ("exp of transposed", |d| {
        one(ops::exp(&randn(&[3, 4], d)?.t()?))
    }),
    ("relu", |d| one(ops::relu(&randn(&[5], d)?))),
    ("gelu tanh", |d| {
        one(ops::gelu_with(
            &randn(&[5], d)?,
            ops::GeluOptions::default().approximate("tanh"),
        ))
    }),
    ("eq", |d| {
        one(ops::eq(&randn(&[2, 2], d)?, &randn(&[2], d)?))
    }),
    ("where", |d| {
        let c = ops::gt_scalar(&randn(&[3, 3], d)?, 0)?;
        one(ops::r#where(&c, &randn(&[3, 3], d)?, &randn(&[3], d)?))
    }),
    ("clamp", |d| {
        one(ops::clamp_with(
            &randn(&[4], d)?,
            ops::ClampOptions::default().min(-1).max(1),
        ))
    }),
    ("sum dim keepdim", |d| {
        one(ops::sum_dim_int_list_with(
            &randn(&[2, 3, 4], d)?,
            Some(&[1]),
            ops::SumDimIntListOptions::default().keepdim(true),
        ))
    }),
    ("sum int promotes to long", |d| {
        one(ops::sum(&ints(&[7], 3, d)?))
    }),
    ("mean", |d| {
        one(ops::mean_dim(&randn(&[2, 3, 4], d)?, Some(&[0, 2])))
    }),
    ("max dim", |d| {
        let (v, i) = ops::max_dim(&randn(&[4, 5], d)?, 1)?;
        Ok(vec![v, i])
    }),
    ("argmax", |d| {
        one(ops::argmax_with(
            &randn(&[4, 5], d)?,
            ops::ArgmaxOptions::default().dim(0).keepdim(true),
        ))
    }),
    ("var", |d| {
        one(ops::var_dim(&randn(&[4, 5], d)?, Some(&[1])))
    }),
    ("mm", |d| {
        one(ops::mm(&randn(&[3, 4], d)?, &randn(&[4, 5], d)?))
    }),
    ("mm error", |d| {
        one(ops::mm(&randn(&[3, 4], d)?, &randn(&[5, 5], d)?))
    }),
    ("bmm", |d| {
        one(ops::bmm(&randn(&[2, 3, 4], d)?, &randn(&[2, 4, 5], d)?))
    }),
    ("addmm", |d| {
        one(ops::addmm(
            &randn(&[5], d)?,
            &randn(&[3, 4], d)?,
            &randn(&[4, 5], d)?,
        ))
    }),
    ("matmul batched", |d| {
        one(ops::matmul(
            &randn(&[2, 1, 3, 4], d)?,
            &randn(&[5, 4, 2], d)?,
        ))
    }),
    ("linear", |d| {
        one(ops::linear_with(
            &randn(&[8, 6], d)?,
            &randn(&[3, 6], d)?,
            ops::LinearOptions::default().bias(&randn(&[3], d)?),
        ))
    }),
    ("conv2d", |d| {
        one(ops::conv2d_with(
            &randn(&[2, 3, 8, 8], d)?,
            &randn(&[4, 3, 3, 3], d)?,
            ops::Conv2dOptions::default()
                .stride(&[2])
                .padding(&[1])
                .dilation(&[1]),
        ))
    }),
    ("conv1d groups", |d| {
        one(ops::conv1d_with(
            &randn(&[1, 4, 10], d)?,
            &randn(&[6, 2, 3], d)?,
            ops::Conv1dOptions::default().groups(2),
        ))
    }),
    ("max_pool2d", |d| {
        let (v, i) = ops::max_pool2d_with_indices_with(
            &randn(&[1, 2, 7, 7], d)?,
            &[3],
            ops::MaxPool2dWithIndicesOptions::default()
                .stride(&[2])
                .padding(&[1])
                .dilation(&[1])
                .ceil_mode(true),
        )?;
        Ok(vec![v, i])
    }),
    ("softmax", |d| one(ops::softmax(&randn(&[3, 5], d)?, 1))),
    ("log_softmax double", |d| {
        one(ops::log_softmax_with(
            &randn(&[3, 5], d)?,
            0,
            ops::LogSoftmaxOptions::default().dtype(ScalarType::Double),
        ))
    }),
    ("cross_entropy", |d| {
        one(ops::cross_entropy_loss(
            &randn(&[4, 10], d)?,
            &ints(&[4], 10, d)?,
        ))
    }),
    ("mse_loss none", |d| {
        one(ops::mse_loss_with(
            &randn(&[3, 2], d)?,
            &randn(&[3, 2], d)?,
            ops::MseLossOptions::default().reduction(0),
        ))
    }),
    ("layer_norm", |d| {
        let (o, m, r) = ops::native_layer_norm(&randn(&[2, 3, 4], d)?, &[4], None, None, 1e-5)?;
        Ok(vec![o, m, r])
    }),
    ("embedding", |d| {
        one(ops::embedding(&randn(&[10, 3], d)?, &ints(&[2, 4], 10, d)?))
    }),
    ("cat", |d| {
        one(ops::cat(&[randn(&[2, 3], d)?, randn(&[4, 3], d)?]))
    }),
    ("stack", |d| {
        one(ops::stack_with(
            &[randn(&[2, 3], d)?, randn(&[2, 3], d)?],
            ops::StackOptions::default().dim(1),
        ))
    }),
    ("index_select", |d| {
        one(ops::index_select(
            &randn(&[5, 3], d)?,
            0,
            &ints(&[7], 5, d)?,
        ))
    }),
    ("gather", |d| {
        one(ops::gather(&randn(&[5, 3], d)?, 1, &ints(&[5, 2], 3, d)?))
    }),
    ("views", |d| {
        let x = randn(&[2, 3, 4], d)?;
        Ok(vec![
            x.permute(&[2, 0, 1])?,
            ops::reshape(&x.transpose(0, 2)?, &[-1])?,
            ops::flatten_with(&x, ops::FlattenOptions::default().start_dim(1).end_dim(2))?,
            x.unsqueeze(1)?.expand(&[2, 5, 3, 4])?,
            ops::narrow(&x, 2, 1, 2)?,
            x.select(1, -1)?,
        ])
    }),
    ("contiguous channels_last", |d| {
        one(randn(&[1, 3, 4, 5], d)?.contiguous_with(
            ops::ContiguousOptions::default()
                .memory_format(switchboard_tensor::MemoryFormat::ChannelsLast),
        ))
    }),
    ("to dtype", |d| one(randn(&[3], d)?.to(ScalarType::Half))),
    ("full_like / arange", |d| {
        Ok(vec![
            ops::ones_like(&randn(&[2, 2], d)?)?,
            ops::arange_start_step_with(
                1,
                10,
                ops::ArangeStartStepOptions::default().step(2).device(d),
            )?,
        ])
    }),
];

#[test]
fn meta_matches_cpu() {
    let mut failures = Vec::new();
    for (name, f) in CASES {
        let cpu = f(Device::CPU);
        let meta = f(Device::META);
        match (cpu, meta) {
            (Ok(c), Ok(m)) => {
                for (c, m) in c.iter().zip(&m) {
                    let same = c.sizes() == m.sizes()
                        && c.strides() == m.strides()
                        && c.dtype() == m.dtype()
                        && m.is_meta()
                        && !m.has_data();
                    if !same {
                        failures.push(format!(
                            "{name}: cpu {:?}/{:?}/{} vs meta {:?}/{:?}/{} ({})",
                            c.sizes(),
                            c.strides(),
                            c.dtype(),
                            m.sizes(),
                            m.strides(),
                            m.dtype(),
                            m.device()
                        ));
                    }
                }
            }
            (Err(c), Err(m)) => {
                if c.first_line() != m.first_line() {
                    failures.push(format!("{name}: errors differ: cpu `{c}` vs meta `{m}`"));
                }
            }
            (c, m) => failures.push(format!(
                "{name}: cpu {:?} vs meta {:?}",
                c.map(|_| ()),
                m.map(|_| ())
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn meta_tensors_carry_meta_keys() {
    let m = randn(&[2], Device::META).unwrap();
    assert_eq!(
        m.key_set().to_string(),
        "DispatchKeySet(Meta, ADInplaceOrView, AutogradMeta)"
    );
}

#[test]
fn mixed_devices_fail_like_pytorch() {
    let c = randn(&[2], Device::CPU).unwrap();
    let m = randn(&[2], Device::META).unwrap();
    let e = ops::add(&c, &m).unwrap_err().to_string();
    assert!(
        e.contains("Expected all tensors to be on the same device"),
        "{e}"
    );
}

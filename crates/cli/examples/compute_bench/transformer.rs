//! `transformer_train_step`: a small decoder-only transformer language model.

use switchboard_autograd::AutogradTensor;
use switchboard_nn::{set_flash_sdp_enabled, Adam, DecoderLm, Module, Optimizer};
use switchboard_ops as ops;
use switchboard_tensor::Generator;

use crate::measure::{measure, random_labels, BoxError};

const BATCH: i64 = 16;
const SEQ_LEN: i64 = 128;
const VOCAB: i64 = 512;
const D_MODEL: usize = 256;
const HEADS: usize = 4;
const LAYERS: usize = 2;

pub fn transformer_train_step(steps: usize, threads: usize) -> Result<(), BoxError> {
    if switchboard_dispatcher::env_flag("COMPUTE_BENCH_MATH_SDPA")?.unwrap_or(false) {
        set_flash_sdp_enabled(false);
    }
    let model = DecoderLm::new(VOCAB as usize, SEQ_LEN as usize, D_MODEL, HEADS, LAYERS, 0)?;
    let mut opt = Adam::adamw(model.parameters(), 3e-4).weight_decay(0.01);
    let gen = Generator::new(1);
    let tokens = random_labels(&[BATCH, SEQ_LEN], VOCAB, &gen)?;
    let targets = ops::reshape(&random_labels(&[BATCH, SEQ_LEN], VOCAB, &gen)?, &[-1])?;
    let describe = serde_json::json!({
        "model": "decoder-only transformer vocab 512, d_model 256, 2 pre-norm blocks, 4 causal heads, GELU MLP 1024",
        "batch": BATCH,
        "seq_len": SEQ_LEN,
        "loss": "cross_entropy over every position",
        "optimizer": "AdamW(lr=3e-4, weight_decay=0.01)",
    });
    measure("transformer_train_step", describe, steps, threads, |ph| {
        ph.start();
        let logits = model.forward(&tokens)?;
        let loss = ops::cross_entropy_loss(&ops::reshape(&logits, &[-1, VOCAB])?, &targets)?;
        ph.end(0);
        loss.backward()?;
        ph.end(1);
        opt.step()?;
        opt.zero_grad();
        ph.end(2);
        Ok(loss.item()?.to_f64())
    })
}

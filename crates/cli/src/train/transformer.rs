//! `switchboard train --model transformer`: a small decoder-only transformer
//! ([`DecoderLm`]) learns to reverse sequences of digits, generated from the seed (no data
//! file): the input `d1 .. d6 SEP r1 .. r5` is trained to predict `r1 .. r6` (the digits
//! reversed) at the positions from SEP on, with AdamW, the cosine schedule with warm-up and
//! gradient clipping. An epoch is a shuffled pass over [`N_TRAIN`] generated sequences; the
//! test set is [`N_TEST`] other sequences, decoded greedily token by token, and a sequence
//! counts as solved when every digit is right.

use std::io::Write;
use std::time::Instant;

use switchboard_autograd::{no_grad, AutogradTensor};
use switchboard_nn::{
    clip_grad_norm_, cosine_schedule_with_warmup, Adam, DecoderLm, Module, Optimizer,
};
use switchboard_ops as ops;
use switchboard_tensor::{Device, Generator, ScalarType, Tensor};

use super::{EpochStats, TrainConfig, TrainError, TrainReport};

/// Digits per sequence.
pub const DIGITS: i64 = 6;
/// The separator token after the digits (the digits are tokens 0-9).
const SEP: i64 = 10;
const VOCAB: usize = 11;
/// Training sequences (of the 10^6 possible).
pub const N_TRAIN: usize = 3200;
/// Held-out sequences.
pub const N_TEST: i64 = 500;
/// Width, heads and blocks of the model.
const D_MODEL: usize = 64;
const HEADS: usize = 4;
const LAYERS: usize = 2;
/// AdamW's default learning rate here, its weight decay, and the clipping norm.
pub const DEFAULT_LR: f64 = 3e-3;
const WEIGHT_DECAY: f64 = 0.01;
const MAX_GRAD_NORM: f64 = 1.0;

fn long() -> ops::FullOptions {
    ops::FullOptions::default().dtype(ScalarType::Long)
}

/// `n` sequences of random digits `[n, DIGITS]` and their reversals.
fn draw(n: i64, generator: &Generator) -> Result<(Tensor, Tensor), TrainError> {
    let digits = ops::randint_generator(10, &[n, DIGITS], Some(generator))?;
    let backwards = Tensor::from_vec((0..DIGITS).rev().collect::<Vec<i64>>(), &[DIGITS])?;
    let reversed = ops::index_select(&digits, 1, &backwards)?;
    Ok((digits, reversed))
}

/// `digits SEP` (the prompt).
fn prompt(digits: &Tensor) -> Result<Tensor, TrainError> {
    let sep = ops::full_with(&[digits.sizes()[0], 1], SEP, long())?;
    Ok(ops::cat_with(
        &[digits.clone(), sep],
        ops::CatOptions { dim: 1 },
    )?)
}

/// Greedy decoding of the reversal of each row of `digits`: `[n, DIGITS]` predictions.
fn generate(model: &DecoderLm, digits: &Tensor) -> Result<Tensor, TrainError> {
    let _g = no_grad();
    let mut seq = prompt(digits)?;
    for _ in 0..DIGITS {
        let logits = model.forward(&seq)?;
        let last = ops::select(&logits, 1, -1)?;
        let next = ops::argmax_with(&last, ops::ArgmaxOptions::default().dim(1))?;
        seq = ops::cat_with(
            &[seq, ops::unsqueeze(&next, 1)?],
            ops::CatOptions { dim: 1 },
        )?;
    }
    Ok(ops::narrow(&seq, 1, DIGITS + 1, DIGITS)?)
}

/// The rows of `predicted` equal to `expected` (whole sequences).
fn solved(predicted: &Tensor, expected: &Tensor) -> Result<Vec<bool>, TrainError> {
    let p = ops::contiguous(predicted)?.to_vec::<i64>()?;
    let e = ops::contiguous(expected)?.to_vec::<i64>()?;
    Ok(p.chunks(DIGITS as usize)
        .zip(e.chunks(DIGITS as usize))
        .map(|(a, b)| a == b)
        .collect())
}

fn digits_text(row: &[i64]) -> String {
    row.iter().map(i64::to_string).collect::<Vec<_>>().join(" ")
}

/// Trains and reports as [`super::train`] does.
pub(super) fn run(
    cfg: &TrainConfig,
    out: &mut (dyn Write + Send),
) -> Result<TrainReport, TrainError> {
    if cfg.data.is_some() || cfg.distributed || cfg.device != Device::CPU {
        return Err(TrainError::Config(
            "--model transformer trains on its generated sequences on the cpu device (no \
             --data, --device or --distributed)"
                .into(),
        ));
    }
    let model = DecoderLm::new(VOCAB, 2 * DIGITS as usize, D_MODEL, HEADS, LAYERS, cfg.seed)?;
    if let Some(path) = &cfg.load {
        switchboard_nn::load_state_dict_file(&model, path)
            .map_err(|e| TrainError::Config(format!("--load {}: {e}", path.display())))?;
    }
    let lr = cfg.lr.unwrap_or(DEFAULT_LR);
    let steps_per_epoch = N_TRAIN.div_ceil(cfg.batch_size);
    let total_steps = cfg.epochs.saturating_mul(steps_per_epoch);
    let mut opt = Adam::adamw(model.parameters(), lr).weight_decay(WEIGHT_DECAY);
    let warmup = (total_steps / 20) as u64;
    let mut schedule = cosine_schedule_with_warmup(&mut opt, warmup, total_steps as u64);
    let (train_digits, train_reversed) = draw(
        N_TRAIN as i64,
        &Generator::new(cfg.seed.wrapping_add(0x7a11)),
    )?;
    let shuffle = Generator::new(cfg.seed.wrapping_add(0x5eed));
    let (test_digits, test_reversed) =
        draw(N_TEST, &Generator::new(cfg.seed.wrapping_add(0x7e57)))?;
    writeln!(
        out,
        "data: reversing {DIGITS} random digits (generated from seed {}); train {N_TRAIN}, \
         test {N_TEST}",
        cfg.seed
    )?;
    writeln!(
        out,
        "model: Transformer decoder ({LAYERS} pre-norm blocks, d_model {D_MODEL}, {HEADS} causal \
         heads, GELU MLP, learned positions), {} parameters on cpu; AdamW(lr={lr}, \
         weight_decay={WEIGHT_DECAY}), cosine schedule with {warmup} warm-up steps, gradient \
         clipping at {MAX_GRAD_NORM}, batch {}, {} epochs, {} threads",
        model.parameters().iter().map(|p| p.numel()).sum::<i64>(),
        cfg.batch_size,
        cfg.epochs,
        rayon::current_num_threads(),
    )?;
    let start = Instant::now();
    let mut epochs = Vec::new();
    let mut steps = 0;
    let mut test_accuracy = 0.0;
    let mut predicted = ops::zeros_like(&test_reversed)?;
    for epoch in 1..=cfg.epochs {
        let t0 = Instant::now();
        let (mut loss_sum, mut hits) = (0.0, 0usize);
        for chunk in super::data::permutation(N_TRAIN, &shuffle)?.chunks(cfg.batch_size) {
            let batch = chunk.len() as i64;
            let idx = Tensor::from_vec(chunk.iter().map(|&i| i as i64).collect(), &[batch])?;
            let digits = ops::index_select(&train_digits, 0, &idx)?;
            let reversed = ops::index_select(&train_reversed, 0, &idx)?;
            let input = ops::cat_with(
                &[prompt(&digits)?, ops::narrow(&reversed, 1, 0, DIGITS - 1)?],
                ops::CatOptions { dim: 1 },
            )?;
            let logits = model.forward(&input)?;
            let answer = ops::narrow(&logits, 1, DIGITS, DIGITS)?;
            let loss = ops::cross_entropy_loss(
                &ops::reshape(&answer, &[batch * DIGITS, VOCAB as i64])?,
                &ops::reshape(&reversed, &[batch * DIGITS])?,
            )?;
            opt.zero_grad();
            loss.backward()?;
            clip_grad_norm_(opt.parameters(), MAX_GRAD_NORM, false)?;
            opt.step()?;
            schedule.step(&mut opt);
            let loss = loss.item()?.to_f64();
            if !loss.is_finite() {
                return Err(TrainError::Config(format!(
                    "the loss diverged to {loss} in epoch {epoch}; try a smaller --lr"
                )));
            }
            loss_sum += loss * batch as f64;
            let teacher_forced = {
                let _g = no_grad();
                ops::argmax_with(&answer.detach(), ops::ArgmaxOptions::default().dim(2))?
            };
            hits += solved(&teacher_forced, &reversed)?
                .iter()
                .filter(|s| **s)
                .count();
            steps += 1;
        }
        predicted = generate(&model, &test_digits)?;
        let ok = solved(&predicted, &test_reversed)?;
        test_accuracy = ok.iter().filter(|s| **s).count() as f64 / N_TEST as f64;
        let e = EpochStats {
            epoch,
            train_loss: loss_sum / N_TRAIN as f64,
            train_accuracy: hits as f64 / N_TRAIN as f64,
            test_accuracy,
            seconds: t0.elapsed().as_secs_f64(),
        };
        writeln!(
            out,
            "epoch {:>3}/{}  loss {:.4}  train seq acc {:.4}  test seq acc {:.4}  ({:.2} s)",
            e.epoch, cfg.epochs, e.train_loss, e.train_accuracy, e.test_accuracy, e.seconds
        )?;
        epochs.push(e);
    }
    let seconds = start.elapsed().as_secs_f64();
    // The last epoch's decoding is the final model's.
    let ok = solved(&predicted, &test_reversed)?;
    let p = ops::contiguous(&predicted)?.to_vec::<i64>()?;
    let d = ops::contiguous(&test_digits)?.to_vec::<i64>()?;
    writeln!(out, "examples (held out, decoded greedily):")?;
    for i in 0..4 {
        let row = |v: &[i64]| digits_text(&v[i * DIGITS as usize..(i + 1) * DIGITS as usize]);
        writeln!(
            out,
            "  {}  ->  {}  {}",
            row(&d),
            row(&p),
            if ok[i] { "ok" } else { "wrong" }
        )?;
    }
    writeln!(
        out,
        "final test sequence accuracy: {test_accuracy:.4} ({}/{N_TEST}), {steps} steps in {seconds:.2} s ({:.2} ms/step)",
        ok.iter().filter(|s| **s).count(),
        1e3 * seconds / steps.max(1) as f64
    )?;
    if let Some(path) = &cfg.save {
        switchboard_nn::save_state_dict(&model, path)
            .map_err(|e| TrainError::Config(format!("--save {}: {e}", path.display())))?;
        writeln!(out, "saved the state dict to {}", path.display())?;
    }
    Ok(TrainReport {
        epochs,
        test_accuracy,
        n_train: N_TRAIN,
        n_test: N_TEST as usize,
        steps,
        dispatch: None,
        seconds,
        lazy: None,
    })
}

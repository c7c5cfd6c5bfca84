//! The accepted values of [`TrainConfig`](super::TrainConfig)'s options: one check per
//! option, shared by [`TrainConfig::validate`](super::TrainConfig::validate) and the
//! command line's parsers, so that a bad value gets the same clear message either way, before
//! anything runs (rather than a diverging loss or an abort later).

/// The most threads a user can ask for (`--threads`, `RAYON_NUM_THREADS`): far more than any
/// machine this runs on has cores, far fewer than would stall it.
pub const MAX_THREADS: usize = 1024;

/// `--epochs`: at least 1 (any count: nothing is allocated in proportion to it).
pub fn check_epochs(v: usize) -> Result<(), String> {
    at_least_one(v)
}

/// `--batch-size`: at least 1.
pub fn check_batch_size(v: usize) -> Result<(), String> {
    at_least_one(v)
}

/// `--hidden`: at least 1, and a tensor dimension (an `int64`).
pub fn check_hidden(v: usize) -> Result<(), String> {
    at_least_one(v)?;
    if i64::try_from(v).is_err() {
        return Err(format!("must be at most {}, got {v}", i64::MAX));
    }
    Ok(())
}

/// `--threads` (and `RAYON_NUM_THREADS`): from 1 to [`MAX_THREADS`].
pub fn check_threads(v: usize) -> Result<(), String> {
    if !(1..=MAX_THREADS).contains(&v) {
        return Err(format!("must be from 1 to {MAX_THREADS}, got {v}"));
    }
    Ok(())
}

/// `--lr`: a positive finite number.
pub fn check_lr(v: f64) -> Result<(), String> {
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("must be a positive finite number, got {v}"));
    }
    Ok(())
}

/// `--momentum`: in `[0, 1)` (PyTorch's SGD refuses a negative momentum; one of 1 or more
/// makes the updates grow without bound).
pub fn check_momentum(v: f64) -> Result<(), String> {
    if !(0.0..1.0).contains(&v) {
        return Err(format!("must be at least 0 and below 1, got {v}"));
    }
    Ok(())
}

/// `--weight-decay`: a finite number, at least 0 (PyTorch's optimizers refuse a negative one),
/// that float32 holds: the decay is the `alpha` of an `add` on the float32 parameters, which
/// PyTorch refuses beyond float32's range ("value cannot be converted to type float without
/// overflow"), so it is refused here before anything runs.
pub fn check_weight_decay(v: f64) -> Result<(), String> {
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("must be a finite number, at least 0, got {v}"));
    }
    if v > f64::from(f32::MAX) {
        return Err(format!(
            "must be at most {:e} (the parameters are float32), got {v:e}",
            f32::MAX
        ));
    }
    Ok(())
}

/// `--test-fraction`: strictly between 0 and 1.
pub fn check_test_fraction(v: f64) -> Result<(), String> {
    if !(v > 0.0 && v < 1.0) {
        return Err(format!("must be between 0 and 1 (exclusive), got {v}"));
    }
    Ok(())
}

/// `--max-data-mib`: at least 1 MiB, and a byte count that fits.
pub fn check_max_data_mib(v: u64) -> Result<(), String> {
    if v == 0 || v.checked_mul(1 << 20).is_none() {
        return Err(format!("must be from 1 to {}, got {v}", u64::MAX >> 20));
    }
    Ok(())
}

/// `--distributed-timeout`: from 1 second to a year.
pub fn check_distributed_timeout(v: u64) -> Result<(), String> {
    const YEAR: u64 = 365 * 24 * 3600;
    if !(1..=YEAR).contains(&v) {
        return Err(format!("must be from 1 to {YEAR} seconds, got {v}"));
    }
    Ok(())
}

fn at_least_one(v: usize) -> Result<(), String> {
    if v == 0 {
        return Err("must be at least 1, got 0".into());
    }
    Ok(())
}

/// Checks `RAYON_NUM_THREADS`, which sizes rayon's global pool when `--threads` is not given:
/// a number of threads within [`check_threads`]' bounds (0 or unset: one per core).
pub fn check_rayon_env() -> Result<(), String> {
    let Some(v) = std::env::var_os("RAYON_NUM_THREADS") else {
        return Ok(());
    };
    let text = v.to_string_lossy();
    match text.trim().parse::<u64>() {
        Ok(0) => Ok(()),
        Ok(n) => check_threads(usize::try_from(n).unwrap_or(usize::MAX))
            .map_err(|e| format!("RAYON_NUM_THREADS {e}")),
        Err(_) => Err(format!(
            "RAYON_NUM_THREADS={text} is not a number of threads (from 1 to {MAX_THREADS}; 0 or \
             unset: one per core)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds() {
        assert!(check_epochs(usize::MAX).is_ok());
        assert_eq!(check_epochs(0).unwrap_err(), "must be at least 1, got 0");
        assert!(check_hidden(1 << 40).is_ok());
        assert_eq!(
            check_hidden(usize::MAX).unwrap_err(),
            format!("must be at most 9223372036854775807, got {}", usize::MAX)
        );
        assert!(check_threads(MAX_THREADS).is_ok());
        assert_eq!(
            check_threads(100000).unwrap_err(),
            "must be from 1 to 1024, got 100000"
        );
        assert!(check_threads(0).is_err());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(check_lr(bad).is_err(), "{bad}");
        }
        for bad in [-0.1, 1.0, 1.5, f64::NAN] {
            assert!(check_momentum(bad).is_err(), "{bad}");
        }
        assert!(check_momentum(0.0).is_ok() && check_momentum(0.99).is_ok());
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e39] {
            assert!(check_weight_decay(bad).is_err(), "{bad}");
        }
        assert!(check_weight_decay(0.0).is_ok());
        for bad in [0.0, 1.0, -0.5, f64::NAN] {
            assert!(check_test_fraction(bad).is_err(), "{bad}");
        }
        assert!(check_max_data_mib(1).is_ok());
        assert!(check_max_data_mib(0).is_err());
        assert!(check_max_data_mib(u64::MAX).is_err());
    }
}

//! Comparing results: metadata exactly, values with a tolerance (NaN equal to NaN).

use switchboard_tensor::Tensor;

/// Sizes, dtype and values of `got` against `want`; floating values within
/// `atol + rtol * |want|`, others exactly. The error says what differs.
pub fn assert_close(got: &Tensor, want: &Tensor, what: &str) -> Result<(), String> {
    if got.sizes() != want.sizes() {
        return Err(format!(
            "{what}: sizes {:?}, expected {:?}",
            got.sizes(),
            want.sizes()
        ));
    }
    if got.dtype() != want.dtype() {
        return Err(format!(
            "{what}: dtype {:?}, expected {:?}",
            got.dtype(),
            want.dtype()
        ));
    }
    let (g, w) = match (got.to_vec_as::<f64>(), want.to_vec_as::<f64>()) {
        (Ok(g), Ok(w)) => (g, w),
        (Err(e), _) | (_, Err(e)) => return Err(format!("{what}: {e}")),
    };
    let (atol, rtol) = if want.dtype().is_floating_point() {
        let eps = if want.dtype().element_size() >= 4 {
            1e-5
        } else {
            1e-2
        };
        (eps, eps * 10.0)
    } else {
        (0.0, 0.0)
    };
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let same = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs();
        if !same {
            return Err(format!("{what}: element {i} is {a}, expected {b}"));
        }
    }
    Ok(())
}

/// Sizes, strides and dtype of `got` against `want` (Meta against CPU: the same kernels,
/// so the same strides, those of size-1 dimensions included).
pub fn assert_same_metadata(got: &Tensor, want: &Tensor, what: &str) -> Result<(), String> {
    if got.sizes() != want.sizes() || got.strides() != want.strides() || got.dtype() != want.dtype()
    {
        return Err(format!(
            "{what}: {:?} sizes {:?} strides {:?}, expected {:?} {:?} {:?}",
            got.dtype(),
            got.sizes(),
            got.strides(),
            want.dtype(),
            want.sizes(),
            want.strides()
        ));
    }
    Ok(())
}

/// Fails when a generic test over the registry found failures, listing the first 80 (all of
/// them when the boolean flag `SAMPLES_ALL_FAILURES` is on), each cut to one line of 300 characters.
#[track_caller]
pub fn assert_no_failures(failures: &[String]) {
    let all = switchboard_dispatcher::env_flag("SAMPLES_ALL_FAILURES")
        .unwrap_or_else(|message| panic!("{message}"));
    let shown = if all.unwrap_or(false) { usize::MAX } else { 80 };
    let lines: Vec<String> = failures
        .iter()
        .take(shown)
        .map(|f| f.chars().take(300).collect())
        .collect();
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        lines.join("\n")
    );
}

//! Counters and the statistics of the lazy backend: [`stats`] (Genie's `get_stats`, and
//! more), [`stats_json`], [`metrics_report`].

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::backend::{default_backend, LazyBackend};
use crate::intercepted_op::{static_coverage, StaticCoverage};

/// A relaxed event counter.
pub(crate) struct Counter(AtomicU64);

impl Counter {
    const fn new() -> Counter {
        Counter(AtomicU64::new(0))
    }
    #[inline]
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
    fn reset(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// The counters of one lazy device.
pub(crate) struct Counters {
    pub operations: Counter,
    /// Registered captures made by the typed kernels' fast path (counted here only, so the
    /// fast path adds one counter, as the general path).
    pub unboxed_captures: Counter,
    pub registered_captures: Counter,
    pub fallback_captures: Counter,
    pub eager_fallbacks: Counter,
    pub eager_mode_calls: Counter,
    pub materializations: Counter,
    pub syncs: Counter,
    pub explicit_syncs: Counter,
    pub nodes_captured: Counter,
    pub nodes_executed: Counter,
    pub nodes_merged: Counter,
    pub nodes_dead: Counter,
    pub cache_hits: Counter,
    pub cache_misses: Counter,
    pub sync_ns: Counter,
}

impl Counters {
    pub const fn new() -> Counters {
        Counters {
            operations: Counter::new(),
            unboxed_captures: Counter::new(),
            registered_captures: Counter::new(),
            fallback_captures: Counter::new(),
            eager_fallbacks: Counter::new(),
            eager_mode_calls: Counter::new(),
            materializations: Counter::new(),
            syncs: Counter::new(),
            explicit_syncs: Counter::new(),
            nodes_captured: Counter::new(),
            nodes_executed: Counter::new(),
            nodes_merged: Counter::new(),
            nodes_dead: Counter::new(),
            cache_hits: Counter::new(),
            cache_misses: Counter::new(),
            sync_ns: Counter::new(),
        }
    }
}

/// What a lazy device's backend has done since start-up (or the last [`reset_stats`]):
/// Genie's statistics (`get_stats`: its fields have its names, [`LazyStats::to_json`] has its
/// keys), and more. See [`metrics_report`] for a readable form.
#[derive(Clone, Debug, PartialEq)]
pub struct LazyStats {
    /// Operators registered on the device: those with a dedicated kernel on the `Lazy` key
    /// (interception layer 1, [`REGISTERED_OPS`](crate::REGISTERED_OPS)) and the names
    /// registered at run time (Note [Operators registered at run time]).
    pub registered_ops: usize,
    /// Registrations that took effect: the same operators (a failed one registers nothing).
    pub successful_registrations: usize,
    /// Names [`register_op`](crate::LazyBackend::register_op) and
    /// [`register_ops_from_trace`](crate::LazyBackend::register_ops_from_trace) refused ...
    pub failed_registrations: usize,
    /// ... with the reason, by name.
    pub registration_failures: BTreeMap<String, String>,
    /// Calls that reached the lazy backend (all three layers).
    pub operation_count: u64,
    /// Calls captured by a dedicated kernel (layer 1) ...
    pub registered_captures: u64,
    /// ... of which captured from their typed arguments, without boxing (Note [Unboxed
    /// capture]).
    pub unboxed_captures: u64,
    /// Calls captured by the boxed fallback (layer 2), in total ...
    pub fallback_capture_count: u64,
    /// ... and per operator: the unique fallback-captured operators are the keys (Genie's
    /// `fallback_ops` count adds the failed registrations, see [`LazyStats::to_json`]).
    pub fallback_ops: BTreeMap<String, u64>,
    /// Calls that ran eagerly on CPU because they cannot be captured or are disabled
    /// (layer 3), in total ...
    pub eager_fallback_count: u64,
    /// ... and per operator.
    pub eager_fallback_ops: BTreeMap<String, u64>,
    /// Calls run at once because lazy mode was off.
    pub eager_mode_calls: u64,
    /// Times a lazy tensor's value was brought to the host (printing, `to_vec`, `item`,
    /// `to(cpu)`, the inputs of an eager fallback).
    pub materializations: u64,
    /// Runs of the pending graph (materialisations that needed one, and explicit syncs).
    pub syncs: u64,
    /// Explicit [`sync`](crate::sync) / [`mark_step`](crate::mark_step) calls.
    pub explicit_syncs: u64,
    /// Nodes captured (one per captured call).
    pub nodes_captured: u64,
    /// Calls the executor ran.
    pub nodes_executed: u64,
    /// Calls not run because an identical pure call was (Note [Merging identical nodes]).
    pub nodes_merged: u64,
    /// Captured nodes not run because no live tensor needed them.
    pub nodes_dead: u64,
    /// Syncs whose graph was found in the cache ...
    pub cache_hits: u64,
    /// ... and those that prepared a new plan.
    pub cache_misses: u64,
    /// Plans in the cache.
    pub cache_size: usize,
    /// Whether lazy mode is on.
    pub lazy_mode: bool,
    /// The executor's name.
    pub executor: String,
    /// Milliseconds spent in syncs (planning and running graphs).
    pub sync_ms: f64,
    /// Genie's coverage: successful registrations / (successful + failed) * 100, 0 when
    /// nothing was registered ([`registration_coverage`]).
    pub coverage_percentage: f64,
    /// The share of intercepted calls captured without an eager fallback, in percent (100
    /// when there was none).
    pub capture_percentage: f64,
    /// Which registered operators the layers can capture (computed from the dispatcher's
    /// tables).
    pub static_coverage: StaticCoverage,
}

/// The default lazy device's statistics (see [`LazyStats`]).
#[doc(alias = "get_stats")]
pub fn stats() -> LazyStats {
    default_backend().stats()
}

/// Sets every counter of the default lazy device (and its per-operator counts and profile) back
/// to zero; the graph cache is kept.
pub fn reset_stats() {
    default_backend().reset_stats()
}

/// The default lazy device's statistics as a readable report (see
/// [`LazyBackend::metrics_report`]).
pub fn metrics_report() -> String {
    default_backend().metrics_report()
}

impl LazyBackend {
    /// This device's statistics (see [`LazyStats`]).
    #[doc(alias = "get_stats")]
    pub fn stats(&self) -> LazyStats {
        let mut fallback_ops = BTreeMap::new();
        let mut eager_fallback_ops = BTreeMap::new();
        for c in self.all_op_counts() {
            let f = c.fallback_captures.load(Ordering::Relaxed);
            if f > 0 {
                fallback_ops.insert(c.op.name.clone(), f);
            }
            let e = c.eager.load(Ordering::Relaxed);
            if e > 0 {
                eager_fallback_ops.insert(c.op.name.clone(), e);
            }
        }
        let s = &self.stats;
        let unboxed = s.unboxed_captures.get();
        let registered = s.registered_captures.get() + unboxed;
        let captured = registered + s.fallback_captures.get();
        let eager = s.eager_fallbacks.get();
        let capture_percentage = if captured + eager == 0 {
            100.0
        } else {
            100.0 * captured as f64 / (captured + eager) as f64
        };
        let coverage = static_coverage();
        let successful = self.registrations.successful();
        let registration_failures = self.registrations.failed();
        LazyStats {
            registered_ops: successful,
            successful_registrations: successful,
            failed_registrations: registration_failures.len(),
            coverage_percentage: registration_coverage(successful, registration_failures.len()),
            registration_failures,
            operation_count: s.operations.get(),
            registered_captures: registered,
            unboxed_captures: unboxed,
            fallback_capture_count: s.fallback_captures.get(),
            fallback_ops,
            eager_fallback_count: eager,
            eager_fallback_ops,
            eager_mode_calls: s.eager_mode_calls.get(),
            materializations: s.materializations.get(),
            syncs: s.syncs.get(),
            explicit_syncs: s.explicit_syncs.get(),
            nodes_captured: s.nodes_captured.get(),
            nodes_executed: s.nodes_executed.get(),
            nodes_merged: s.nodes_merged.get(),
            nodes_dead: s.nodes_dead.get(),
            cache_hits: s.cache_hits.get(),
            cache_misses: s.cache_misses.get(),
            cache_size: self.cache.len(),
            lazy_mode: crate::lazy_mode(),
            executor: self.executor().name().to_string(),
            sync_ms: s.sync_ns.get() as f64 / 1e6,
            capture_percentage,
            static_coverage: coverage,
        }
    }

    /// Sets every counter (and the per-operator counts and profile) back to zero; the graph
    /// cache is kept.
    pub fn reset_stats(&self) {
        let s = &self.stats;
        for c in [
            &s.operations,
            &s.unboxed_captures,
            &s.registered_captures,
            &s.fallback_captures,
            &s.eager_fallbacks,
            &s.eager_mode_calls,
            &s.materializations,
            &s.syncs,
            &s.explicit_syncs,
            &s.nodes_captured,
            &s.nodes_executed,
            &s.nodes_merged,
            &s.nodes_dead,
            &s.cache_hits,
            &s.cache_misses,
            &s.sync_ns,
        ] {
            c.reset();
        }
        self.reset_op_counts();
    }

    /// The statistics as a readable report, in the style of torch_xla's metrics report:
    ///
    /// ```text
    /// Lazy backend metrics (executor: cpu, lazy mode: on)
    /// Counter: OperationCount
    ///   Value: 1845
    /// ...
    /// ```
    pub fn metrics_report(&self) -> String {
        let s = self.stats();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Lazy backend metrics (executor: {}, lazy mode: {})",
            s.executor,
            if s.lazy_mode { "on" } else { "off" }
        );
        let counter = |out: &mut String, name: &str, v: String| {
            let _ = writeln!(out, "Counter: {name}\n  Value: {v}");
        };
        counter(&mut out, "RegisteredOps", s.registered_ops.to_string());
        counter(&mut out, "OperationCount", s.operation_count.to_string());
        counter(
            &mut out,
            "RegisteredCaptures",
            s.registered_captures.to_string(),
        );
        counter(
            &mut out,
            "FallbackCaptures",
            s.fallback_capture_count.to_string(),
        );
        counter(
            &mut out,
            "FallbackCapturedOps",
            s.fallback_ops.len().to_string(),
        );
        counter(
            &mut out,
            "EagerFallbacks",
            s.eager_fallback_count.to_string(),
        );
        counter(
            &mut out,
            "EagerFallbackOps",
            s.eager_fallback_ops.len().to_string(),
        );
        counter(&mut out, "EagerModeCalls", s.eager_mode_calls.to_string());
        counter(&mut out, "Materializations", s.materializations.to_string());
        counter(
            &mut out,
            "Syncs",
            format!("{} ({} explicit)", s.syncs, s.explicit_syncs),
        );
        counter(&mut out, "NodesCaptured", s.nodes_captured.to_string());
        counter(&mut out, "NodesExecuted", s.nodes_executed.to_string());
        counter(&mut out, "NodesDead", s.nodes_dead.to_string());
        counter(&mut out, "NodesMerged", s.nodes_merged.to_string());
        counter(
            &mut out,
            "GraphCache",
            format!(
                "{} hits, {} misses, {} plans",
                s.cache_hits, s.cache_misses, s.cache_size
            ),
        );
        out.push_str(&self.executor().report());
        let _ = writeln!(
            out,
            "Metric: SyncTime\n  TotalSamples: {}\n  Accumulator: {:.3} ms",
            s.syncs, s.sync_ms
        );
        let _ = writeln!(
            out,
            "Coverage: {:.2}% of calls captured without an eager fallback",
            s.capture_percentage
        );
        let _ = writeln!(
            out,
            "Registrations: {} successful, {} failed ({:.1}% coverage)",
            s.successful_registrations, s.failed_registrations, s.coverage_percentage
        );
        let c = &s.static_coverage;
        let _ = writeln!(
        out,
        "Static coverage: {:.1}% of {} operators capturable ({} registered, {} by the fallback, \
         {} decomposed by composite kernels, {} eager only)",
        c.percentage(),
        c.operators,
        c.registered,
        c.fallback,
        c.composite,
        c.eager_only
    );
        if !s.fallback_ops.is_empty() {
            let _ = writeln!(out, "Fallback-captured operators:");
            for (k, v) in &s.fallback_ops {
                let _ = writeln!(out, "  {k}: {v}");
            }
        }
        if !s.eager_fallback_ops.is_empty() {
            let _ = writeln!(out, "Eager-fallback operators:");
            for (k, v) in &s.eager_fallback_ops {
                let _ = writeln!(out, "  {k}: {v}");
            }
        }
        out
    }
}

/// Genie's `_calculate_coverage`: `successful / (successful + failed) * 100`, 0 when nothing was
/// registered.
///
/// ```
/// # use switchboard_lazy::registration_coverage;
/// assert_eq!(registration_coverage(45, 5), 90.0);
/// assert_eq!(registration_coverage(0, 0), 0.0);
/// assert_eq!(registration_coverage(0, 3), 0.0);
/// ```
pub fn registration_coverage(successful: usize, failed: usize) -> f64 {
    let total = successful + failed;
    if total == 0 {
        return 0.0;
    }
    successful as f64 / total as f64 * 100.0
}

/// The default lazy device's statistics with Genie's keys (see [`LazyStats::to_json`]).
#[doc(alias = "get_stats")]
pub fn stats_json() -> serde_json::Value {
    default_backend().stats().to_json()
}

impl LazyStats {
    /// Genie's `get_stats()` dictionary, with exactly its keys: `registered_ops`,
    /// `successful_registrations`, `failed_registrations`, `fallback_ops` (the number of
    /// unique operators captured by the fallback or whose registration failed, as Genie adds
    /// failed registrations to its fallback set), `fallback_capture_count` (from its fallback
    /// statistics), `operation_count`, `lazy_mode`, `coverage_percentage`.
    ///
    /// ```
    /// # use switchboard_lazy as lazy;
    /// let j = lazy::stats().to_json();
    /// let mut keys: Vec<&str> = j.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    /// keys.sort();
    /// assert_eq!(keys, ["coverage_percentage", "failed_registrations", "fallback_capture_count",
    ///     "fallback_ops", "lazy_mode", "operation_count", "registered_ops",
    ///     "successful_registrations"]);
    /// ```
    pub fn to_json(&self) -> serde_json::Value {
        let fallback_ops = self
            .fallback_ops
            .keys()
            .chain(self.registration_failures.keys())
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        serde_json::json!({
            "registered_ops": self.registered_ops,
            "successful_registrations": self.successful_registrations,
            "failed_registrations": self.failed_registrations,
            "fallback_ops": fallback_ops,
            "fallback_capture_count": self.fallback_capture_count,
            "operation_count": self.operation_count,
            "lazy_mode": self.lazy_mode,
            "coverage_percentage": self.coverage_percentage,
        })
    }
}

//! The per-operator overhead profile (Genie's `get_performance_stats`): the time intercepted
//! calls spend in the lazy backend, and the execution time an executor reports.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;
use switchboard_dispatcher::{DispatchError, OperatorHandle};
use switchboard_tensor::TensorError;

use crate::backend::{default_backend, LazyBackend};
use crate::intercepted_op::intercepted_op;
use crate::op_filter::resolve;

// Note [Zero-cost profiling]
// The per-operator overhead profile reads the clock twice per intercepted call. When it is
// off, an interception pays one relaxed load of its device's `profiling` flag and a not-taken
// branch; the clock is never read.

// Note [Time measured elsewhere]
// A graph's calls run in the executor, which may be a worker in another process: the time an
// operator costs is then its capture here plus its execution there. An executor reports the
// second with `LazyBackend::record_execution_time(op, calls, ns)`, which adds to the operator's
// line whether or not profiling is on. A call captured and then executed is one call whose
// overhead is both times, so a line's `count` is the larger of its profiled interceptions and
// its executions (they differ when profiling was off while capturing, or the executor dropped
// or merged calls), and `avg_overhead_ns` is all the time divided by that count.

/// Turns the default lazy device's per-operator overhead profile on or off (Note [Zero-cost
/// profiling]); returns the previous setting.
pub fn set_profiling(on: bool) -> bool {
    default_backend().set_profiling(on)
}

/// One operator's line of the overhead profile.
#[derive(Clone, Debug, PartialEq)]
pub struct OpProfile {
    /// Calls: intercepted while profiling, or executed elsewhere if more (Note [Time measured
    /// elsewhere]).
    pub count: u64,
    /// Mean time per call, in nanoseconds: in the lazy backend (capture, or the eager run of an
    /// eager fallback), plus the execution time an executor reported.
    pub avg_overhead_ns: f64,
}

/// The default lazy device's per-operator overhead profile (see [`LazyBackend::profile`]).
#[doc(alias = "get_performance_stats")]
pub fn profile() -> BTreeMap<String, OpProfile> {
    default_backend().profile()
}

/// The default lazy device's profile as JSON (see [`LazyBackend::profile_json`]).
pub fn profile_json() -> serde_json::Value {
    default_backend().profile_json()
}

/// `a += b`, saturating: the figures come from callers.
fn add_saturating(a: &AtomicU64, b: u64) {
    let _ = a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        Some(v.saturating_add(b))
    });
}

impl LazyBackend {
    /// The per-operator overhead profile (Genie's `get_performance_stats`): the operators
    /// intercepted while profiling was on, and those an executor reported time for (Note [Time
    /// measured elsewhere]), by name.
    #[doc(alias = "get_performance_stats")]
    pub fn profile(&self) -> BTreeMap<String, OpProfile> {
        self.all_op_counts()
            .into_iter()
            .filter_map(|c| {
                let profiled = c.profile_count.load(Ordering::Relaxed);
                let count = profiled.max(c.recorded_calls.load(Ordering::Relaxed));
                (count > 0).then(|| {
                    let ns = c
                        .profile_ns
                        .load(Ordering::Relaxed)
                        .saturating_add(c.recorded_ns.load(Ordering::Relaxed));
                    (
                        c.op.name.clone(),
                        OpProfile {
                            count,
                            avg_overhead_ns: ns as f64 / count as f64,
                        },
                    )
                })
            })
            .collect()
    }

    /// The profile as JSON, in Genie's form: `{"aten::mm": {"count": 1000, "avg_overhead_ns":
    /// 150.0}, ...}` (the mean rounded to a tenth of a nanosecond).
    pub fn profile_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for (k, p) in self.profile() {
            m.insert(
                k,
                json!({ "count": p.count, "avg_overhead_ns": (p.avg_overhead_ns * 10.0).round() / 10.0 }),
            );
        }
        serde_json::Value::Object(m)
    }

    /// Adds `calls` executions taking `ns` nanoseconds in all, measured elsewhere (an
    /// executor's worker), to operator `op`'s line of the profile (Note [Time measured
    /// elsewhere]). `op` is one operator: `aten::mm`, `mm`, `aten::add.Tensor`, or the graph's
    /// spelling `aten.add.Tensor`; a name of several overloads (`add`) or of none is an error.
    ///
    /// ```
    /// # use switchboard_lazy as lazy;
    /// let d = lazy::backend("lazy:6".parse().unwrap()).unwrap();
    /// d.record_execution_time("aten::mm", 4, 4_000).unwrap();
    /// assert_eq!(d.profile()["aten::mm"].count, 4);
    /// assert_eq!(d.profile()["aten::mm"].avg_overhead_ns, 1000.0);
    /// assert!(d.record_execution_time("add", 1, 1).is_err()); // which overload?
    /// ```
    pub fn record_execution_time(
        &self,
        op: &str,
        calls: u64,
        ns: u64,
    ) -> Result<(), DispatchError> {
        let handle = one_operator(op)?;
        let counts = self.op_counts(&intercepted_op(&handle));
        add_saturating(&counts.recorded_calls, calls);
        add_saturating(&counts.recorded_ns, ns);
        Ok(())
    }
}

/// The one operator `name` names: `aten::mm` is the overload without a name when there is one;
/// the graph's `aten.mm.default` spelling is accepted.
fn one_operator(name: &str) -> Result<OperatorHandle, DispatchError> {
    const WHAT: &str = "record_execution_time";
    // `aten.add.Tensor` (the graph's spelling) is `aten::add.Tensor`.
    let graph_spelling = match name.split_once('.') {
        Some((ns, rest)) if !name.contains("::") => Some(format!("{ns}::{rest}")),
        _ => None,
    };
    let (name, ops) = match graph_spelling.and_then(|n| resolve(WHAT, &n).ok().map(|r| (n, r.1))) {
        Some(found) => found,
        None => (name.to_string(), resolve(WHAT, name)?.1),
    };
    let has_overload = name.rsplit("::").next().is_some_and(|n| n.contains('.'));
    if ops.len() == 1 {
        return Ok(ops.into_iter().next().expect("one operator"));
    }
    if !has_overload {
        if let Some(op) = ops.iter().find(|o| o.name().overload_name().is_empty()) {
            return Ok(op.clone());
        }
    }
    let overloads: Vec<String> = ops.iter().map(|o| o.name().to_string()).collect();
    Err(TensorError::invalid(format!(
        "{WHAT}: '{name}' names {} operators ({}); name one overload",
        ops.len(),
        overloads.join(", ")
    ))
    .into())
}

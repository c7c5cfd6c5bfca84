//! What the dispatcher did during training, gathered with its observer hook
//! ([`add_observer`]): calls per operator, per dispatch key and per kernel, and the layer hops
//! (a kernel at one key redispatching the same operator to a lower key, e.g.
//! `AutogradCPU -> CPU`).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use switchboard_dispatcher::{add_observer, CallEvent, ObserverGuard};

/// Counts of the observed operator calls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DispatchStats {
    /// Every kernel run (a call that hops through three keys counts three times).
    pub kernel_calls: u64,
    /// Calls made by user code (depth 0).
    pub top_level_calls: u64,
    /// Calls per operator (`aten::addmm`), each kernel run counted.
    pub per_operator: BTreeMap<String, u64>,
    /// Kernel runs per dispatch key (`CPU`, `AutogradCPU`, ...).
    pub per_key: BTreeMap<String, u64>,
    /// Runs per kernel (its debug name).
    pub per_kernel: BTreeMap<String, u64>,
    /// Redispatches of an operator from one key to a lower one: `(from, to)` -> count.
    pub layer_hops: BTreeMap<(String, String), u64>,
    /// Calls made from inside another operator's kernel (decompositions, backward formulas).
    pub nested_calls: u64,
}

struct Frame {
    op: String,
    key: String,
}

thread_local! {
    /// Per recorder, the calls in progress on this thread.
    static STACKS: RefCell<HashMap<u64, Vec<Frame>>> = RefCell::new(HashMap::new());
}

/// Records every operator call while alive.
pub struct Recorder {
    stats: Arc<Mutex<DispatchStats>>,
    _guard: ObserverGuard,
}

impl Recorder {
    /// Starts recording (all threads).
    pub fn start() -> Recorder {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stats = Arc::new(Mutex::new(DispatchStats::default()));
        let s = Arc::clone(&stats);
        let guard = add_observer(move |e: &CallEvent<'_>| observe(id, &s, e));
        Recorder {
            stats,
            _guard: guard,
        }
    }

    /// Stops recording and returns the counts.
    pub fn finish(self) -> DispatchStats {
        let Recorder { stats, _guard } = self;
        drop(_guard);
        let stats = stats.lock().unwrap_or_else(|e| e.into_inner());
        stats.clone()
    }
}

fn observe(id: u64, stats: &Mutex<DispatchStats>, e: &CallEvent<'_>) {
    STACKS.with(|stacks| {
        let mut stacks = stacks.borrow_mut();
        let stack = stacks.entry(id).or_default();
        if !e.before {
            stack.pop();
            return;
        }
        let op = e.op.name().to_string();
        let key = e.key.to_string();
        let mut s = stats.lock().unwrap_or_else(|e| e.into_inner());
        s.kernel_calls += 1;
        *s.per_operator.entry(op.clone()).or_default() += 1;
        *s.per_key.entry(key.clone()).or_default() += 1;
        *s.per_kernel.entry(e.kernel.to_string()).or_default() += 1;
        match stack.last() {
            None => s.top_level_calls += 1,
            Some(parent) if parent.op == op => {
                *s.layer_hops
                    .entry((parent.key.clone(), key.clone()))
                    .or_default() += 1;
            }
            Some(_) => s.nested_calls += 1,
        }
        stack.push(Frame { op, key });
    });
}

impl DispatchStats {
    /// A human-readable table; `top` limits the operator and kernel lists.
    pub fn render(&self, top: usize) -> String {
        let mut out = String::new();
        let hops: u64 = self.layer_hops.values().sum();
        let _ = writeln!(
            out,
            "dispatch summary: {} kernel runs ({} top-level calls, {} nested calls, {} layer hops)",
            self.kernel_calls, self.top_level_calls, self.nested_calls, hops
        );
        let section = |out: &mut String, title: &str, map: Vec<(String, u64)>| {
            let mut v = map;
            v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            let n = v.len();
            let _ = writeln!(out, "  {title} ({n}):");
            for (name, c) in v.iter().take(top) {
                let _ = writeln!(out, "    {c:>9}  {name}");
            }
            if n > top {
                let rest: u64 = v[top..].iter().map(|x| x.1).sum();
                let _ = writeln!(out, "    {rest:>9}  ({} more)", n - top);
            }
        };
        let clone = |m: &BTreeMap<String, u64>| m.iter().map(|(k, v)| (k.clone(), *v)).collect();
        section(&mut out, "calls per operator", clone(&self.per_operator));
        section(&mut out, "calls per dispatch key", clone(&self.per_key));
        section(&mut out, "kernels hit", clone(&self.per_kernel));
        section(
            &mut out,
            "layer hops",
            self.layer_hops
                .iter()
                .map(|((a, b), c)| (format!("{a} -> {b}"), *c))
                .collect(),
        );
        out
    }
}

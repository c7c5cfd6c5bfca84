//! Selective interception (Genie's `enable_ops` / `disable_ops`): which operators a lazy device
//! captures, and which go down the default path.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::RwLock;

use switchboard_dispatcher::{DispatchError, Dispatcher, OperatorHandle};
use switchboard_keys::DeviceType;
use switchboard_schema::OperatorName;
use switchboard_tensor::TensorError;

use crate::backend::{default_backend, LazyBackend};
use crate::composite_scope::{self, Verdict};

// Note [Selective interception]
// Each lazy device has two lists of operator names (Note [Lazy devices]):
// - the allow-list of `enable_ops` (Genie's "only intercept specific operation types"): while
//   there is one, only the operators on it are captured;
// - the deny-list of `disable_ops`: the operators on it are not captured.
// A call that is not captured goes down the default path, the eager one of interception layer
// 3: its inputs are materialised, it runs on CPU (or through the implementation `register_op`
// gave it, Note [Operators registered at run time]) and its results are wrapped as lazy
// tensors of the device. Disable wins: a call is captured when its operator is not disabled
// and, if there is an allow-list, is on it. Both lists only grow; `enable_all_ops` empties both,
// which is the state a device starts in (everything intercepted).
// A name without namespace means `aten::`; a name without overload means every overload (`add`
// is `add.Tensor`, `add.Scalar`, ...) and `.default` the overload without a name. Every name
// must be an operator the dispatcher knows; an unknown one is an error naming it, and then
// nothing changes; an empty list changes nothing either (it makes no empty allow-list).
// Composite operators (`linear`, `conv2d`, `matmul`) never reach the backend themselves;
// naming one applies to the calls its decomposition makes (Note [Filters on composite
// operators]). While both lists are empty, an intercepted call reads one flag.

/// The operator lists of one lazy device (Note [Selective interception]).
#[derive(Default)]
pub(crate) struct OperatorFilter {
    lists: RwLock<Lists>,
    /// Whether either list is set: while neither is, an intercepted call reads this flag only.
    any: AtomicBool,
}

#[derive(Default)]
struct Lists {
    /// `enable_ops`' names (`aten::add` for all overloads, or `aten::add.Tensor`), if called.
    allowed: Option<HashSet<String>>,
    /// `disable_ops`' names.
    denied: HashSet<String>,
}

/// Whether `set` names operator `full_name` (`aten::add.Tensor`): itself or all its overloads.
pub(crate) fn names(set: &HashSet<String>, full_name: &str) -> bool {
    let base = full_name.split_once('.').map_or(full_name, |(b, _)| b);
    set.contains(full_name) || set.contains(base)
}

impl OperatorFilter {
    /// Whether neither list is set (one relaxed load).
    #[inline]
    pub fn is_empty(&self) -> bool {
        !self.any.load(Ordering::Relaxed)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Lists> {
        self.lists.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a call of operator `full_name` on `backend`'s device goes down the default path
    /// rather than being captured, inside the composite calls running on this thread.
    pub fn diverts(&self, backend: &LazyBackend, full_name: &str) -> bool {
        if self.is_empty() {
            return false;
        }
        let lists = self.read();
        if names(&lists.denied, full_name) || composite_scope::inside(backend, Verdict::Disabled) {
            return true;
        }
        match &lists.allowed {
            None => false,
            Some(allowed) => {
                !(names(allowed, full_name) || composite_scope::inside(backend, Verdict::Enabled))
            }
        }
    }

    /// What the lists say about composite operator `full_name`: disabled, enabled (on the
    /// allow-list) or nothing.
    pub fn verdict(&self, full_name: &str) -> Option<Verdict> {
        if self.is_empty() {
            return None;
        }
        let lists = self.read();
        if names(&lists.denied, full_name) {
            Some(Verdict::Disabled)
        } else if lists.allowed.as_ref().is_some_and(|a| names(a, full_name)) {
            Some(Verdict::Enabled)
        } else {
            None
        }
    }

    /// Adds `names` to the allow-list (`allow`) or the deny-list of a device of type
    /// `device_type`; an unknown name changes nothing, and so does an empty list (it does not
    /// make an empty allow-list).
    pub fn add(
        &self,
        device_type: DeviceType,
        names: &[&str],
        allow: bool,
    ) -> Result<(), DispatchError> {
        if names.is_empty() {
            return Ok(());
        }
        let what = if allow { "enable_ops" } else { "disable_ops" };
        let mut normalized = Vec::with_capacity(names.len());
        for name in names {
            let (n, ops) = resolve(what, name)?;
            for op in &ops {
                composite_scope::make_effective(what, op, device_type)?;
            }
            normalized.push(n);
        }
        let mut lists = self.lists.write().unwrap_or_else(|e| e.into_inner());
        if allow {
            lists
                .allowed
                .get_or_insert_with(HashSet::new)
                .extend(normalized);
        } else {
            lists.denied.extend(normalized);
        }
        self.any.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Empties both lists.
    pub fn clear(&self) {
        let mut lists = self.lists.write().unwrap_or_else(|e| e.into_inner());
        *lists = Lists::default();
        self.any.store(false, Ordering::Relaxed);
    }

    /// The deny-list, sorted.
    pub fn denied(&self) -> Vec<String> {
        sorted(self.read().denied.iter())
    }

    /// The allow-list, sorted, if there is one.
    pub fn allowed(&self) -> Option<Vec<String>> {
        self.read().allowed.as_ref().map(|a| sorted(a.iter()))
    }
}

fn sorted<'a>(names: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut v: Vec<String> = names.cloned().collect();
    v.sort();
    v
}

/// `aten::add` / `add` / `aten::add.Tensor` / `add.Tensor` / `add.default`, checked against the
/// dispatcher's operators: the name as the lists store it (`aten::add`, `aten::add.Tensor`)
/// and the operators it names. `what` names the caller in the error.
pub(crate) fn resolve(
    what: &str,
    name: &str,
) -> Result<(String, Vec<OperatorHandle>), DispatchError> {
    let unknown = |why: &str| -> DispatchError {
        TensorError::invalid(format!("{what}: unknown operator '{name}'{why}")).into()
    };
    let trimmed = name.trim();
    if trimmed.is_empty() || trimmed != name {
        return Err(unknown(
            " (expected an operator name such as 'mm', 'aten::mm' or 'aten::add.Tensor')",
        ));
    }
    let qualified = if name.contains("::") {
        name.to_string()
    } else {
        format!("aten::{name}")
    };
    let (base, overload) = match qualified.split_once('.') {
        Some((b, o)) => (b.to_string(), Some(o)),
        None => (qualified.clone(), None),
    };
    let d = Dispatcher::global();
    let matched: Vec<OperatorHandle> = d
        .list_operators()
        .iter()
        .filter(|o: &&OperatorName| {
            o.name() == base
                && match overload {
                    None => true,
                    Some("default") => o.overload_name().is_empty(),
                    Some(ov) => o.overload_name() == ov,
                }
        })
        .filter_map(|o| d.find_op(o))
        .filter(|op| op.schema().is_some())
        .collect();
    if matched.is_empty() {
        return Err(unknown(""));
    }
    let stored = match overload {
        Some("default") | None => base,
        Some(_) => qualified,
    };
    Ok((stored, matched))
}

/// Makes interception an allow-list on the default lazy device: only these operators (and the
/// ones they are added to by later calls) are captured; every other call goes down the default
/// path, run eagerly (Note [Selective interception]). [`disable_ops`] wins over it;
/// [`enable_all_ops`] clears both lists. Composite operators (`linear`, `matmul`, `conv2d`)
/// apply to the calls their decomposition makes.
///
/// ```
/// # use switchboard_lazy as lazy;
/// let d = lazy::backend("lazy:9".parse().unwrap()).unwrap();
/// d.enable_ops(&["matmul", "conv2d", "linear"]).unwrap(); // only these are intercepted
/// d.disable_ops(&["add", "mul"]).unwrap();                  // these take the default path
/// assert_eq!(d.enabled_ops().unwrap(), ["aten::conv2d", "aten::linear", "aten::matmul"]);
/// assert_eq!(d.disabled_ops(), ["aten::add", "aten::mul"]);
/// let err = d.enable_ops(&["no_such_op"]).unwrap_err();
/// assert!(err.to_string().contains("unknown operator 'no_such_op'"));
/// d.enable_all_ops();                                       // everything again
/// assert!(d.enabled_ops().is_none() && d.disabled_ops().is_empty());
/// ```
pub fn enable_ops(names: &[&str]) -> Result<(), DispatchError> {
    default_backend().enable_ops(names)
}

/// Sends the calls of these operators down the default path on the default lazy device: they
/// run eagerly on CPU on their materialised inputs and their results are wrapped as lazy
/// tensors (Note [Selective interception]). Wins over [`enable_ops`].
///
/// ```
/// # use switchboard_lazy as lazy;
/// lazy::disable_ops(&["aten::mm", "relu"]).unwrap();
/// assert_eq!(lazy::disabled_ops(), ["aten::mm", "aten::relu"]);
/// lazy::enable_all_ops();
/// assert!(lazy::disabled_ops().is_empty());
/// assert!(lazy::disable_ops(&["no_such_op"]).is_err());
/// ```
pub fn disable_ops(names: &[&str]) -> Result<(), DispatchError> {
    default_backend().disable_ops(names)
}

/// Empties both lists of the default lazy device: every operator is intercepted again.
pub fn enable_all_ops() {
    default_backend().enable_all_ops()
}

/// The operators [`disable_ops`] sent down the default path on the default lazy device, sorted.
pub fn disabled_ops() -> Vec<String> {
    default_backend().disabled_ops()
}

/// The default lazy device's allow-list, sorted (`None`: every operator is intercepted).
pub fn enabled_ops() -> Option<Vec<String>> {
    default_backend().enabled_ops()
}

impl LazyBackend {
    /// Makes interception an allow-list on this device (see [`enable_ops`](crate::enable_ops)).
    pub fn enable_ops(&self, names: &[&str]) -> Result<(), DispatchError> {
        self.filter.add(self.device().ty, names, true)
    }

    /// Sends these operators down the default path on this device (see
    /// [`disable_ops`](crate::disable_ops)).
    pub fn disable_ops(&self, names: &[&str]) -> Result<(), DispatchError> {
        self.filter.add(self.device().ty, names, false)
    }

    /// Empties both lists: every operator is intercepted again.
    pub fn enable_all_ops(&self) {
        self.filter.clear()
    }

    /// The operators sent down the default path on this device, sorted.
    pub fn disabled_ops(&self) -> Vec<String> {
        self.filter.denied()
    }

    /// This device's allow-list, sorted (`None`: every operator is intercepted).
    pub fn enabled_ops(&self) -> Option<Vec<String>> {
        self.filter.allowed()
    }
}

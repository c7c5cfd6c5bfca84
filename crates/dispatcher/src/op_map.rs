//! `OpMap`: the registry's operators, found by name.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use switchboard_schema::OperatorName;

use crate::operator::OperatorEntry;

// Note [Operators keyed by their own name]
// Every operator entry already holds its name, so the registry keys its set by the entry
// itself (`Borrow<OperatorName>` through the entry) instead of a map from a second copy of the
// name: one pointer per bucket instead of a 48-byte key, a pointer and the key's strings. This
// is part of keeping a registered operator under 2 KB of heap (see tests/heap.rs).
// The names are hashed with foldhash rather than SipHash: every def and impl looks its operator
// up (once; undo needs no lookup, the entry knows whether it left the registry), and SipHash of a
// qualified name costs ~250 instructions to foldhash's few dozen.
// Operator names come from code, not from an adversary, so DoS resistance buys nothing here.

/// An entry, hashed and compared by its name.
struct ByName(Arc<OperatorEntry>);

impl Borrow<OperatorName> for ByName {
    fn borrow(&self) -> &OperatorName {
        self.0.name()
    }
}

impl Hash for ByName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Must hash exactly as `OperatorName` does (the `Borrow` contract).
        self.0.name().hash(state)
    }
}

impl PartialEq for ByName {
    fn eq(&self, other: &Self) -> bool {
        self.0.name() == other.0.name()
    }
}

impl Eq for ByName {}

/// The registry's operators by name (see Note [Operators keyed by their own name]).
#[derive(Default)]
pub(crate) struct OpMap(HashSet<ByName, foldhash::fast::FixedState>);

impl OpMap {
    pub fn get(&self, name: &OperatorName) -> Option<&Arc<OperatorEntry>> {
        self.0.get(name).map(|b| &b.0)
    }

    /// Adds `entry` under its name, replacing an entry of the same name.
    pub fn insert(&mut self, entry: Arc<OperatorEntry>) {
        self.0.replace(ByName(entry));
    }

    pub fn remove(&mut self, name: &OperatorName) {
        self.0.remove(name);
    }

    pub fn values(&self) -> impl Iterator<Item = &Arc<OperatorEntry>> {
        self.0.iter().map(|b| &b.0)
    }
}

//! Alias annotations: `Tensor(a)`, `Tensor(a!)`, `Tensor(a -> *)`,
//! `Tensor(a|b)`, `Tensor(*)`.

use std::fmt;

/// Aliasing information of an argument or return (PyTorch's `AliasInfo`).
///
/// The *before* sets hold the alias sets the value is in when the operator
/// is called, the *after* sets those it is in afterwards, `is_write`
/// records `!`.  For a list (`Tensor(a)[]`) the annotation of the elements
/// is in `contained_types()[0]` and the list's own sets may be empty.
///
/// Note [Alias set order]
/// PyTorch keeps the sets in an `unordered_set`, so `Tensor(a|b)` may print
/// as `Tensor(b|a)` depending on its hash.  We keep the sets in the order
/// written (duplicates dropped) and print them that way; equality compares
/// them as sets.
///
/// Note [Compact alias sets]
/// Set names are identifiers, `*` or `$n`, so a set list is stored as one
/// `|`-joined string, and the after sets are not stored at all while they
/// mirror the before sets (the usual `Tensor(a!)`): one allocation instead
/// of four for the most common annotation.
#[derive(Clone, Debug, Default, Eq)]
pub struct AliasInfo {
    before: String,
    /// `None`: the after sets are the before sets.
    after: Option<String>,
    is_write: bool,
    contained_types: Vec<AliasInfo>,
}

/// The set name of the wildcard `*`.
pub const WILDCARD: &str = "*";

fn names(joined: &str) -> impl Iterator<Item = &str> + Clone {
    joined.split('|').filter(|s| !s.is_empty())
}

fn insert(set: &mut String, name: &str) {
    if !names(set).any(|s| s == name) {
        if !set.is_empty() {
            set.push('|');
        }
        set.push_str(name);
    }
}

fn same_sets(a: &str, b: &str) -> bool {
    names(a).count() == names(b).count() && names(a).all(|x| names(b).any(|y| x == y))
}

impl AliasInfo {
    /// An annotation with no sets, not written.  Its after sets mirror its
    /// before sets until an after set is added.
    pub fn new() -> Self {
        AliasInfo::default()
    }

    /// `Tensor(a)` / `Tensor(a!)` style annotation: one set, before and after.
    pub fn with_set(name: &str, is_write: bool) -> Self {
        let mut info = AliasInfo::new();
        info.add_before_set(name);
        info.set_is_write(is_write);
        info
    }

    /// Adds a set the value is in before the call (ignored if present).
    pub fn add_before_set(&mut self, name: &str) {
        insert(&mut self.before, name);
    }

    /// Adds a set the value is in after the call (ignored if present).  The
    /// first call stops the after sets from mirroring the before sets.
    pub fn add_after_set(&mut self, name: &str) {
        insert(self.after.get_or_insert_with(String::new), name);
    }

    /// Declares the after sets independently of the before sets, leaving
    /// them empty until [`AliasInfo::add_after_set`] is called.
    pub fn clear_after_sets(&mut self) {
        self.after = Some(String::new());
    }

    /// Marks the value as written (`!`).
    pub fn set_is_write(&mut self, is_write: bool) {
        self.is_write = is_write;
    }

    /// Adds the annotation of a contained type (list element).
    pub fn add_contained_type(&mut self, info: AliasInfo) {
        self.contained_types.push(info);
    }

    /// Sets before the call, in the order written.
    pub fn before_set(&self) -> impl Iterator<Item = &str> + Clone {
        names(&self.before)
    }

    /// Sets after the call, in the order written.
    pub fn after_set(&self) -> impl Iterator<Item = &str> + Clone {
        names(self.after_joined())
    }

    fn after_joined(&self) -> &str {
        self.after.as_deref().unwrap_or(&self.before)
    }

    /// Whether there is no set before the call.
    pub fn before_set_is_empty(&self) -> bool {
        self.before.is_empty()
    }

    /// Whether the value is written to (`!`).
    pub fn is_write(&self) -> bool {
        self.is_write
    }

    /// Annotations of contained types (for lists: the elements).
    pub fn contained_types(&self) -> &[AliasInfo] {
        &self.contained_types
    }

    /// Whether the value may alias anything before the call (`*`).
    pub fn is_wildcard_before(&self) -> bool {
        self.before_set().any(|s| s == WILDCARD)
    }

    /// Whether the value may alias anything after the call (`... -> *`).
    pub fn is_wildcard_after(&self) -> bool {
        self.after_set().any(|s| s == WILDCARD)
    }
}

impl PartialEq for AliasInfo {
    fn eq(&self, other: &Self) -> bool {
        self.is_write == other.is_write
            && same_sets(&self.before, &other.before)
            && same_sets(self.after_joined(), other.after_joined())
            && self.contained_types == other.contained_types
    }
}

impl fmt::Display for AliasInfo {
    /// `(a|b! -> c)`, as PyTorch prints an `AliasInfo`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        f.write_str(&self.before)?;
        if self.is_write {
            f.write_str("!")?;
        }
        if !same_sets(&self.before, self.after_joined()) {
            f.write_str(" -> ")?;
            f.write_str(self.after_joined())?;
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printing() {
        assert_eq!(AliasInfo::with_set("a", true).to_string(), "(a!)");
        let mut x = AliasInfo::new();
        x.add_before_set("b");
        x.add_before_set("a");
        x.add_before_set("b");
        x.add_after_set("*");
        assert_eq!(x.to_string(), "(b|a -> *)");
        assert_eq!(x.before_set().collect::<Vec<_>>(), ["b", "a"]);
        assert_eq!(AliasInfo::new().to_string(), "()");
        let mut fresh = AliasInfo::with_set("$0", true);
        fresh.clear_after_sets();
        assert_eq!(fresh.to_string(), "($0! -> )");
    }

    #[test]
    fn set_equality_ignores_order() {
        let mut x = AliasInfo::new();
        x.add_before_set("a");
        x.add_before_set("b");
        let mut y = AliasInfo::new();
        y.add_before_set("b");
        y.add_before_set("a");
        assert_eq!(x, y);
        assert_eq!(y.after_set().collect::<Vec<_>>(), ["b", "a"]);
    }
}

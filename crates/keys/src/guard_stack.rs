//! [`GuardStack`]: the values a thread-local setting's live guards saved, so that guards
//! dropped in any order leave the setting as it was before the first.

use std::cell::{Cell, RefCell};

// Note [Guards dropped out of order]
// A guard that sets a thread-local value and puts back "the value before me" when dropped is
// right only when guards drop in the reverse order of their creation. Within one scope Rust
// drops them so, but a guard can be dropped early (`drop(guard)`), moved into a struct or
// returned to a caller. With an outer guard A and an inner guard B, dropping A first puts
// back the value from before A, then dropping B puts back the value from before B, which is
// A's: the setting stays as A set it for good (grad mode left off, autocast left on).
//
// A `GuardStack` keeps each live guard's saved value in creation order. Dropping the
// innermost live guard restores its saved value, as before. Dropping any other guard changes
// nothing now (a guard inside it is still in force and set the current value) and hands its
// saved value to the guard just inside it, which restores it in turn. So, in whatever order
// guards drop, the value while some live is the innermost live guard's, and once all are
// gone it is the value from before the first (direct sets, as `set_grad_enabled`, last until
// the next guard drop, as in PyTorch). The stack is thread-local like the setting it guards:
// guards are not `Send`, so a guard is always dropped on the thread whose stack holds it.

/// Which frame of a [`GuardStack`] a guard owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuardFrame(u64);

/// The saved values of the live guards of one thread-local setting, innermost last (Note
/// [Guards dropped out of order]). Meant for a `thread_local!` next to the setting.
///
/// ```
/// use std::cell::Cell;
/// use switchboard_keys::GuardStack;
///
/// thread_local! {
///     static FLAG: Cell<bool> = const { Cell::new(false) };
///     static FLAG_GUARDS: GuardStack<bool> = const { GuardStack::new() };
/// }
/// fn set(on: bool) -> switchboard_keys::GuardFrame {
///     FLAG_GUARDS.with(|g| g.push(FLAG.with(|f| f.replace(on))))
/// }
/// fn unset(frame: switchboard_keys::GuardFrame) {
///     if let Some(saved) = FLAG_GUARDS.with(|g| g.pop(frame)) {
///         FLAG.with(|f| f.set(saved));
///     }
/// }
/// let outer = set(true);
/// let inner = set(false);
/// unset(outer); // out of order: the inner guard is still in force
/// assert!(!FLAG.with(Cell::get));
/// unset(inner); // the value from before the outer guard
/// assert!(!FLAG.with(Cell::get));
/// ```
pub struct GuardStack<T> {
    frames: RefCell<Vec<(GuardFrame, T)>>,
    next: Cell<u64>,
}

impl<T> GuardStack<T> {
    /// An empty stack.
    pub const fn new() -> Self {
        GuardStack {
            frames: RefCell::new(Vec::new()),
            next: Cell::new(0),
        }
    }

    /// Records a new innermost guard that replaced `saved`; the guard keeps the frame to
    /// [`pop`](Self::pop) when it drops.
    pub fn push(&self, saved: T) -> GuardFrame {
        let frame = GuardFrame(self.next.get());
        self.next.set(frame.0.wrapping_add(1));
        self.frames.borrow_mut().push((frame, saved));
        frame
    }

    /// Removes `frame` and returns the value to restore now: its saved value when it was the
    /// innermost guard, `None` when a guard inside it still lives (that guard inherits the
    /// saved value) or when the frame is unknown.
    pub fn pop(&self, frame: GuardFrame) -> Option<T> {
        let mut frames = self.frames.borrow_mut();
        let at = frames.iter().rposition(|(f, _)| *f == frame)?;
        let (_, saved) = frames.remove(at);
        match frames.get_mut(at) {
            // The guard just inside restores the value from before this one.
            Some((_, inner)) => {
                *inner = saved;
                None
            }
            None => Some(saved),
        }
    }

    /// How many guards are live.
    pub fn len(&self) -> usize {
        self.frames.borrow().len()
    }

    /// Whether no guard is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Default for GuardStack<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_drop_order_restores_the_first_value() {
        // Three guards setting 1, 2, 3 over 0, dropped in each of the six orders.
        let orders = [
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ];
        for order in orders {
            let stack = GuardStack::new();
            let mut value = 0;
            let frames: Vec<GuardFrame> = (1..=3)
                .map(|v| {
                    let f = stack.push(value);
                    value = v;
                    f
                })
                .collect();
            let mut live = [true; 3];
            for i in order {
                if let Some(saved) = stack.pop(frames[i]) {
                    value = saved;
                }
                live[i] = false;
                // The innermost live guard's value, else the first one.
                let expected = live.iter().rposition(|l| *l).map_or(0, |j| j as i32 + 1);
                assert_eq!(value, expected, "order {order:?}, after dropping {i}");
            }
            assert!(stack.is_empty());
        }
    }

    #[test]
    fn an_unknown_frame_changes_nothing() {
        let stack = GuardStack::new();
        let f = stack.push(1);
        assert_eq!(stack.pop(f), Some(1));
        assert_eq!(stack.pop(f), None);
    }
}

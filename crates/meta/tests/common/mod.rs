//! What the structured-family tests share.

use switchboard_dispatcher::Dispatcher;

/// Asserts that the Meta kernel of each operator (`aten::gather.out`) is its meta function's
/// glue (`switchboard_ops::structured::...`), not a CPU kernel run without data.
pub fn assert_meta_kernels_are_meta_functions<S: AsRef<str>>(names: impl IntoIterator<Item = S>) {
    let d = Dispatcher::global();
    for name in names {
        let name = name.as_ref();
        let state = d.dump_state(name);
        let meta = state
            .lines()
            .find(|l| l.starts_with("Meta"))
            .unwrap_or_default();
        assert!(
            meta.contains("switchboard_ops::structured::"),
            "{name}: {state}"
        );
    }
}

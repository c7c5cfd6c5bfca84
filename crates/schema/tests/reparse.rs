//! Canonical prints reparse exactly when PyTorch's do, to what PyTorch's do, and fail with
//! PyTorch's error otherwise (Note [Prints PyTorch cannot reparse] in `no_panic.rs`). Each case
//! is an input PyTorch accepts, its canonical print, and the outcome of parsing that print in
//! PyTorch 2.15, worked out from its parser (`function_schema_parser.cpp`,
//! `schema_type_parser.cpp`): the reprint, or the first line of the error.

use switchboard_schema::{register_custom_class, FunctionSchema};

enum Reparse {
    /// The reparse prints this.
    Prints(&'static str),
    /// The reparse fails with this first line.
    Fails(&'static str),
}
use Reparse::{Fails, Prints};

const CASES: &[(&str, &str, Reparse)] = &[
    // Enum-like defaults: names and integers print as integers, which reparse.
    (
        "aten::sym_is_contiguous(Tensor self, MemoryFormat memory_format=contiguous_format) -> SymBool",
        "aten::sym_is_contiguous(Tensor self, MemoryFormat memory_format=0) -> SymBool",
        Prints("aten::sym_is_contiguous(Tensor self, MemoryFormat memory_format=0) -> SymBool"),
    ),
    (
        "foo(ScalarType s=int, ScalarType? t=bfloat16, Layout l=strided) -> ()",
        "foo(ScalarType s=3, ScalarType? t=15, Layout l=0) -> ()",
        Prints("foo(ScalarType s=3, ScalarType? t=15, Layout l=0) -> ()"),
    ),
    (
        "foo(ScalarType[] u=[half, cdouble], ScalarType[2] v=[int, int]) -> ()",
        "foo(ScalarType[] u=[5, 10], ScalarType[2] v=[3, 3]) -> ()",
        Prints("foo(ScalarType[] u=[5, 10], ScalarType[2] v=[3, 3]) -> ()"),
    ),
    // A string default of a non-string type prints unquoted: a dtype name then reads back as
    // the dtype for a ScalarType, `long` as 4 for any type, a number as the number.
    (
        "foo(ScalarType s=\"int\") -> ()",
        "foo(ScalarType s=int) -> ()",
        Prints("foo(ScalarType s=3) -> ()"),
    ),
    (
        "foo(ScalarType? s=\"float64\") -> ()",
        "foo(ScalarType? s=float64) -> ()",
        Prints("foo(ScalarType? s=7) -> ()"),
    ),
    (
        "foo(float x=\"long\", int y=\"5\") -> ()",
        "foo(float x=long, int y=5) -> ()",
        Prints("foo(float x=4, int y=5) -> ()"),
    ),
    (
        "foo(ScalarType? s=\"foo\") -> ()",
        "foo(ScalarType? s=foo) -> ()",
        Fails("invalid numeric default value:"),
    ),
    (
        "foo(MemoryFormat m=\"channels_last\") -> ()",
        "foo(MemoryFormat m=channels_last) -> ()",
        Fails("invalid numeric default value:"),
    ),
    // Dtype names are ScalarType's only.
    (
        "foo(Scalar x=\"int\") -> ()",
        "foo(Scalar x=int) -> ()",
        Fails("invalid numeric default value:"),
    ),
    // Devices print unquoted.
    (
        "foo(Device d=\"cuda:1\") -> ()",
        "foo(Device d=cuda:1) -> ()",
        Fails("expected string_literal but found 'ident' here:"),
    ),
    (
        "foo(Device? d=\"cpu\") -> ()",
        "foo(Device? d=cpu) -> ()",
        Fails("invalid numeric default value:"),
    ),
    // Complex numbers, fresh alias sets, shortened int lists, wrapped sizes.
    (
        "foo(complex c=1.5) -> ()",
        "foo(complex c=0.+1.j) -> ()",
        Fails("expected ) but found '+' here:"),
    ),
    (
        "foo(Tensor! x) -> ()",
        "foo(Tensor($0! -> ) x) -> ()",
        Fails("expected a valid token but found '$' here:"),
    ),
    (
        "foo(int[] x=[1, 1]) -> ()",
        "foo(int[] x=1) -> ()",
        Fails("expected [ but found 'number' here:"),
    ),
    (
        "foo(int[4294967295] x) -> ()",
        "foo(int[-1] x) -> ()",
        Fails("expected number but found '-' here:"),
    ),
    (
        "foo(Tensor(a)[][] x) -> ()",
        "foo(Tensor[]()[] x) -> ()",
        Fails("expected ident but found ')' here:"),
    ),
    // Registered custom classes print their qualified name, which reparses.
    (
        "foo(__torch__.torch.classes.quantized.EmbeddingPackedParamsBase p) -> __torch__.torch.classes.xnnpack.LinearOpContext",
        "foo(__torch__.torch.classes.quantized.EmbeddingPackedParamsBase p) -> __torch__.torch.classes.xnnpack.LinearOpContext",
        Prints("foo(__torch__.torch.classes.quantized.EmbeddingPackedParamsBase p) -> __torch__.torch.classes.xnnpack.LinearOpContext"),
    ),
];

#[test]
fn prints_reparse_as_pytorchs_do() {
    for (input, printed, reparse) in CASES {
        let schema =
            FunctionSchema::parse(input).unwrap_or_else(|e| panic!("{input:?} must parse: {e}"));
        assert_eq!(schema.to_string(), *printed, "print of {input:?}");
        match (FunctionSchema::parse(printed), reparse) {
            (Ok(again), Prints(want)) => assert_eq!(again.to_string(), *want, "{printed:?}"),
            (Err(e), Fails(want)) => assert_eq!(e.first_line(), *want, "{printed:?}"),
            (Ok(again), Fails(want)) => {
                panic!("{printed:?} reparsed as {again}, PyTorch fails with {want:?}")
            }
            (Err(e), Prints(want)) => {
                panic!("{printed:?} failed to reparse ({e}), PyTorch prints {want:?}")
            }
        }
    }
}

#[test]
fn unregistered_custom_classes_are_rejected_until_registered() {
    let input = "my_ns::make() -> __torch__.torch.classes.my_ns.Cache";
    let err = FunctionSchema::parse(input).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Unknown custom class type my_ns.Cache. Please ensure it is registered.:\n\
         my_ns::make() -> __torch__.torch.classes.my_ns.Cache\n\
         \x20                                              ~~~~~ <--- HERE\n"
    );
    // The namespace words are checked before the registry.
    let err = FunctionSchema::parse("f(__torch__.torch.klasses.a.B x) -> ()").unwrap_err();
    assert_eq!(
        err.first_line(),
        "Expected classes namespace but got klasses:"
    );
    register_custom_class("my_ns", "Cache").unwrap();
    let schema = FunctionSchema::parse(input).unwrap();
    assert_eq!(schema.to_string(), input);
    assert_eq!(FunctionSchema::parse(&schema.to_string()).unwrap(), schema);
    // Another class of the namespace is still unknown.
    assert!(FunctionSchema::parse("f(__torch__.torch.classes.my_ns.Other x) -> ()").is_err());
}

#[test]
fn names_a_type_does_not_take_are_errors() {
    for (input, first_line) in [
        // A list default cannot be a name: PyTorch expects `None` there.
        (
            "foo(ScalarType[2] s=int) -> ()",
            "expected None but found 'ident' here:",
        ),
        // Dtype names are for ScalarType arguments only.
        ("foo(int x=int) -> ()", "invalid numeric default value:"),
        (
            "foo(Layout l=float32) -> ()",
            "invalid numeric default value:",
        ),
        (
            "foo(ScalarType s=byte) -> ()",
            "invalid numeric default value:",
        ),
        // SymBool takes no default.
        (
            "foo(SymBool b=True) -> ()",
            "unexpected type, file a bug report:",
        ),
    ] {
        let err = FunctionSchema::parse(input).unwrap_err();
        assert_eq!(err.first_line(), first_line, "{input}");
    }
}

#[test]
fn pytorchs_own_custom_class_schemas_parse() {
    for schema in [
        "profiler::_record_function_enter_new(str name, str? args=None) -> __torch__.torch.classes.profiler._RecordFunction",
        "aten::owner(RRef(t) self) -> __torch__.torch.classes.dist_rpc.WorkerInfo",
        "prepacked::conv2d_clamp_run(Tensor X, __torch__.torch.classes.xnnpack.Conv2dOpContext W_prepack) -> Tensor Y",
        "quantized::embedding_bag_byte(__torch__.torch.classes.quantized.EmbeddingPackedParamsBase weight, Tensor indices, Tensor? offsets=None, bool scale_grad_by_freq=False, int mode=0, bool pruned_weights=False, Tensor? per_sample_weights=None, Tensor? compressed_indices_mapping=None, bool include_last_offset=False) -> Tensor",
        "c10d::barrier(Tensor tensor, __torch__.torch.classes.c10d.ProcessGroup process_group, int[] device_ids, int timeout) -> __torch__.torch.classes.c10d.Work",
    ] {
        let parsed = FunctionSchema::parse(schema).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(parsed.to_string(), schema);
    }
}

//! Fuzzing `switchboard call`'s argument reader: arbitrary text for every schema
//! type gives a value or an error; arbitrary `NAME=VALUE` lists, on the test operators and on
//! real aten operators with hostile numbers, end in `Ok` or an error, never in a panic (which
//! `run` would report as [`CallError::Panic`]), an abort or a hang. Bounded to run in seconds.

use proptest::prelude::*;
use switchboard::schema::FunctionSchema;

use super::value::parse_value;
use super::*;

/// A schema with an argument of every type the reader knows, and some it does not.
const TYPES: &str = "f(Tensor a, Tensor? b, Tensor[] c, Tensor?[] d, int e, SymInt f, \
    int[2] g, SymInt[] h, int[1]? i, float j, float[] k, bool l, bool[3] m, Scalar n, \
    Scalar? o, str p, ScalarType q, Layout r, MemoryFormat s, Device t, Generator? u, \
    complex v, Any x, int[][] y) -> ()";

/// Pieces that value texts are made of: numbers at every edge, words, brackets, refs.
const PIECES: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "1.5",
    "-0.0",
    "1e308",
    "1e-320",
    "nan",
    "inf",
    "-inf",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "99999999999999999999999999999",
    "True",
    "false",
    "None",
    "[",
    "]",
    "(",
    ")",
    ",",
    " ",
    "@a",
    "@i",
    "@img",
    "@",
    "@zz",
    "'",
    "\"",
    "float32",
    "int64",
    "bool",
    "cpu",
    "meta",
    "cuda:0",
    "channels_last",
    "strided",
    "x",
    "=",
];

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => prop::collection::vec(prop::sample::select(PIECES), 0..8).prop_map(|v| v.concat()),
        1 => ".{0,24}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_type_reads_or_refuses(texts in prop::collection::vec(text(), 24)) {
        let inputs = Some(load_safetensors_file(aten_inputs()).unwrap());
        let schema = FunctionSchema::parse(TYPES).unwrap();
        for (arg, text) in schema.arguments().iter().zip(&texts) {
            let _ = parse_value(text, arg.ty(), arg.n(), &inputs);
        }
    }

    #[test]
    fn test_operators_never_panic(
        op in prop::sample::select(&["test::add", "test::echo", "test::lists", "test::max.dim",
                                     "test::sum.dim_IntList", "aten::neg", "test::odd"][..]),
        args in prop::collection::vec(
            (prop::sample::select(&["self", "other", "alpha", "pad", "eps", "s", "dtype",
                                    "memory_format", "layout", "device", "mode", "flag",
                                    "weights", "opt", "generator", "tensors", "maybe", "n",
                                    "dim", "keepdim", "c", "zz"][..]), text()),
            0..6),
        backward in any::<bool>(),
    ) {
        let f = fixture();
        let args = CallArgs {
            operator: op.to_owned(),
            input: Some(f.dir.join("in.safetensors")),
            output: None,
            backward,
            args: args.iter().map(|(n, v)| format!("{n}={v}")).collect(),
            ..CallArgs::default()
        };
        let r = run(&f.d, &args, &mut Vec::new(), &mut Vec::new());
        prop_assert!(!matches!(r, Err(CallError::Panic { .. })), "{args:?}: {r:?}");
    }
}

/// Integers for the aten operators: small ones, and ones past every limit (never the sizes in
/// between, which would legitimately ask for terabytes).
const INTS: &[&str] = &[
    "-2",
    "-1",
    "0",
    "1",
    "2",
    "3",
    "9223372036854775807",
    "-9223372036854775808",
    "4611686018427387904",
    "-4611686018427387904",
    "2147483648",
    "[1, 9223372036854775807]",
    "[0, 1]",
    "[2, 2]",
    "[-1]",
    "[]",
    "[4611686018427387904, 2]",
];

/// Real operators, with every argument that takes a number drawn from [`INTS`] or a float edge.
const OPS: &[(&str, &[&str])] = &[
    (
        "max_pool2d",
        &["self=@img", "kernel_size", "stride", "padding", "dilation"],
    ),
    (
        "max_pool2d_with_indices",
        &["self=@img", "kernel_size", "stride", "padding", "dilation"],
    ),
    (
        "conv1d",
        &[
            "input=@x1",
            "weight=@w1",
            "stride",
            "padding",
            "dilation",
            "groups",
        ],
    ),
    (
        "conv2d",
        &[
            "input=@img",
            "weight=@w2",
            "stride",
            "padding",
            "dilation",
            "groups",
        ],
    ),
    (
        "as_strided",
        &["self=@a", "size", "stride", "storage_offset"],
    ),
    ("narrow", &["self=@a", "dim", "start", "length"]),
    ("slice.Tensor", &["self=@a", "dim", "start", "end", "step"]),
    ("select.int", &["self=@a", "dim", "index"]),
    ("view", &["self=@a", "size"]),
    ("expand", &["self=@a", "size"]),
    ("sum.dim_IntList", &["self=@a", "dim"]),
    ("softmax.int", &["self=@a", "dim"]),
    ("clamp", &["self=@a", "min", "max"]),
    ("clamp_min", &["self=@a", "min"]),
    ("add.Scalar", &["self=@a", "other", "alpha"]),
    ("index_select", &["self=@a", "dim", "index=@i"]),
    ("embedding", &["weight=@a", "indices=@i", "padding_idx"]),
    ("arange.start_step", &["start", "end", "step"]),
    ("full", &["size", "fill_value"]),
];

const FLOATS: &[&str] = &["nan", "inf", "-inf", "1e308", "-0.0", "0.5"];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn aten_operators_never_panic(
        op in prop::sample::select(OPS),
        values in prop::collection::vec(
            prop_oneof![3 => prop::sample::select(INTS), 1 => prop::sample::select(FLOATS)],
            6),
        keep in prop::collection::vec(any::<bool>(), 6),
    ) {
        let dir = aten_inputs();
        let (name, params) = op;
        let args: Vec<String> = params
            .iter()
            .zip(values.iter().zip(&keep))
            .filter(|(p, (_, keep))| p.contains('=') || **keep)
            .map(|(p, (v, _))| if p.contains('=') { (*p).to_owned() } else { format!("{p}={v}") })
            .collect();
        let call = CallArgs {
            operator: name.to_owned(),
            input: Some(dir.clone()),
            output: None,
            backward: false,
            args,
            ..CallArgs::default()
        };
        let r = run(Dispatcher::global(), &call, &mut Vec::new(), &mut Vec::new());
        prop_assert!(!matches!(r, Err(CallError::Panic { .. })), "{call:?}: {r:?}");
    }
}

/// The input file of the aten operators, made once.
fn aten_inputs() -> PathBuf {
    static FILE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    FILE.get_or_init(|| {
        let dir =
            std::env::temp_dir().join(format!("switchboard-call-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("aten.safetensors");
        let f = |n: usize, s: &[i64]| {
            Tensor::from_vec((0..n).map(|v| v as f32 - 2.0).collect::<Vec<_>>(), s).unwrap()
        };
        let i = Tensor::from_vec(vec![0i64, 1, 3], &[3]).unwrap();
        save_safetensors_file(
            &path,
            &[
                ("img", &f(16, &[1, 1, 4, 4])),
                ("w2", &f(4, &[1, 1, 2, 2])),
                ("x1", &f(5, &[1, 1, 5])),
                ("w1", &f(2, &[1, 1, 2])),
                ("a", &f(6, &[2, 3])),
                ("i", &i),
            ],
            None,
        )
        .unwrap();
        path
    })
    .clone()
}

//! `switchboard call`'s errors: bad arguments, files, failing kernels, unsavable outputs.

use super::*;

#[test]
fn argument_errors_name_the_argument() {
    let f = fixture();
    let add = ["test::add", "--in", "IN"];
    let e = |extra: &[&str]| f.err(&[&add[..], extra].concat());
    assert_eq!(
        e(&["self=@a"]),
        "missing argument 'other' (Tensor) of test::add(Tensor self, Tensor other, *, Scalar \
         alpha=1) -> Tensor"
    );
    assert!(f
        .err(&["test::add"])
        .starts_with("missing argument 'self' (Tensor), 'other' (Tensor) of"));
    assert_eq!(
        e(&["self=@a", "other=@b", "beta=2"]),
        "test::add has no argument 'beta'; its arguments are: self, other, alpha"
    );
    assert_eq!(
        e(&["self=@a", "self=@b"]),
        "argument 'self' is given more than once"
    );
    assert_eq!(e(&["self"]), "expected NAME=VALUE, got \"self\"");
    assert_eq!(e(&["=3"]), "expected NAME=VALUE, got \"=3\"");
    assert_eq!(
        e(&["self=@a", "other=@b", "alpha=abc"]),
        "argument 'alpha' (Scalar): cannot read \"abc\": expected a number (an int, a float, \
         true or false)"
    );
    assert_eq!(
        e(&["self=a", "other=@b"]),
        "argument 'self' (Tensor): cannot read \"a\": expected a tensor of the input file, \
         written @KEY"
    );
    assert_eq!(
        e(&["self=@a", "other=@zz"]),
        format!(
            "argument 'other': {} holds no tensor 'zz' (it holds: a, b, c, i)",
            f.path("in.safetensors")
        )
    );
    assert_eq!(
        f.err(&["test::add", "self=@a", "other=@b"]),
        "argument 'self' refers to tensor '@a' but no input file was given (--in)"
    );
    let echo = |extra: &str| f.err(&["test::echo", "--in", "IN", "self=@a", extra]);
    assert_eq!(
        echo("pad=[1, x]"),
        "argument 'pad' (int[2]): cannot read \"[1, x]\": expected an int"
    );
    assert_eq!(
        echo("pad=1.5"),
        "argument 'pad' (int[2]): cannot read \"1.5\": expected an int or a list of ints like \
         [1, 2]"
    );
    assert!(echo("dtype=complex32").starts_with(
        "argument 'dtype' (ScalarType?): cannot read \"complex32\": expected a dtype (uint8, int8"
    ));
    assert!(echo("device=gpu").starts_with("argument 'device' (Device?): cannot read \"gpu\""));
    assert!(echo("memory_format=nchw").contains("channels_last"));
    assert_eq!(
        echo("flag=1"),
        "argument 'flag' (bool): cannot read \"1\": expected true or false"
    );
    assert_eq!(
        echo("weights=0.5"),
        "argument 'weights' (float[]): cannot read \"0.5\": expected a list like [a, b] of float"
    );
    assert_eq!(
        echo("generator=g"),
        "argument 'generator' (Generator?): cannot read \"g\": expected a seed (an int) for a \
         fresh CPU generator"
    );
    assert_eq!(
        f.err(&["test::odd", "--in", "IN", "self=@a", "c=1"]),
        "argument 'c' has type complex, which cannot be given on the command line"
    );
    assert_eq!(
        f.err(&["test::odd", "--in", "IN", "self=@a"]),
        "the default of argument 'c' (0.+1.j) is not supported; give a value"
    );
    assert_eq!(
        echo("eps=None"),
        "argument 'eps' (float): cannot read \"None\": expected a float"
    );
}

#[test]
fn int_literals_beyond_int64_overflow() {
    let f = fixture();
    let overflow = "Overflow when unpacking long (an int must fit in int64)";
    // A Scalar literal beyond int64 used to become a float silently.
    let add = |alpha: &str| {
        f.err(&[
            "test::add",
            "--in",
            "IN",
            "self=@a",
            "other=@b",
            &format!("alpha={alpha}"),
        ])
    };
    for big in [
        "9223372036854775808",
        "-9223372036854775809",
        "+99999999999999999999",
    ] {
        assert_eq!(
            add(big),
            format!("argument 'alpha' (Scalar): cannot read \"{big}\": {overflow}")
        );
    }
    let echo = |extra: &str| f.err(&["test::echo", "--in", "IN", "self=@a", extra]);
    assert_eq!(
        echo("pad=9223372036854775808"),
        format!("argument 'pad' (int[2]): cannot read \"9223372036854775808\": {overflow}")
    );
    assert_eq!(
        echo("pad=[1, -9223372036854775809]"),
        format!("argument 'pad' (int[2]): cannot read \"[1, -9223372036854775809]\": {overflow}")
    );
    assert_eq!(
        echo("generator=18446744073709551616"),
        "argument 'generator' (Generator?): cannot read \"18446744073709551616\": Overflow \
         when unpacking long (a seed must fit in uint64)"
    );
    // The extremes of int64 and float literals beyond it still read.
    let ok = |alpha: &str| {
        f.run(&[
            "test::add",
            "--in",
            "IN",
            "self=@a",
            "other=@b",
            &format!("alpha={alpha}"),
        ])
    };
    for fine in [
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808.0",
        "1e19",
    ] {
        assert!(ok(fine).is_ok(), "{fine}");
    }
}

#[test]
fn file_errors() {
    let f = fixture();
    let missing = f.path("missing.safetensors");
    let e = f.err(&["test::add", "--in", &missing, "self=@a", "other=@b"]);
    assert!(
        e.starts_with(&format!("input file {missing}: cannot open")),
        "{e}"
    );
    let garbage = f.dir.join("garbage.safetensors");
    std::fs::write(&garbage, b"not a safetensors file").unwrap();
    let garbage = garbage.display().to_string();
    let e = f.err(&["test::add", "--in", &garbage, "self=@a", "other=@b"]);
    assert!(e.starts_with(&format!("input file {garbage}: ")), "{e}");
    let nowhere = f.path("no/such/dir/out.safetensors");
    let e = f.err(&[
        "test::add",
        "--in",
        "IN",
        "--out",
        &nowhere,
        "self=@a",
        "other=@b",
    ]);
    assert!(
        e.starts_with(&format!("output file {nowhere}: cannot write")),
        "{e}"
    );
}

#[test]
fn kernel_errors_and_panics_are_errors() {
    let f = fixture();
    let e = f.err(&["test::add", "--in", "IN", "self=@a", "other=@c"]);
    assert!(e.starts_with("test::add: "), "{e}");
    assert!(e.contains("must match the size"), "{e}");
    let e = f.err(&["test::no_kernel", "--in", "IN", "self=@a"]);
    assert!(
        e.starts_with("test::no_kernel: Could not run 'test::no_kernel' with arguments from the 'CPU' backend"),
        "{e}"
    );
    let e = f.err(&["test::boom", "--in", "IN", "self=@a"]);
    assert!(e.starts_with("test::boom panicked: kernel bug"), "{e}");
}

#[test]
fn meta_tensors_print_but_cannot_be_saved() {
    let f = fixture();
    let m = Tensor::zeros_on(&[2, 3], ScalarType::Float, Device::META).unwrap();
    let mut printed = Vec::new();
    write_outputs(
        "x",
        vec![IValue::Tensor(m.clone())],
        Vec::new(),
        None,
        &mut printed,
        &mut Vec::new(),
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(printed).unwrap(),
        "out0 = tensor(..., device='meta', size=(2, 3))\n"
    );
    let path = f.dir.join("meta.safetensors");
    let e = write_outputs(
        "x",
        vec![IValue::Tensor(m)],
        Vec::new(),
        Some(&path),
        &mut Vec::new(),
        &mut Vec::new(),
    );
    let e = e.unwrap_err().to_string();
    assert!(e.starts_with("output file "), "{e}");
    assert!(!e.contains('\n'));
}

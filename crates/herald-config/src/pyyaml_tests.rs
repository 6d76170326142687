//! The resolution table, as PyYAML 6.0's `yaml.safe_load("k: <text>")` answers it.

use super::*;
use Want::*;

/// A value in the table (a `NodeValue` without owned strings).
#[derive(Debug, Clone, Copy)]
enum Want {
    Bool(bool),
    Null,
    Int(i128),
    Float(f64),
    Str(&'static str),
}

impl Want {
    fn node(self) -> NodeValue {
        match self {
            Bool(b) => NodeValue::Bool(b),
            Null => NodeValue::Null,
            Int(i) => NodeValue::Int(i),
            Float(f) => NodeValue::Float(f),
            Str(s) => NodeValue::Str(s.to_owned()),
        }
    }
}

/// (plain scalar as written, PyYAML's value). Made with PyYAML 6.0.3; the test below
/// checks the table against PyYAML itself where python3 has the `yaml` module.
const TABLE: &[(&str, Want)] = &[
    ("y", Str("y")),
    ("Y", Str("Y")),
    ("n", Str("n")),
    ("N", Str("N")),
    ("yes", Bool(true)),
    ("Yes", Bool(true)),
    ("YES", Bool(true)),
    ("no", Bool(false)),
    ("No", Bool(false)),
    ("NO", Bool(false)),
    ("on", Bool(true)),
    ("On", Bool(true)),
    ("ON", Bool(true)),
    ("off", Bool(false)),
    ("Off", Bool(false)),
    ("OFF", Bool(false)),
    ("true", Bool(true)),
    ("True", Bool(true)),
    ("TRUE", Bool(true)),
    ("false", Bool(false)),
    ("False", Bool(false)),
    ("FALSE", Bool(false)),
    ("tRue", Str("tRue")),
    ("yEs", Str("yEs")),
    ("~", Null),
    ("null", Null),
    ("Null", Null),
    ("NULL", Null),
    ("nUll", Str("nUll")),
    ("0", Int(0)),
    ("12", Int(12)),
    ("-12", Int(-12)),
    ("+12", Int(12)),
    ("012", Int(10)),
    ("08", Str("08")),
    ("0o17", Str("0o17")),
    ("0x1F", Int(31)),
    ("0X1F", Str("0X1F")),
    ("-0x1F", Int(-31)),
    ("0b101", Int(5)),
    ("+0b101", Int(5)),
    ("1_000", Int(1000)),
    ("1_0_0", Int(100)),
    ("1:30", Int(90)),
    ("-1:30", Int(-90)),
    ("190:20:30", Int(685230)),
    ("1:60", Str("1:60")),
    ("1.5", Float(1.5)),
    ("1.", Float(1.0)),
    ("-1.", Float(-1.0)),
    ("+1.5", Float(1.5)),
    (".5", Float(0.5)),
    ("-.5", Str("-.5")),
    ("+.5", Str("+.5")),
    ("1e5", Str("1e5")),
    ("1E5", Str("1E5")),
    ("1.0e5", Str("1.0e5")),
    ("1.0e+5", Float(100000.0)),
    ("1.0E-5", Float(1e-05)),
    ("1.e+5", Float(100000.0)),
    ("1_0.5", Float(10.5)),
    (".inf", Float(f64::INFINITY)),
    ("-.inf", Float(f64::NEG_INFINITY)),
    ("+.inf", Float(f64::INFINITY)),
    (".Inf", Float(f64::INFINITY)),
    (".INF", Float(f64::INFINITY)),
    (".nan", Float(f64::NAN)),
    (".NaN", Float(f64::NAN)),
    (".NAN", Float(f64::NAN)),
    ("-.nan", Str("-.nan")),
    ("inf", Str("inf")),
    ("nan", Str("nan")),
    ("1:30.5", Float(90.5)),
    ("0.0", Float(0.0)),
    ("00", Int(0)),
    ("-0", Int(0)),
    ("1__2", Int(12)),
    ("0_", Int(0)),
    ("_1", Str("_1")),
    ("0x_1", Int(1)),
    ("12abc", Str("12abc")),
    ("3.2.1", Str("3.2.1")),
    ("merge_request", Str("merge_request")),
    ("-100123456789", Int(-100123456789)),
];

fn same(a: &NodeValue, b: &NodeValue) -> bool {
    match (a, b) {
        (NodeValue::Float(x), NodeValue::Float(y)) => x == y || (x.is_nan() && y.is_nan()),
        _ => a == b,
    }
}

#[test]
fn plain_scalars_resolve_as_pyyaml_resolves_them() {
    for (text, want) in TABLE {
        let got = resolve_plain(text);
        let want = want.node();
        assert!(
            same(&got, &want),
            "{text:?}: herald {got:?}, PyYAML {want:?}"
        );
    }
}

/// The table is PyYAML's own answer (skipped where python3 has no `yaml` module; CI
/// installs it).
#[test]
fn the_table_is_what_pyyaml_says() {
    let script = "import sys, yaml, json, math\n\
        for line in sys.stdin.read().splitlines():\n\
        \x20   v = yaml.safe_load('k: ' + line)['k']\n\
        \x20   t = type(v).__name__\n\
        \x20   v = repr(v) if t == 'float' else v\n\
        \x20   print(json.dumps([t, v]))\n";
    let input: String = TABLE.iter().map(|(t, _)| format!("{t}\n")).collect();
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("python3 is needed to cross-check the YAML table (`scripts/test` sets it up)");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "python3 cannot import yaml: the table is not cross-checked; \
         run `scripts/test`, or install it: pip install pyyaml==6.0.2"
    );
    let answers: Vec<(String, serde_json::Value)> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), TABLE.len());
    for ((text, want), (kind, value)) in TABLE.iter().zip(answers) {
        let from_python = match kind.as_str() {
            "bool" => NodeValue::Bool(value.as_bool().unwrap()),
            "NoneType" => NodeValue::Null,
            "int" => NodeValue::Int(value.to_string().parse().unwrap()),
            "float" => NodeValue::Float(match value.as_str().unwrap() {
                "nan" => f64::NAN,
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                other => other.parse().unwrap(),
            }),
            _ => NodeValue::Str(value.as_str().unwrap().to_owned()),
        };
        assert!(
            same(&want.node(), &from_python),
            "{text:?}: table {want:?}, PyYAML {from_python:?}"
        );
    }
}

#[test]
fn only_plain_untagged_scalars_are_typed_again() {
    let src = "a: y\nb: 'y'\nc: !!str yes\nd: |\n  yes\ne: >-\n  on\nf: &x n\ng:\n  y\n";
    let at = |needle: &str, nth: usize| src.match_indices(needle).nth(nth).unwrap().0;
    assert_eq!(plain_source(src, at("y", 0), 1), Some("y"));
    assert_eq!(plain_source(src, at("'y'", 0), 3), None);
    assert_eq!(plain_source(src, at("yes", 0), 3), None);
    assert_eq!(plain_source(src, at("yes", 1), 3), None);
    assert_eq!(plain_source(src, at("on", 0), 2), None);
    assert_eq!(plain_source(src, at("&x n", 0) + 3, 1), Some("n"));
    assert_eq!(plain_source(src, src.len() - 2, 1), Some("y"));
}

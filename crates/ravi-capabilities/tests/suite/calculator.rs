//! Property tests of the calculator's parser against an independent reference evaluator:
//! random expression trees — operators, unary minus, every function (one, two or several
//! arguments) and the constants — are printed with the fewest parentheses the precedence rules
//! allow, parsed back and evaluated; the value (or the failure) must match evaluating the tree
//! directly. Plus: no input makes the parser panic, and the tool's results and errors.

use proptest::prelude::*;
use ravi_agents::Typed;
use ravi_capabilities::tools::Calculator;
use ravi_capabilities::tools::calculator::{evaluate, parse};
use ravi_kernel::{Tool, ToolContext, ToolErrorKind};
use serde_json::json;

#[derive(Debug, Clone)]
enum T {
    N(u32),
    /// A named constant: `pi`, `e` or `tau`.
    C(&'static str),
    Neg(Box<T>),
    B(char, Box<T>, Box<T>),
    /// A function call with its arguments.
    F(&'static str, Vec<T>),
}

/// One-argument functions the generator calls.
const UNARY: [&str; 22] = [
    "sqrt", "cbrt", "abs", "exp", "ln", "log", "log2", "log10", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "tanh", "floor", "ceil", "round", "trunc", "sign",
];
/// Two-argument functions (`log(x, base)` among them).
const BINARY: [&str; 4] = ["log", "atan2", "pow", "hypot"];
/// Functions of one or more arguments.
const VARIADIC: [&str; 2] = ["min", "max"];

/// Precedence of a printed tree: + - 1, * / % 2, unary 3, ^ 4, atoms (numbers, constants,
/// calls) 5.
fn prec(t: &T) -> u8 {
    match t {
        T::N(_) | T::C(_) | T::F(..) => 5,
        T::Neg(_) => 3,
        T::B('^', ..) => 4,
        T::B('*' | '/' | '%', ..) => 2,
        T::B(..) => 1,
    }
}

fn paren(s: String, yes: bool) -> String {
    if yes { format!("({s})") } else { s }
}

/// Prints with minimal parentheses.
fn print(t: &T) -> String {
    match t {
        T::N(n) => n.to_string(),
        T::C(name) => (*name).to_owned(),
        T::Neg(inner) => format!("-{}", paren(print(inner), prec(inner) < 3)),
        T::B(op, l, r) => {
            let p = prec(t);
            let (lp, rp) = if *op == '^' {
                (prec(l) <= 4, prec(r) < 3)
            } else {
                (prec(l) < p, prec(r) <= p)
            };
            format!("{} {op} {}", paren(print(l), lp), paren(print(r), rp))
        }
        T::F(name, args) => {
            let args: Vec<String> = args.iter().map(print).collect();
            format!("{name}({})", args.join(", "))
        }
    }
}

/// `x ^ y` as the calculator defines it: 0 to a negative power is a division by zero.
fn power(x: f64, y: f64) -> Option<f64> {
    if x == 0.0 && y < 0.0 {
        return None;
    }
    Some(x.powf(y))
}

/// The reference for a call: the mathematical definition with its domain written out, so a
/// value outside the domain is a failure here even where `f64` would return a number.
fn function(name: &str, args: &[f64]) -> Option<f64> {
    Some(match (name, args) {
        ("sqrt", [x]) if *x >= 0.0 => x.sqrt(),
        ("cbrt", [x]) => x.cbrt(),
        ("abs", [x]) => x.abs(),
        ("exp", [x]) => x.exp(),
        ("ln", [x]) if *x > 0.0 => x.ln(),
        ("log" | "log10", [x]) if *x > 0.0 => x.log10(),
        ("log2", [x]) if *x > 0.0 => x.log2(),
        ("log", [x, base]) if *x > 0.0 && *base > 0.0 && *base != 1.0 => x.ln() / base.ln(),
        ("sin", [x]) => x.sin(),
        ("cos", [x]) => x.cos(),
        ("tan", [x]) => x.tan(),
        ("asin", [x]) if (-1.0..=1.0).contains(x) => x.asin(),
        ("acos", [x]) if (-1.0..=1.0).contains(x) => x.acos(),
        ("atan", [x]) => x.atan(),
        ("sinh", [x]) => x.sinh(),
        ("cosh", [x]) => x.cosh(),
        ("tanh", [x]) => x.tanh(),
        ("floor", [x]) => x.floor(),
        ("ceil", [x]) => x.ceil(),
        ("round", [x]) => x.round(),
        ("trunc", [x]) => x.trunc(),
        ("sign", [x]) if *x == 0.0 => 0.0,
        ("sign", [x]) => x.signum(),
        ("atan2", [y, x]) => y.atan2(*x),
        ("pow", [x, y]) => power(*x, *y)?,
        ("hypot", [x, y]) => x.hypot(*y),
        ("min", [first, ..]) => args.iter().copied().fold(*first, f64::min),
        ("max", [first, ..]) => args.iter().copied().fold(*first, f64::max),
        _ => return None,
    })
}

/// The reference: evaluate the tree directly; `None` for any failure.
fn reference(t: &T) -> Option<f64> {
    let v = match t {
        T::N(n) => f64::from(*n),
        T::C("pi") => std::f64::consts::PI,
        T::C("e") => std::f64::consts::E,
        T::C("tau") => std::f64::consts::TAU,
        T::C(other) => unreachable!("no constant {other}"),
        T::Neg(inner) => -reference(inner)?,
        T::B(op, l, r) => {
            let (a, b) = (reference(l)?, reference(r)?);
            match op {
                '+' => a + b,
                '-' => a - b,
                '*' => a * b,
                '/' if b == 0.0 => return None,
                '/' => a / b,
                '%' if b == 0.0 => return None,
                '%' => a % b,
                '^' => power(a, b)?,
                _ => unreachable!(),
            }
        }
        T::F(name, args) => {
            let values = args.iter().map(reference).collect::<Option<Vec<f64>>>()?;
            function(name, &values)?
        }
    };
    v.is_finite().then_some(v)
}

fn tree() -> impl Strategy<Value = T> {
    let leaf = prop_oneof![
        4 => (0u32..50).prop_map(T::N),
        1 => prop::sample::select(vec!["pi", "e", "tau"]).prop_map(T::C),
    ];
    leaf.prop_recursive(6, 40, 3, |inner| {
        prop_oneof![
            1 => inner.clone().prop_map(|t| T::Neg(Box::new(t))),
            3 => (
                prop::sample::select(vec!['+', '-', '*', '/', '%', '^']),
                inner.clone(),
                inner.clone()
            )
                .prop_map(|(op, l, r)| T::B(op, Box::new(l), Box::new(r))),
            2 => (prop::sample::select(UNARY.to_vec()), inner.clone())
                .prop_map(|(f, x)| T::F(f, vec![x])),
            1 => (prop::sample::select(BINARY.to_vec()), inner.clone(), inner.clone())
                .prop_map(|(f, x, y)| T::F(f, vec![x, y])),
            1 => (
                prop::sample::select(VARIADIC.to_vec()),
                prop::collection::vec(inner, 1..=4)
            )
                .prop_map(|(f, args)| T::F(f, args)),
        ]
    })
}

/// The generator reaches every function and constant the calculator documents, so a change to
/// any of them is compared against the reference.
#[test]
fn the_generator_covers_every_function_and_constant() {
    let mut names: Vec<&str> = UNARY
        .iter()
        .chain(&BINARY)
        .chain(&VARIADIC)
        .copied()
        .collect();
    names.sort_unstable();
    names.dedup();
    let err = evaluate("nosuchfunction(1)").unwrap_err().to_string();
    for name in names.iter().chain(&["pi", "e", "tau"]) {
        assert!(err.contains(name), "{name} is not a documented name: {err}");
    }
    // Every documented function is generated: the error lists them, separated by `, `.
    let listed = err
        .split("known functions: ")
        .nth(1)
        .and_then(|rest| rest.split("; constants").next())
        .unwrap();
    for word in listed.split([',', ' ', '(', ')']).filter(|w| {
        !w.is_empty()
            && w.chars().all(|c| c.is_ascii_alphanumeric())
            && *w != "or"
            && *w != "x"
            && *w != "base"
    }) {
        assert!(names.contains(&word), "`{word}` is never generated");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn minimal_parentheses_parse_to_the_reference_value(t in tree()) {
        let text = print(&t);
        let got = evaluate(&text).ok();
        let want = reference(&t);
        match (got, want) {
            (Some(g), Some(w)) => prop_assert!(g == w || (g - w).abs() <= 1e-9 * w.abs(), "{text}: {g} vs {w}"),
            (None, None) => {}
            (g, w) => prop_assert!(false, "{text}: parser {g:?}, reference {w:?}"),
        }
    }

    #[test]
    fn display_round_trips(t in tree()) {
        if let Ok(e) = parse(&print(&t)) {
            let again = parse(&e.to_string()).unwrap();
            prop_assert_eq!(evaluate(&e.to_string()).ok(), ravi_capabilities::tools::calculator::eval(&again).ok());
        }
    }

    #[test]
    fn arbitrary_text_never_panics(s in "[0-9a-z+*/%^().,eE× -]{0,80}") {
        let _ = evaluate(&s);
    }

    #[test]
    fn arbitrary_unicode_never_panics(s in "\\PC{0,60}") {
        let _ = evaluate(&s);
    }
}

#[tokio::test]
async fn tool_returns_the_number_and_structured_result() {
    let out = Typed::new(Calculator)
        .execute(
            &ToolContext::default(),
            json!({"expression": "(3.5 + 2) * 4 ^ 2 / sqrt(16)"}),
        )
        .await
        .unwrap();
    assert!(!out.is_error);
    assert_eq!(out.text_content(), "22");
    assert_eq!(out.structured_content.unwrap()["result"], json!(22.0));
}

#[tokio::test]
async fn tool_errors_say_what_to_fix() {
    let ctx = ToolContext::default();
    let err = Typed::new(Calculator)
        .execute(&ctx, json!({"expression": "1/0"}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::InvalidArguments);
    assert!(err.message.contains("division by zero"), "{}", err.message);
    let err = Typed::new(Calculator)
        .execute(&ctx, json!({"expr": "1"}))
        .await
        .unwrap_err();
    assert!(
        err.message.contains("invalid arguments for `calculator`"),
        "{}",
        err.message
    );
    assert!(err.message.contains("expr"), "{}", err.message);
    let err = Typed::new(Calculator)
        .execute(&ctx, json!({"expression": 5}))
        .await
        .unwrap_err();
    assert!(err.message.contains("invalid type"), "{}", err.message);
    let err = Typed::new(Calculator)
        .execute(&ctx, json!({"expression": "2 *"}))
        .await
        .unwrap_err();
    assert!(
        err.message.contains("syntax error at character"),
        "{}",
        err.message
    );
}

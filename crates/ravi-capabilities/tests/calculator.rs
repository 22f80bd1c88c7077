//! Property tests of the calculator's parser against an independent reference evaluator:
//! random expression trees are printed with the fewest parentheses the precedence rules allow,
//! parsed back and evaluated; the value (or the failure) must match evaluating the tree
//! directly. Plus: no input makes the parser panic, and the tool's results and errors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failed unwrap is a failed test

use proptest::prelude::*;
use ravi_capabilities::tools::Calculator;
use ravi_capabilities::tools::calculator::{evaluate, parse};
use ravi_kernel::{Tool, ToolContext, ToolErrorKind};
use serde_json::json;

#[derive(Debug, Clone)]
enum T {
    N(u32),
    Neg(Box<T>),
    B(char, Box<T>, Box<T>),
}

/// Precedence of a printed tree: + - 1, * / % 2, unary 3, ^ 4, atoms 5.
fn prec(t: &T) -> u8 {
    match t {
        T::N(_) => 5,
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
    }
}

/// The reference: evaluate the tree directly; `None` for any failure.
fn reference(t: &T) -> Option<f64> {
    let v = match t {
        T::N(n) => f64::from(*n),
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
                '^' => a.powf(b),
                _ => unreachable!(),
            }
        }
    };
    v.is_finite().then_some(v)
}

fn tree() -> impl Strategy<Value = T> {
    let leaf = (0u32..50).prop_map(T::N);
    leaf.prop_recursive(6, 40, 2, |inner| {
        prop_oneof![
            inner.clone().prop_map(|t| T::Neg(Box::new(t))),
            (
                prop::sample::select(vec!['+', '-', '*', '/', '%', '^']),
                inner.clone(),
                inner
            )
                .prop_map(|(op, l, r)| T::B(op, Box::new(l), Box::new(r))),
        ]
    })
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
    let out = Calculator
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
    let err = Calculator
        .execute(&ctx, json!({"expression": "1/0"}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::InvalidArguments);
    assert!(err.message.contains("division by zero"), "{}", err.message);
    let err = Calculator
        .execute(&ctx, json!({"expr": "1"}))
        .await
        .unwrap_err();
    assert!(
        err.message.contains("invalid arguments for calculator"),
        "{}",
        err.message
    );
    assert!(err.message.contains("expr"), "{}", err.message);
    let err = Calculator
        .execute(&ctx, json!({"expression": 5}))
        .await
        .unwrap_err();
    assert!(err.message.contains("invalid type"), "{}", err.message);
    let err = Calculator
        .execute(&ctx, json!({"expression": "2 *"}))
        .await
        .unwrap_err();
    assert!(
        err.message.contains("syntax error at character"),
        "{}",
        err.message
    );
}

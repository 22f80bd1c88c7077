//! Arithmetic expressions: a lexer, a Pratt parser to an AST, and a checked evaluator.
//!
//! Grammar (loosest first): `+ -` (left), `* / %` (left), unary `-`/`+`, `^` (right, binds
//! tighter than unary minus so `-2^2 = -4`), then atoms: numbers (`12`, `1.5`, `.5`, `2e-3`),
//! constants, `name(args)` calls and parentheses. `×`, `÷`, `−` and `**` are accepted as
//! spellings of `*`, `/`, `-` and `^`. Nothing is ever handed to an `eval`.

use std::fmt;

/// The most characters an expression may have.
pub const MAX_LEN: usize = 2_000;
/// The deepest nesting of parentheses, calls and unary operators.
pub const MAX_DEPTH: usize = 64;

/// Why an expression could not be evaluated. Messages say where and what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CalcError {
    /// The text is not a valid expression.
    #[error("syntax error at character {pos}: {message}")]
    Syntax {
        /// 1-based character position.
        pos: usize,
        /// What was found and what was expected.
        message: String,
    },
    /// A name that is neither a function nor a constant.
    #[error("unknown name `{0}`; known functions: {FUNCTIONS}; constants: pi, e, tau")]
    UnknownName(String),
    /// A function called with the wrong number of arguments.
    #[error("{name}() takes {expected} argument(s), got {got}")]
    Arity {
        /// The function.
        name: String,
        /// How many it takes.
        expected: &'static str,
        /// How many were given.
        got: usize,
    },
    /// Division or remainder by zero.
    #[error("division by zero in `{0}`")]
    DivisionByZero(String),
    /// A result too large for a 64-bit float.
    #[error("overflow: the result of `{0}` is too large to represent")]
    Overflow(String),
    /// A function or power outside its domain (`sqrt(-1)`, `ln(0)`, `(-8)^0.5`).
    #[error("`{0}` is undefined for real numbers")]
    Domain(String),
    /// The expression is longer than [`MAX_LEN`] or nested deeper than [`MAX_DEPTH`].
    #[error("expression too large: {0}")]
    TooLarge(String),
}

const FUNCTIONS: &str = "sqrt, cbrt, abs, exp, ln, log (log10, or log(x, base)), log2, log10, \
sin, cos, tan, asin, acos, atan, atan2, sinh, cosh, tanh, floor, ceil, round, trunc, sign, \
min, max, pow, hypot";

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%` (remainder with the sign of the dividend)
    Rem,
    /// `^`
    Pow,
}

impl BinOp {
    /// The operator's symbol.
    pub fn symbol(self) -> char {
        match self {
            Self::Add => '+',
            Self::Sub => '-',
            Self::Mul => '*',
            Self::Div => '/',
            Self::Rem => '%',
            Self::Pow => '^',
        }
    }

    /// Left and right binding power.
    fn binding(self) -> (u8, u8) {
        match self {
            Self::Add | Self::Sub => (1, 2),
            Self::Mul | Self::Div | Self::Rem => (3, 4),
            Self::Pow => (8, 7),
        }
    }
}

/// Binding power of unary minus/plus: looser than `^`, tighter than `*`.
const UNARY_BP: u8 = 5;

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A literal.
    Num(f64),
    /// A named constant.
    Const(String),
    /// Unary minus.
    Neg(Box<Expr>),
    /// A binary operation.
    Bin(BinOp, Box<Expr>, Box<Expr>),
    /// A function call.
    Call(String, Vec<Expr>),
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Num(n) => write!(f, "{n}"),
            Self::Const(c) => f.write_str(c),
            Self::Neg(e) => write!(f, "-({e})"),
            Self::Bin(op, l, r) => write!(f, "({l} {} {r})", op.symbol()),
            Self::Call(name, args) => {
                write!(f, "{name}(")?;
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str(")")
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Ident(String),
    Op(BinOp),
    LParen,
    RParen,
    Comma,
}

fn describe(tok: Option<&(usize, Tok)>) -> String {
    match tok.map(|(_, t)| t) {
        None => "the end of the expression".into(),
        Some(Tok::Num(n)) => format!("the number {n}"),
        Some(Tok::Ident(s)) => format!("`{s}`"),
        Some(Tok::Op(op)) => format!("`{}`", op.symbol()),
        Some(Tok::LParen) => "`(`".into(),
        Some(Tok::RParen) => "`)`".into(),
        Some(Tok::Comma) => "`,`".into(),
    }
}

fn lex(src: &str) -> Result<Vec<(usize, Tok)>, CalcError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let pos = i + 1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() || c == '.' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            // An exponent only when digits follow (`2e3`, `2e-3`); `2e` stays `2` then `e`.
            if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                let mut j = i + 1;
                if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
                    j += 1;
                }
                if j < chars.len() && chars[j].is_ascii_digit() {
                    while j < chars.len() && chars[j].is_ascii_digit() {
                        j += 1;
                    }
                    i = j;
                }
            }
            let text: String = chars[start..i].iter().collect();
            let value = text.parse::<f64>().map_err(|_| CalcError::Syntax {
                pos,
                message: format!("`{text}` is not a valid number"),
            })?;
            out.push((pos, Tok::Num(value)));
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((pos, Tok::Ident(chars[start..i].iter().collect())));
            continue;
        }
        let tok = match c {
            '+' => Tok::Op(BinOp::Add),
            '-' | '−' => Tok::Op(BinOp::Sub),
            '*' if chars.get(i + 1) == Some(&'*') => {
                i += 1;
                Tok::Op(BinOp::Pow)
            }
            '*' | '×' | '·' => Tok::Op(BinOp::Mul),
            '/' | '÷' => Tok::Op(BinOp::Div),
            '%' => Tok::Op(BinOp::Rem),
            '^' => Tok::Op(BinOp::Pow),
            '(' => Tok::LParen,
            ')' => Tok::RParen,
            ',' => Tok::Comma,
            other => {
                return Err(CalcError::Syntax {
                    pos,
                    message: format!(
                        "unexpected character `{other}`; use numbers, + - * / % ^, parentheses and function names"
                    ),
                });
            }
        };
        out.push((pos, tok));
        i += 1;
    }
    Ok(out)
}

struct Parser {
    toks: Vec<(usize, Tok)>,
    at: usize,
    end_pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|(_, t)| t)
    }

    fn pos(&self) -> usize {
        self.toks.get(self.at).map_or(self.end_pos, |(p, _)| *p)
    }

    fn error(&self, expected: &str) -> CalcError {
        CalcError::Syntax {
            pos: self.pos(),
            message: format!(
                "expected {expected}, found {}",
                describe(self.toks.get(self.at))
            ),
        }
    }

    fn expr(&mut self, min_bp: u8, depth: usize) -> Result<Expr, CalcError> {
        if depth > MAX_DEPTH {
            return Err(CalcError::TooLarge(format!(
                "nested deeper than {MAX_DEPTH} levels"
            )));
        }
        let tok = self.toks.get(self.at).map(|(_, t)| t.clone());
        let mut lhs = match tok {
            Some(Tok::Num(n)) => {
                self.at += 1;
                Expr::Num(n)
            }
            Some(Tok::Op(BinOp::Sub)) => {
                self.at += 1;
                Expr::Neg(Box::new(self.expr(UNARY_BP, depth + 1)?))
            }
            Some(Tok::Op(BinOp::Add)) => {
                self.at += 1;
                self.expr(UNARY_BP, depth + 1)?
            }
            Some(Tok::LParen) => {
                self.at += 1;
                let inner = self.expr(0, depth + 1)?;
                if self.peek() != Some(&Tok::RParen) {
                    return Err(self.error("`)`"));
                }
                self.at += 1;
                inner
            }
            Some(Tok::Ident(name)) => {
                self.at += 1;
                if self.peek() == Some(&Tok::LParen) {
                    self.at += 1;
                    let mut args = Vec::new();
                    if self.peek() == Some(&Tok::RParen) {
                        self.at += 1;
                    } else {
                        loop {
                            args.push(self.expr(0, depth + 1)?);
                            match self.peek() {
                                Some(Tok::Comma) => self.at += 1,
                                Some(Tok::RParen) => {
                                    self.at += 1;
                                    break;
                                }
                                _ => return Err(self.error("`,` or `)`")),
                            }
                        }
                    }
                    Expr::Call(name.to_ascii_lowercase(), args)
                } else {
                    Expr::Const(name)
                }
            }
            _ => return Err(self.error("a number, a name, `-` or `(`")),
        };
        loop {
            let op = match self.peek() {
                Some(Tok::Op(op)) => *op,
                None | Some(Tok::RParen) | Some(Tok::Comma) => break,
                Some(_) => return Err(self.error("an operator")),
            };
            let (lbp, rbp) = op.binding();
            if lbp < min_bp {
                break;
            }
            self.at += 1;
            let rhs = self.expr(rbp, depth + 1)?;
            lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }
}

/// Parses `src` into an expression tree.
pub fn parse(src: &str) -> Result<Expr, CalcError> {
    let len = src.chars().count();
    if len > MAX_LEN {
        return Err(CalcError::TooLarge(format!(
            "{len} characters, at most {MAX_LEN} allowed"
        )));
    }
    let toks = lex(src)?;
    if toks.is_empty() {
        return Err(CalcError::Syntax {
            pos: 1,
            message: "the expression is empty; write something like `2 * (3 + 4)`".into(),
        });
    }
    let mut p = Parser {
        toks,
        at: 0,
        end_pos: len + 1,
    };
    let e = p.expr(0, 0)?;
    if p.at < p.toks.len() {
        return Err(if p.peek() == Some(&Tok::RParen) {
            CalcError::Syntax {
                pos: p.pos(),
                message: "unmatched `)`".into(),
            }
        } else {
            p.error("an operator or the end of the expression")
        });
    }
    Ok(e)
}

fn constant(name: &str) -> Option<f64> {
    Some(match name.to_ascii_lowercase().as_str() {
        "pi" | "π" => std::f64::consts::PI,
        "e" => std::f64::consts::E,
        "tau" | "τ" => std::f64::consts::TAU,
        _ => return None,
    })
}

fn check(value: f64, what: impl FnOnce() -> String) -> Result<f64, CalcError> {
    if value.is_nan() {
        Err(CalcError::Domain(what()))
    } else if value.is_infinite() {
        Err(CalcError::Overflow(what()))
    } else {
        Ok(value)
    }
}

fn call(name: &str, args: &[f64], shown: impl Fn() -> String) -> Result<f64, CalcError> {
    let arity = |expected: &'static str| CalcError::Arity {
        name: name.to_owned(),
        expected,
        got: args.len(),
    };
    let one = || match args {
        [x] => Ok(*x),
        _ => Err(arity("1")),
    };
    let two = || match args {
        [x, y] => Ok((*x, *y)),
        _ => Err(arity("2")),
    };
    let domain = |ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(CalcError::Domain(shown()))
        }
    };
    let v = match name {
        "sqrt" => {
            let x = one()?;
            domain(x >= 0.0)?;
            x.sqrt()
        }
        "cbrt" => one()?.cbrt(),
        "abs" => one()?.abs(),
        "exp" => one()?.exp(),
        "ln" => {
            let x = one()?;
            domain(x > 0.0)?;
            x.ln()
        }
        "log" => match args {
            [x] => {
                domain(*x > 0.0)?;
                x.log10()
            }
            [x, base] => {
                domain(*x > 0.0 && *base > 0.0 && *base != 1.0)?;
                x.ln() / base.ln()
            }
            _ => return Err(arity("1 or 2")),
        },
        "log2" | "log10" => {
            let x = one()?;
            domain(x > 0.0)?;
            if name == "log2" { x.log2() } else { x.log10() }
        }
        "sin" => one()?.sin(),
        "cos" => one()?.cos(),
        "tan" => one()?.tan(),
        "asin" | "acos" => {
            let x = one()?;
            domain((-1.0..=1.0).contains(&x))?;
            if name == "asin" { x.asin() } else { x.acos() }
        }
        "atan" => one()?.atan(),
        "atan2" => {
            let (y, x) = two()?;
            y.atan2(x)
        }
        "sinh" => one()?.sinh(),
        "cosh" => one()?.cosh(),
        "tanh" => one()?.tanh(),
        "floor" => one()?.floor(),
        "ceil" => one()?.ceil(),
        "round" => one()?.round(),
        "trunc" => one()?.trunc(),
        "sign" => {
            let x = one()?;
            if x == 0.0 { 0.0 } else { x.signum() }
        }
        "min" | "max" => {
            if args.is_empty() {
                return Err(arity("at least 1"));
            }
            let fold = if name == "min" { f64::min } else { f64::max };
            args.iter().copied().fold(args[0], fold)
        }
        "pow" => {
            let (x, y) = two()?;
            pow(x, y, &shown)?
        }
        "hypot" => {
            let (x, y) = two()?;
            x.hypot(y)
        }
        _ => return Err(CalcError::UnknownName(name.to_owned())),
    };
    check(v, shown)
}

fn pow(x: f64, y: f64, shown: &dyn Fn() -> String) -> Result<f64, CalcError> {
    if x == 0.0 && y < 0.0 {
        return Err(CalcError::DivisionByZero(shown()));
    }
    check(x.powf(y), shown)
}

/// Evaluates a parsed expression with checked arithmetic.
pub fn eval(e: &Expr) -> Result<f64, CalcError> {
    match e {
        Expr::Num(n) => check(*n, || e.to_string()),
        Expr::Const(name) => constant(name).ok_or_else(|| CalcError::UnknownName(name.clone())),
        Expr::Neg(inner) => Ok(-eval(inner)?),
        Expr::Bin(op, l, r) => {
            let (a, b) = (eval(l)?, eval(r)?);
            let shown = || e.to_string();
            let v = match op {
                BinOp::Add => a + b,
                BinOp::Sub => a - b,
                BinOp::Mul => a * b,
                BinOp::Div | BinOp::Rem if b == 0.0 => {
                    return Err(CalcError::DivisionByZero(shown()));
                }
                BinOp::Div => a / b,
                BinOp::Rem => a % b,
                BinOp::Pow => return pow(a, b, &shown),
            };
            check(v, shown)
        }
        Expr::Call(name, args) => {
            let values = args.iter().map(eval).collect::<Result<Vec<_>, _>>()?;
            call(name, &values, || e.to_string())
        }
    }
}

/// Parses and evaluates `src`.
pub fn evaluate(src: &str) -> Result<f64, CalcError> {
    eval(&parse(src)?)
}

/// Formats a result the way a person writes it: integers without a fraction, others in the
/// shortest form that reads back to the same float.
pub fn format_number(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    if v.fract() == 0.0 && v.abs() < 1e16 {
        return format!("{v:.0}");
    }
    format!("{v}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(src: &str) -> f64 {
        match evaluate(src) {
            Ok(v) => v,
            Err(e) => unreachable!("{src}: {e}"),
        }
    }

    fn err(src: &str) -> CalcError {
        match evaluate(src) {
            Ok(v) => unreachable!("{src} gave {v}"),
            Err(e) => e,
        }
    }

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(ok("1 + 2 * 3"), 7.0);
        assert_eq!(ok("(1 + 2) * 3"), 9.0);
        assert_eq!(ok("10 - 4 - 3"), 3.0);
        assert_eq!(ok("2 ^ 3 ^ 2"), 512.0);
        assert_eq!(ok("-2 ^ 2"), -4.0);
        assert_eq!(ok("2 ^ -1"), 0.5);
        assert_eq!(ok("(-2) ^ 2"), 4.0);
        assert_eq!(ok("7 % 4 * 2"), 6.0);
        assert_eq!(ok("-7 % 4"), -3.0);
        assert_eq!(ok("--3"), 3.0);
        assert_eq!(ok("+3 - -3"), 6.0);
        assert_eq!(ok("2 * -3"), -6.0);
        assert_eq!(ok("100 / 10 / 5"), 2.0);
    }

    #[test]
    fn numbers_functions_constants_and_spellings() {
        assert_eq!(ok("1.5e3 + .5"), 1500.5);
        assert_eq!(ok("2E-2"), 0.02);
        assert_eq!(ok("sqrt(16) + abs(-2)"), 6.0);
        assert_eq!(ok("max(1, 7, 3) - min(4, 2)"), 5.0);
        assert_eq!(ok("log(1000)"), 3.0);
        assert_eq!(ok("log(8, 2)"), 3.0);
        assert_eq!(ok("round(pi * 100)"), 314.0);
        assert_eq!(ok("2 × 3 ÷ 4 − 1"), 0.5);
        assert_eq!(ok("2 ** 10"), 1024.0);
        assert_eq!(ok("SQRT(4)"), 2.0);
        assert!((ok("e") - std::f64::consts::E).abs() < 1e-15);
        assert!((ok("sin(pi / 2)") - 1.0).abs() < 1e-15);
        assert_eq!(ok("atan2(0, 1)"), 0.0);
    }

    #[test]
    fn errors_are_specific() {
        assert!(matches!(err("1 / 0"), CalcError::DivisionByZero(_)));
        assert!(matches!(err("5 % (2 - 2)"), CalcError::DivisionByZero(_)));
        assert!(matches!(err("0 ^ -1"), CalcError::DivisionByZero(_)));
        assert!(matches!(err("10 ^ 400"), CalcError::Overflow(_)));
        assert!(matches!(err("1e308 * 10"), CalcError::Overflow(_)));
        assert!(matches!(err("exp(1000)"), CalcError::Overflow(_)));
        assert!(matches!(err("sqrt(-1)"), CalcError::Domain(_)));
        assert!(matches!(err("ln(0)"), CalcError::Domain(_)));
        assert!(matches!(err("(-8) ^ 0.5"), CalcError::Domain(_)));
        assert!(matches!(err("asin(2)"), CalcError::Domain(_)));
        assert!(matches!(err("foo(1)"), CalcError::UnknownName(_)));
        assert!(matches!(err("x + 1"), CalcError::UnknownName(_)));
        assert!(matches!(err("sqrt(1, 2)"), CalcError::Arity { .. }));
        assert_eq!(
            err("1 +").to_string(),
            "syntax error at character 4: expected a number, a name, `-` or `(`, found the end of the expression"
        );
        assert_eq!(
            err("(1 + 2").to_string(),
            "syntax error at character 7: expected `)`, found the end of the expression"
        );
        assert_eq!(
            err("1 + 2)").to_string(),
            "syntax error at character 6: unmatched `)`"
        );
        assert!(err("2 3").to_string().contains("expected an operator"));
        assert!(
            err("1 $ 2")
                .to_string()
                .contains("unexpected character `$`")
        );
        assert!(err("1..2").to_string().contains("not a valid number"));
        assert!(err("").to_string().contains("empty"));
        assert!(err("   ").to_string().contains("empty"));
        assert!(matches!(err(&"(".repeat(100)), CalcError::TooLarge(_)));
        assert!(matches!(err(&"-".repeat(100)), CalcError::TooLarge(_)));
        assert!(matches!(err(&"1+".repeat(1500)), CalcError::TooLarge(_)));
    }

    #[test]
    fn formats_like_a_person() {
        assert_eq!(format_number(6.0), "6");
        assert_eq!(format_number(-0.0), "0");
        assert_eq!(format_number(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(format_number(1e20), "100000000000000000000");
        assert_eq!(format_number(2.5), "2.5");
    }
}

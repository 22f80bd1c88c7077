//! `calculator` (Safe): evaluates an arithmetic expression with a real parser.

mod expr;

use ravi_agents::TypedTool;
use ravi_kernel::{
    ContentBlock, ToolContext, ToolEffects, ToolError, ToolExecutionResult, ToolRisk,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

pub use expr::{BinOp, CalcError, Expr, MAX_DEPTH, MAX_LEN, eval, evaluate, format_number, parse};

/// Evaluates arithmetic: `+ - * / % ^`, parentheses, unary minus, functions (`sqrt`, `log`,
/// `sin`, `min`, …) and constants (`pi`, `e`, `tau`). Division by zero, overflow and domain
/// errors are tool errors, never `inf` or `NaN`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Calculator;

/// The calculator's arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalculatorArgs {
    /// The expression, e.g. "(3.5 + 2) * 4 ^ 2 / sqrt(16)".
    #[schemars(length(min = 1, max = MAX_LEN))]
    pub expression: String,
}

impl Calculator {
    /// The tool's name.
    pub const NAME: &'static str = "calculator";
}

#[ravi_kernel::async_trait]
impl TypedTool for Calculator {
    type Args = CalculatorArgs;
    type Output = Result<ToolExecutionResult, ToolError>;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        "Evaluate an arithmetic expression exactly as written and return the number. Supports \
         + - * / % ^ (power, right-associative; -2^2 = -4), parentheses, unary minus, \
         scientific notation (1.5e3), the constants pi, e and tau, and the functions sqrt, cbrt, \
         abs, exp, ln, log (base 10, or log(x, base)), log2, log10, sin, cos, tan, asin, acos, \
         atan, atan2, sinh, cosh, tanh, floor, ceil, round, trunc, sign, min, max, pow, hypot. \
         Angles are in radians. Use it instead of doing arithmetic in your head."
    }

    fn output_schema(&self) -> Option<Value> {
        Some(json!({
            "type": "object",
            "properties": {
                "expression": {"type": "string"},
                "result": {"type": "number"},
            },
            "required": ["expression", "result"],
        }))
    }

    fn risk(&self) -> ToolRisk {
        ToolRisk::Safe
    }

    /// Computes, nothing else: read-only, idempotent, closed-world.
    fn effects(&self) -> ToolEffects {
        ToolEffects::read_only_closed()
    }

    fn input_examples(&self) -> Vec<Value> {
        vec![
            json!({"expression": "12 * (3 + 4)"}),
            json!({"expression": "sqrt(2) ^ 2"}),
        ]
    }

    async fn call(
        &self,
        _ctx: &ToolContext,
        CalculatorArgs { expression }: CalculatorArgs,
    ) -> Result<ToolExecutionResult, ToolError> {
        let value = evaluate(&expression).map_err(|e| {
            let hint = match e {
                CalcError::Syntax { .. } => " Fix the expression and call again.",
                CalcError::DivisionByZero(_) | CalcError::Domain(_) => {
                    " The expression has no real value; check the inputs."
                }
                _ => "",
            };
            ToolError::invalid_arguments(format!("cannot evaluate `{expression}`: {e}.{hint}"))
        })?;
        Ok({
            let mut r = ToolExecutionResult::default();
            r.content = vec![ContentBlock::text(format_number(value))];
            r.structured_content = Some(json!({"expression": expression, "result": value}));
            r
        })
    }
}

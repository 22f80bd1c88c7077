//! `read_result` (Safe): reads part of an offloaded result (an artifact) by ref, so a model can
//! inspect a large output without loading it whole.
//!
//! Modes: a byte range, a line span, or the lines matching a regex (with context); with none
//! of them, an overview (size, type, line count and the first lines). Reads go through the
//! calling session's [`ArtifactAccess`](ravi_kernel::ArtifactAccess), so only artifacts that
//! session may read are reachable.

use base64::Engine as _;
use ravi_agents::TypedTool;
use ravi_kernel::{
    ArtifactRef, BlobError, ToolContext, ToolEffects, ToolError, ToolErrorKind, ToolExecutionResult,
};
use schemars::JsonSchema;
use serde::Deserialize;

/// Most bytes of artifact text returned by one call (64 KiB).
pub const MAX_OUTPUT: usize = 64 * 1024;
/// Lines shown by the overview.
const PREVIEW_LINES: usize = 40;

/// Reads a range, line span or regex matches out of an artifact.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadResult;

/// A range of an artifact: bytes `[start, end)`, or lines `start..=end` (1-based).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct Span {
    /// Where the range starts.
    pub start: u64,
    /// Where it ends.
    pub end: u64,
}

/// `read_result`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadResultArgs {
    /// The artifact ref.
    #[serde(rename = "ref")]
    #[schemars(regex(pattern = r"^art_[a-z0-9]{26,64}$"))]
    pub artifact: String,
    /// Byte range [start, end) to return.
    pub bytes: Option<Span>,
    /// Line span, 1-based and inclusive.
    pub lines: Option<Span>,
    /// Return the lines matching this regular expression (Rust regex syntax).
    #[schemars(length(min = 1))]
    pub regex: Option<String>,
    /// Most matching lines to return (default 50).
    #[schemars(range(min = 1, max = 500))]
    pub max_matches: Option<usize>,
    /// Lines of context around each match (default 0).
    #[schemars(range(max = 20))]
    pub context: Option<usize>,
}

fn blob_error(err: BlobError) -> ToolError {
    let kind = match err {
        BlobError::NotFound(_) => ToolErrorKind::NotFound,
        BlobError::Forbidden(_) => ToolErrorKind::PermissionDenied,
        _ => ToolErrorKind::Unavailable,
    };
    ToolError::new(kind, err.to_string())
}

/// Cuts `text` to at most [`MAX_OUTPUT`] bytes on a character boundary.
fn cap(text: &str) -> (&str, bool) {
    if text.len() <= MAX_OUTPUT {
        return (text, false);
    }
    let mut end = MAX_OUTPUT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

impl ReadResult {
    /// The tool's name.
    pub const NAME: &'static str = ravi_kernel::READ_RESULT;
}

#[ravi_kernel::async_trait]
impl TypedTool for ReadResult {
    type Args = ReadResultArgs;
    type Output = Result<ToolExecutionResult, ToolError>;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        "Inspect a large tool result that was stored as an artifact (its ref looks like \
         art_...). Give exactly one of: bytes {start, end} for a byte range, lines {start, end} \
         for 1-based inclusive line numbers, or regex to list matching lines with their numbers \
         (context adds surrounding lines). With none of them you get the size, type, line count \
         and the first 40 lines. At most 64 KiB per call."
    }

    /// Reads a stored result of the caller's own: read-only, idempotent, closed-world.
    fn effects(&self) -> ToolEffects {
        ToolEffects::read_only_closed()
    }

    async fn call(
        &self,
        ctx: &ToolContext,
        a: ReadResultArgs,
    ) -> Result<ToolExecutionResult, ToolError> {
        let modes = [a.bytes.is_some(), a.lines.is_some(), a.regex.is_some()];
        if modes.iter().filter(|m| **m).count() > 1 {
            return Err(ToolError::invalid_arguments(
                "give at most one of bytes, lines and regex",
            ));
        }
        let artifact = ArtifactRef::parse(&a.artifact).map_err(|e| {
            ToolError::invalid_arguments(format!(
                "{e}; copy the ref exactly as it appeared in the result"
            ))
        })?;
        let access = ctx.artifacts.as_ref().ok_or_else(|| {
            ToolError::new(
                ToolErrorKind::Unavailable,
                "no artifact store is attached to this call, so there is nothing to read; read_result works on refs produced in the same session",
            )
        })?;
        let info = access.stat(&artifact).await.map_err(blob_error)?;
        let data = access.resolve(&artifact).await.map_err(blob_error)?;
        let size = data.len() as u64;
        let text = std::str::from_utf8(&data).ok();

        if let Some(Span { start, end }) = a.bytes {
            if start > end {
                return Err(ToolError::invalid_arguments(format!(
                    "bytes.start ({start}) is after bytes.end ({end})"
                )));
            }
            let s = start.min(size) as usize;
            let e = end.min(size).min(start.saturating_add(MAX_OUTPUT as u64)) as usize;
            let slice = data.get(s..e).unwrap_or_default();
            let body = match std::str::from_utf8(slice) {
                Ok(t) => t.to_owned(),
                Err(_) => format!(
                    "[binary; base64] {}",
                    base64::engine::general_purpose::STANDARD.encode(slice)
                ),
            };
            let mut out = format!("{artifact} bytes {s}..{e} of {size}:\n{body}");
            if (e as u64) < end.min(size) {
                out.push_str(&format!(
                    "\n[read_result: cut at {MAX_OUTPUT} bytes; continue with bytes.start={e}]"
                ));
            }
            return Ok(ToolExecutionResult::text(out));
        }

        let Some(text) = text else {
            if modes.iter().any(|m| *m) {
                return Err(ToolError::invalid_arguments(format!(
                    "{artifact} is binary ({}, {size} bytes); only bytes ranges can be read from it",
                    info.media_type
                )));
            }
            return Ok(ToolExecutionResult::text(format!(
                "{artifact}: {}, {size} bytes, binary. Read a part with bytes {{start, end}}.",
                info.media_type
            )));
        };
        let lines: Vec<&str> = text.lines().collect();
        let total = lines.len();

        if let Some(Span { start, end }) = a.lines {
            if start == 0 || start > end {
                return Err(ToolError::invalid_arguments(format!(
                    "lines are 1-based and start <= end; got start {start}, end {end}"
                )));
            }
            let s = usize::try_from(start - 1).unwrap_or(usize::MAX).min(total);
            let e = usize::try_from(end).unwrap_or(usize::MAX).min(total);
            let mut out = format!("{artifact} lines {}..{e} of {total}:\n", s + 1);
            let mut shown = s;
            for (i, line) in lines.iter().enumerate().take(e).skip(s) {
                if out.len() + line.len() > MAX_OUTPUT {
                    break;
                }
                out.push_str(&format!("{:>6}  {line}\n", i + 1));
                shown = i + 1;
            }
            if shown < e {
                out.push_str(&format!(
                    "[read_result: cut at {MAX_OUTPUT} bytes; continue with lines.start={}]\n",
                    shown + 1
                ));
            }
            return Ok(ToolExecutionResult::text(out));
        }

        if let Some(pattern) = a.regex {
            let re = regex::RegexBuilder::new(&pattern)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| {
                    ToolError::invalid_arguments(format!("invalid regex `{pattern}`: {e}"))
                })?;
            let max = a.max_matches.unwrap_or(50).clamp(1, 500);
            let context = a.context.unwrap_or(0).min(20);
            let hits: Vec<usize> = lines
                .iter()
                .enumerate()
                .filter(|(_, l)| re.is_match(l))
                .map(|(i, _)| i)
                .collect();
            let mut out = format!(
                "{artifact}: {} matching line(s) of {total} for /{pattern}/\n",
                hits.len()
            );
            let mut last_printed: Option<usize> = None;
            for &hit in hits.iter().take(max) {
                let from = hit.saturating_sub(context);
                let to = (hit + context).min(total.saturating_sub(1));
                if let Some(last) = last_printed
                    && from > last + 1
                {
                    out.push_str("--\n");
                }
                for (i, line) in lines.iter().enumerate().take(to + 1).skip(from) {
                    if last_printed.is_some_and(|l| i <= l) {
                        continue;
                    }
                    let mark = if i == hit || hits.binary_search(&i).is_ok() {
                        ':'
                    } else {
                        '-'
                    };
                    out.push_str(&format!("{:>6}{mark} {line}\n", i + 1));
                    last_printed = Some(i);
                }
                if out.len() > MAX_OUTPUT {
                    break;
                }
            }
            let (shown, cut) = cap(&out);
            let mut out = shown.to_owned();
            if hits.len() > max || cut {
                out.push_str(
                    "[read_result: more matches exist; narrow the regex or raise max_matches]\n",
                );
            }
            return Ok(ToolExecutionResult::text(out));
        }

        let mut out = format!(
            "{artifact}: {}, {size} bytes, {total} lines. First {} lines:\n",
            info.media_type,
            PREVIEW_LINES.min(total)
        );
        for (i, line) in lines.iter().enumerate().take(PREVIEW_LINES) {
            out.push_str(&format!("{:>6}  {line}\n", i + 1));
        }
        let (shown, _) = cap(&out);
        let mut out = shown.to_owned();
        if total > PREVIEW_LINES {
            out.push_str("[read_result: use lines {start, end} or regex to read more]\n");
        }
        Ok(ToolExecutionResult::text(out))
    }
}

//! `cargo xtask bench --doc`: the figure tables of docs/benchmarks.md, written from the committed
//! baseline (`bench/baseline.json`) so that the reference and the measured run cannot drift.
//!
//! The doc marks where each table goes and which figures it holds:
//!
//! ```text
//! <!-- figures: invoker/ offload/200mb_store_resolve_ms -->
//! | figure | Ravi | peer | ratio |
//! …
//! <!-- /figures -->
//! ```
//!
//! Each name is a prefix of figure names (`invoker/` takes every invoker figure; a full name takes
//! one). `<!-- figures: headline -->` is the headline table: the figures named in the doc's
//! `<!-- headline: NAME … -->` comment, in that order, with the targets of its
//! `<!-- targets: NAME=TEXT; … -->` comment. The `Measured:` line names the baseline's commit and
//! date. `cargo xtask test` checks that the doc is what `--doc` would write.

use anyhow::{Context as _, bail};
use serde_json::Value;

/// The marker that ends a generated table.
const END: &str = "<!-- /figures -->";

/// `doc` with every marked table (and the `Measured:` line) written from `baseline`.
pub fn render(doc: &str, baseline: &Value) -> anyhow::Result<String> {
    let figures = baseline["figures"].as_array().cloned().unwrap_or_default();
    if figures.is_empty() {
        bail!("the baseline has no figures");
    }
    let headline = comment_words(doc, "headline");
    let targets = targets(doc);
    let mut out = String::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        if line.starts_with("Measured:") {
            out.push_str(&measured_line(baseline));
            out.push('\n');
            continue;
        }
        let Some(names) = line
            .trim()
            .strip_prefix("<!-- figures:")
            .and_then(|r| r.strip_suffix("-->"))
        else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        out.push_str(line);
        out.push('\n');
        // Skip the table written last time, up to its end marker (if it has one before the
        // next table's start: a new marker above an old table keeps the old one and the prose
        // between them).
        let rest: Vec<&str> = lines
            .clone()
            .take_while(|l| !l.trim().starts_with("<!-- figures:"))
            .collect();
        if let Some(end) = rest.iter().position(|l| l.trim() == END) {
            for _ in 0..=end {
                lines.next();
            }
        }
        let names: Vec<&str> = names.split_whitespace().collect();
        let table = if names == ["headline"] {
            headline_table(&headline, &targets, &figures)?
        } else {
            section_table(&names, &figures)?
        };
        out.push_str(&table);
        out.push_str(END);
        out.push('\n');
    }
    Ok(out)
}

/// The words of the doc's `<!-- KEY: … -->` comment.
fn comment_words(doc: &str, key: &str) -> Vec<String> {
    let open = format!("<!-- {key}:");
    doc.lines()
        .filter_map(|l| l.trim().strip_prefix(open.as_str()))
        .filter_map(|r| r.strip_suffix("-->"))
        .flat_map(|r| r.split_whitespace().map(str::to_owned))
        .collect()
}

/// The doc's `<!-- targets: NAME=TEXT; … -->`, by name.
fn targets(doc: &str) -> Vec<(String, String)> {
    doc.lines()
        .filter_map(|l| l.trim().strip_prefix("<!-- targets:"))
        .filter_map(|r| r.strip_suffix("-->"))
        .flat_map(|r| r.split(';'))
        .filter_map(|pair| {
            let (name, text) = pair.split_once('=')?;
            Some((name.trim().to_owned(), text.trim().to_owned()))
        })
        .collect()
}

fn measured_line(baseline: &Value) -> String {
    let commit = baseline["commit"].as_str().unwrap_or("?");
    let secs = baseline["measured_unix"].as_i64().unwrap_or(0);
    // Groups re-measured on their own since (`cargo xtask bench NAME --save`).
    let mut later = String::new();
    if let Some(partial) = baseline["partial"].as_object() {
        for (group, run) in partial {
            if let (Some(c), Some(t)) = (run["commit"].as_str(), run["measured_unix"].as_i64()) {
                later.push_str(&format!(
                    "; `{group}/` {} UTC at `{c}` (`cargo xtask bench {group} --save`)",
                    utc(t)
                ));
            }
        }
    }
    format!(
        "Measured: {} UTC at commit `{commit}`, one full `cargo xtask bench --save` on the \
         project's 2-core machine (`bench/baseline.json`){later}.",
        utc(secs)
    )
}

/// `secs` since the epoch as `YYYY-MM-DD HH:MM` (UTC), without a date crate.
fn utc(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60
    )
}

fn headline_table(
    names: &[String],
    targets: &[(String, String)],
    figures: &[Value],
) -> anyhow::Result<String> {
    let mut t = String::from("| figure | Ravi | peer | ratio | target |\n|---|---|---|---|---|\n");
    for name in names {
        let f = figures
            .iter()
            .find(|f| f["bench"].as_str() == Some(name.as_str()))
            .with_context(|| format!("the headline names `{name}`, which the baseline lacks"))?;
        let target = targets
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, t)| t.as_str());
        t.push_str(&format!("{} {target} |\n", row(f)));
    }
    Ok(t)
}

fn section_table(prefixes: &[&str], figures: &[Value]) -> anyhow::Result<String> {
    let mut t = String::from("| figure | Ravi | peer | ratio |\n|---|---|---|---|\n");
    let named = |f: &Value, p: &str| f["bench"].as_str().unwrap_or_default().starts_with(p);
    // Each name must still find a figure: one renamed in the bench is then an error, not a
    // row that quietly disappears.
    if let Some(missing) = prefixes
        .iter()
        .find(|p| !figures.iter().any(|f| named(f, p)))
    {
        bail!("no figure of the baseline starts with `{missing}`");
    }
    for f in figures {
        if prefixes.iter().any(|p| named(f, p)) {
            t.push_str(&row(f));
            t.push('\n');
        }
    }
    Ok(t)
}

/// `| name | value unit | peer: value unit | ratio |`.
fn row(f: &Value) -> String {
    let unit = f["unit"].as_str().unwrap_or("");
    let value = format!("{} {unit}", num(&f["value"]));
    let peer = match (f["peer"].as_str(), f["peer_value"].is_null()) {
        (Some(p), false) => format!("{p}: {} {unit}", num(&f["peer_value"])),
        (Some(p), true) => p.to_owned(),
        (None, _) => "—".to_owned(),
    };
    let ratio = if f["ratio"].is_null() {
        "—".to_owned()
    } else {
        format!("{}×", num(&f["ratio"]))
    };
    format!(
        "| `{}` | {} | {} | {ratio} |",
        f["bench"].as_str().unwrap_or("?"),
        value.trim(),
        peer.replace('|', "/")
    )
}

/// Three significant figures, no exponent.
fn num(v: &Value) -> String {
    let Some(x) = v.as_f64() else {
        return v.to_string();
    };
    let a = x.abs();
    if a >= 100.0 || a == 0.0 {
        let rounded = x.round();
        if rounded.abs() >= 1_000.0 {
            group(rounded as i64)
        } else {
            format!("{rounded}")
        }
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        let digits = (-a.log10()).ceil() as usize + 2;
        format!("{x:.digits$}")
    }
}

/// `1234567` as `1,234,567`.
fn group(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn baseline() -> Value {
        json!({"commit": "abc1234", "measured_unix": 1_796_601_600, "figures": [
            {"bench": "invoker/added_per_call", "value": 412.3, "unit": "ns/call",
             "peer": null, "peer_value": null, "ratio": null},
            {"bench": "invoker/noop_pipeline", "value": 455.0, "unit": "ns/call",
             "peer": "direct execute", "peer_value": 57.0, "ratio": 0.1253},
            {"bench": "store/safe_call_added_sqlite", "value": 12345.6, "unit": "ns",
             "peer": "LangGraph", "peer_value": 98765.4, "ratio": 8.0},
        ]})
    }

    #[test]
    fn tables_are_written_between_their_markers_and_rewritten_in_place() {
        let doc = "# B\n\nMeasured: later\n\n<!-- headline: invoker/noop_pipeline -->\n\
                   <!-- targets: invoker/noop_pipeline=< 1 µs -->\n<!-- figures: headline -->\n\n\
                   ## invoker\n<!-- figures: invoker/ -->\nprose\n";
        let once = render(doc, &baseline()).unwrap();
        assert!(
            once.contains("Measured: 2026-12-07 00:00 UTC at commit `abc1234`"),
            "{once}"
        );
        assert!(
            once.contains("| `invoker/noop_pipeline` | 455 ns/call | direct execute: 57.0 ns/call | 0.125× | < 1 µs |"),
            "{once}"
        );
        assert!(
            once.contains("| `invoker/added_per_call` | 412 ns/call | — | — |"),
            "{once}"
        );
        assert!(!once.contains("store/"), "{once}");
        assert!(once.contains("<!-- /figures -->\nprose\n"), "{once}");
        // Rendering the rendered doc again changes nothing: old tables are replaced, not kept.
        assert_eq!(render(&once, &baseline()).unwrap(), once);
    }

    #[test]
    fn a_name_the_baseline_lacks_is_an_error_naming_it() {
        let doc = "<!-- headline: gone/figure -->\n<!-- figures: headline -->\n";
        let err = render(doc, &baseline()).unwrap_err().to_string();
        assert!(err.contains("gone/figure"), "{err}");
        let err = render("<!-- figures: nothing/ -->\n", &baseline())
            .unwrap_err()
            .to_string();
        assert!(err.contains("nothing/"), "{err}");
        // One name of several that matches nothing is an error too, not a quiet gap.
        let err = render("<!-- figures: invoker/ gone/ -->\n", &baseline())
            .unwrap_err()
            .to_string();
        assert!(err.contains("`gone/`"), "{err}");
    }

    #[test]
    fn a_new_marker_above_an_old_table_keeps_the_old_table_and_the_prose_between() {
        let old = render("<!-- figures: store/ -->\nafter\n", &baseline()).unwrap();
        let doc = format!("<!-- figures: invoker/ -->\nbetween\n{old}");
        let new = render(&doc, &baseline()).unwrap();
        assert!(new.contains("between\n<!-- figures: store/ -->"), "{new}");
        assert!(new.contains("store/safe_call_added_sqlite"), "{new}");
        assert!(new.contains("invoker/noop_pipeline"), "{new}");
        assert_eq!(render(&new, &baseline()).unwrap(), new);
    }

    #[test]
    fn numbers_keep_three_significant_figures() {
        assert_eq!(num(&json!(12345.6)), "12,346");
        assert_eq!(num(&json!(412.3)), "412");
        assert_eq!(num(&json!(41.23)), "41.2");
        assert_eq!(num(&json!(4.123)), "4.12");
        assert_eq!(num(&json!(0.01234)), "0.0123");
        assert_eq!(utc(0), "1970-01-01 00:00");
    }
}

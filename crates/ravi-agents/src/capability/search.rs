//! The ranking behind `CapabilityRegistry::search`: BM25 over a tool's name, tags, aliases,
//! category and description, plus boosts for exact name, alias, tag and category matches.
//!
//! Text is lower-cased, split on anything but letters and digits (so `send_email` is two
//! words), stripped of stop words and reduced by a light suffix stemmer (`files` → `file`,
//! `sending` → `send`). Query words also match a small table of tool-vocabulary synonyms
//! (`remove` ~ `delete`) at half weight, which is what lets paraphrases find a tool whose
//! description uses the other word.

use std::collections::HashMap;

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Field weights: a word in the name says more than one in the description.
pub(crate) const W_NAME: f64 = 3.0;
pub(crate) const W_ALIAS: f64 = 2.5;
pub(crate) const W_TAG: f64 = 2.0;
pub(crate) const W_CATEGORY: f64 = 1.0;
pub(crate) const W_DESCRIPTION: f64 = 1.0;
pub(crate) const W_PARAMETER: f64 = 1.0;

const STOP: [&str; 44] = [
    "a", "an", "the", "to", "of", "for", "in", "on", "and", "or", "with", "my", "me", "i", "from",
    "into", "by", "is", "it", "this", "that", "all", "some", "what", "how", "do", "can", "you",
    "please", "using", "use", "be", "as", "at", "its", "are", "want", "need", "which", "about",
    "our", "we", "given", "any",
];

/// Groups of words tools use interchangeably.
const SYNONYMS: &[&[&str]] = &[
    &[
        "delete", "remove", "erase", "drop", "destroy", "purge", "trash",
    ],
    &["create", "make", "new", "add", "open", "start", "generate"],
    &["list", "show", "enumerate", "browse", "index", "all"],
    &[
        "search", "find", "look", "locate", "query", "lookup", "grep",
    ],
    &[
        "read", "get", "fetch", "view", "retrieve", "load", "open", "cat",
    ],
    &["write", "save", "store", "put", "persist"],
    &["run", "execute", "launch", "invoke", "exec"],
    &["send", "post", "deliver", "message", "notify", "dm", "mail"],
    &["update", "edit", "modify", "change", "patch", "rename"],
    &["download", "fetch", "pull"],
    &["upload", "push", "publish"],
    &["image", "picture", "photo", "png", "jpeg", "screenshot"],
    &["chart", "plot", "graph", "visualize", "diagram"],
    &[
        "event",
        "meeting",
        "appointment",
        "calendar",
        "schedule",
        "call",
    ],
    &["free", "available", "availability", "busy"],
    &["ocr", "scan", "scanned"],
    &["text", "word", "words", "wording"],
    &["issue", "ticket", "bug"],
    &["document", "doc", "page", "note"],
    &["file", "document"],
    &["folder", "directory", "dir"],
    &["email", "mail", "gmail", "inbox"],
    &["translate", "translation"],
    &["summarize", "summary", "tldr", "digest"],
    &["weather", "forecast", "temperature"],
    &["container", "docker"],
    &["deploy", "release", "rollout", "ship"],
    &["stop", "kill", "terminate", "halt", "cancel"],
    &["table", "spreadsheet", "sheet", "csv"],
    &["sql", "database", "db", "query"],
    &["user", "member", "person", "people", "contact"],
    &["comment", "reply", "respond"],
    &["merge", "combine", "join"],
    &["audio", "sound", "voice", "speech"],
    &["transcribe", "transcription", "dictate"],
    &["pr", "pull", "merge"],
    &["repo", "repository", "project"],
    &["cost", "price", "billing", "invoice", "payment"],
    &["log", "logs", "trace"],
    &["secret", "password", "credential", "key"],
    &["link", "url", "webpage", "website", "site", "page"],
];

/// Phrasal verbs read as their one-word meaning before splitting.
const PHRASES: [(&str, &str); 8] = [
    ("set up", "create"),
    ("look up", "search"),
    ("look for", "search"),
    ("work out", "calculate"),
    ("get rid of", "delete"),
    ("shut down", "stop"),
    ("sign up", "register"),
    ("clean up", "clean"),
];

/// `text` with identifier boundaries made spaces: `FindRestaurants` → `Find Restaurants`,
/// `getHTTPStatus` → `get HTTP Status`, `Events_3` → `Events 3`, so camelCase names are
/// words like snake_case ones.
pub(crate) fn split_identifiers(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 8);
    for (i, &c) in chars.iter().enumerate() {
        if i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let boundary = (prev.is_lowercase() && c.is_uppercase())
                || (prev.is_uppercase() && c.is_uppercase() && next_lower)
                || (prev.is_alphabetic() && c.is_ascii_digit())
                || (prev.is_ascii_digit() && c.is_alphabetic());
            if boundary {
                out.push(' ');
            }
        }
        out.push(c);
    }
    out
}

/// Lower-case words of `text`, stop words removed, stemmed.
pub(crate) fn tokenize(text: &str) -> Vec<String> {
    let mut text = split_identifiers(text).to_lowercase();
    for (phrase, word) in PHRASES {
        if text.contains(phrase) {
            text = text.replace(phrase, word);
        }
    }
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect()
}

/// A light suffix stemmer; identical on both sides, so it only has to be consistent.
pub(crate) fn stem(word: &str) -> String {
    let n = word.chars().count();
    if n <= 3 || !word.is_ascii() {
        return word.to_owned();
    }
    if let Some(s) = word.strip_suffix("ies") {
        return format!("{s}y");
    }
    for suffix in ["sses", "shes", "ches", "xes"] {
        if word.ends_with(suffix) {
            return word[..word.len() - 2].to_owned();
        }
    }
    if let Some(s) = word.strip_suffix("ing")
        && s.len() >= 3
    {
        return undouble(s);
    }
    if let Some(s) = word.strip_suffix("ed")
        && s.len() >= 3
    {
        return undouble(s);
    }
    if word.ends_with('s') && !word.ends_with("ss") && !word.ends_with("us") {
        return word[..word.len() - 1].to_owned();
    }
    word.to_owned()
}

fn undouble(s: &str) -> String {
    let b = s.as_bytes();
    if b.len() >= 2
        && b[b.len() - 1] == b[b.len() - 2]
        && !matches!(b[b.len() - 1], b'l' | b's' | b'z')
    {
        s[..s.len() - 1].to_owned()
    } else {
        s.to_owned()
    }
}

/// The synonyms of a (stemmed) word, stemmed, excluding the word itself. The table is
/// stemmed once, on first use.
pub(crate) fn synonyms(word: &str) -> &'static [String] {
    static TABLE: std::sync::OnceLock<HashMap<String, Vec<String>>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut table: HashMap<String, Vec<String>> = HashMap::new();
        for group in SYNONYMS {
            let stems: Vec<String> = group.iter().map(|g| stem(g)).collect();
            for w in &stems {
                let entry = table.entry(w.clone()).or_default();
                for s in &stems {
                    if s != w && !entry.contains(s) {
                        entry.push(s.clone());
                    }
                }
            }
        }
        table
    });
    table.get(word).map_or(&[], Vec::as_slice)
}

/// An inverted index with weighted term frequencies per document.
#[derive(Debug, Default, Clone)]
pub(crate) struct Index {
    postings: HashMap<String, Vec<(usize, f64)>>,
    lengths: Vec<f64>,
    total_length: f64,
}

impl Index {
    /// Adds document `doc` (ids must be dense and added in order) from weighted fields.
    pub(crate) fn add(&mut self, doc: usize, fields: &[(f64, &str)]) {
        let mut tf: HashMap<String, f64> = HashMap::new();
        let mut len = 0.0;
        for (weight, text) in fields {
            for t in tokenize(text) {
                *tf.entry(t).or_default() += weight;
                len += weight;
            }
        }
        for (term, f) in tf {
            self.postings.entry(term).or_default().push((doc, f));
        }
        if self.lengths.len() <= doc {
            self.lengths.resize(doc + 1, 0.0);
        }
        self.lengths[doc] = len;
        self.total_length += len;
    }

    /// BM25 scores of every document, dense (0 where no query term matched), and the
    /// documents that matched, in first-match order. Each synonym counts at half weight, and
    /// a term counts once per document however many of its synonyms hit it. Dense arrays
    /// rather than maps: a long query against thousands of tools touches most postings.
    pub(crate) fn scores(&self, query_terms: &[String]) -> (Vec<f64>, Vec<usize>) {
        let n = self.lengths.len();
        let avg = if n > 0 {
            self.total_length / n as f64
        } else {
            1.0
        };
        let mut scores = vec![0.0f64; n];
        let mut matched = Vec::new();
        let mut best = vec![0.0f64; n];
        let mut touched: Vec<usize> = Vec::new();
        let mut seen_terms: Vec<&str> = Vec::new();
        for term in query_terms {
            // A repeated query word adds nothing new.
            if seen_terms.contains(&term.as_str()) {
                continue;
            }
            seen_terms.push(term);
            let variants = std::iter::once((term.as_str(), 1.0))
                .chain(synonyms(term).iter().map(|s| (s.as_str(), 0.5)));
            for (t, w) in variants {
                let Some(posting) = self.postings.get(t) else {
                    continue;
                };
                let df = posting.len() as f64;
                let idf = (1.0 + (n as f64 - df + 0.5) / (df + 0.5)).ln();
                for &(doc, tf) in posting {
                    let dl = self.lengths.get(doc).copied().unwrap_or(avg);
                    let s = w * idf * (tf * (K1 + 1.0)) / (tf + K1 * (1.0 - B + B * dl / avg));
                    let Some(b) = best.get_mut(doc) else {
                        continue;
                    };
                    if *b == 0.0 {
                        touched.push(doc);
                    }
                    if s > *b {
                        *b = s;
                    }
                }
            }
            for doc in touched.drain(..) {
                if let (Some(b), Some(total)) = (best.get_mut(doc), scores.get_mut(doc)) {
                    if *total == 0.0 {
                        matched.push(doc);
                    }
                    *total += *b;
                    *b = 0.0;
                }
            }
        }
        (scores, matched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenize_splits_names_and_stems() {
        assert_eq!(tokenize("send_email"), vec!["send", "email"]);
        assert_eq!(
            tokenize("Listing the files in a directory"),
            vec!["list", "file", "directory"]
        );
        assert_eq!(stem("queries"), "query");
        assert_eq!(stem("running"), "run");
        assert_eq!(stem("status"), "status");
        assert_eq!(stem("boxes"), "box");
        assert_eq!(
            tokenize("Restaurants_2_FindRestaurants getHTTPStatus"),
            vec![
                "restaurant",
                "2",
                "find",
                "restaurant",
                "get",
                "http",
                "status"
            ]
        );
    }

    #[test]
    fn bm25_prefers_rarer_and_denser_matches() {
        let mut idx = Index::default();
        idx.add(0, &[(1.0, "read a file from disk")]);
        idx.add(1, &[(1.0, "delete a file from disk")]);
        idx.add(2, &[(3.0, "delete_file"), (1.0, "remove a file")]);
        let (s, matched) = idx.scores(&tokenize("delete file"));
        assert!(s[2] > s[1] && s[1] > s[0]);
        assert_eq!(matched.len(), 3);
        let (s, matched) = idx.scores(&tokenize("erase"));
        assert!(s[1] > 0.0 && s[2] > 0.0, "synonyms reach `delete`");
        assert_eq!(s[0], 0.0);
        assert_eq!(matched, [1, 2]);
    }
}

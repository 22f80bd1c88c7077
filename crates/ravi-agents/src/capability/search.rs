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

/// Lower-case words of `text`, stop words removed, stemmed.
pub(crate) fn tokenize(text: &str) -> Vec<String> {
    let mut text = text.to_lowercase();
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

    /// BM25 scores of every document matching any query term; each synonym counts at half
    /// weight, and a term counts once per query however many synonyms hit it.
    pub(crate) fn scores(&self, query_terms: &[String]) -> HashMap<usize, f64> {
        let n = self.lengths.len() as f64;
        let avg = if n > 0.0 { self.total_length / n } else { 1.0 };
        let mut scores: HashMap<usize, f64> = HashMap::new();
        for term in query_terms {
            let mut best: HashMap<usize, f64> = HashMap::new();
            let mut variants = vec![(term.clone(), 1.0)];
            variants.extend(synonyms(term).iter().map(|s| (s.clone(), 0.5)));
            for (t, w) in variants {
                let Some(posting) = self.postings.get(&t) else {
                    continue;
                };
                let df = posting.len() as f64;
                let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                for &(doc, tf) in posting {
                    let dl = self.lengths.get(doc).copied().unwrap_or(avg);
                    let s = w * idf * (tf * (K1 + 1.0)) / (tf + K1 * (1.0 - B + B * dl / avg));
                    let e = best.entry(doc).or_default();
                    if s > *e {
                        *e = s;
                    }
                }
            }
            for (doc, s) in best {
                *scores.entry(doc).or_default() += s;
            }
        }
        scores
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
    }

    #[test]
    fn bm25_prefers_rarer_and_denser_matches() {
        let mut idx = Index::default();
        idx.add(0, &[(1.0, "read a file from disk")]);
        idx.add(1, &[(1.0, "delete a file from disk")]);
        idx.add(2, &[(3.0, "delete_file"), (1.0, "remove a file")]);
        let s = idx.scores(&tokenize("delete file"));
        assert!(s[&2] > s[&1] && s[&1] > s[&0]);
        let s = idx.scores(&tokenize("erase"));
        assert!(
            s.contains_key(&1) && s.contains_key(&2),
            "synonyms reach `delete`"
        );
    }
}

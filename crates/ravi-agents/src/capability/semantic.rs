//! Meaning-level similarity for capability search, with no model at query time.
//!
//! Lexical search (BM25 plus synonyms) only finds a tool when the query shares words with its
//! description; "rip the soundtrack from this mp4" never meets "extract the audio track". A
//! sentence-embedding model closes that gap but costs a transformer per query. This module uses
//! a *static* distillation of one (all-MiniLM-L6-v2, Apache-2.0, the way model2vec does it):
//! every WordPiece token of the model's vocabulary has a fixed 128-d vector computed once by
//! the model, stored int8-quantised in `data/token_vectors.bin` (3.9 MB, built by
//! `xtask/embeddings/distill.py`, format documented there). A text's vector is the mean of its
//! tokens' vectors, L2-normalised; similarity is the cosine. Embedding a query takes
//! microseconds and needs neither a network nor a runtime.
//!
//! The tokenizer is BERT-uncased's: clean the text, space out CJK ideographs, lower-case, strip
//! accents, split on whitespace and punctuation, then WordPiece (longest match, `##`
//! continuations, a word that cannot be covered becomes the unknown token and adds nothing).
//! `xtask/embeddings/check_table.py` is the reference implementation the tests here agree with.

use std::collections::HashMap;
use std::sync::OnceLock;

use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_normalization::UnicodeNormalization as _;

/// The committed table (see the module docs); empty without the `semantic-search` feature.
#[cfg(feature = "semantic-search")]
static TABLE_BYTES: &[u8] = include_bytes!("../../data/token_vectors.bin");
#[cfg(not(feature = "semantic-search"))]
static TABLE_BYTES: &[u8] = &[];

/// A text's normalised vector.
pub(crate) type Vector = Vec<f32>;

/// The parsed token table.
pub(crate) struct TokenTable {
    dims: usize,
    max_chars: usize,
    prefix: String,
    /// Token → index into `scales` (and, times `dims`, into `values`).
    vocab: HashMap<String, u32>,
    /// Per-token dequantisation scale; 0 when the token has no vector.
    scales: Vec<f32>,
    /// Offset of each token's int8 values in `values` (unused when its scale is 0).
    offsets: Vec<u32>,
    values: Vec<i8>,
}

/// Why the table could not be read: only possible if the committed file is corrupt, which the
/// unit tests would catch first; search then falls back to lexical ranking alone.
#[derive(Debug)]
pub(crate) struct TableError(String);

impl std::fmt::Display for TableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "token vector table: {}", self.0)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], TableError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| TableError(format!("truncated at byte {}", self.at)))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, TableError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn f32(&mut self) -> Result<f32, TableError> {
        Ok(f32::from_bits(self.u32()?))
    }
    fn string(&mut self) -> Result<String, TableError> {
        let n = usize::from(self.take(1)?[0]);
        let b = self.take(n)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| TableError(format!("a token before byte {} is not UTF-8", self.at)))
    }
}

impl TokenTable {
    /// Parses a table in the `RAVITV01` format.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, TableError> {
        let mut r = Reader { bytes, at: 0 };
        if r.take(8)? != b"RAVITV01" {
            return Err(TableError("bad magic (expected RAVITV01)".into()));
        }
        let version = r.u32()?;
        if version != 1 {
            return Err(TableError(format!("format version {version}, expected 1")));
        }
        let dims = r.u32()? as usize;
        let count = r.u32()? as usize;
        let flags = r.u32()?;
        if flags != 0b1111 {
            return Err(TableError(format!(
                "tokenizer flags {flags:#b}; only BERT-uncased (0b1111) is supported"
            )));
        }
        let max_chars = r.u32()? as usize;
        let _sif = r.f32()?;
        let prefix = r.string()?;
        let _unk = r.string()?;
        let mut vocab = HashMap::with_capacity(count);
        let mut scales = Vec::with_capacity(count);
        let mut offsets = Vec::with_capacity(count);
        let mut values: Vec<i8> = Vec::with_capacity(count * dims);
        for i in 0..count {
            let token = r.string()?;
            let scale = r.f32()?;
            offsets.push(u32::try_from(values.len()).unwrap_or(u32::MAX));
            if scale != 0.0 {
                values.extend(r.take(dims)?.iter().map(|&b| i8::from_le_bytes([b])));
            }
            scales.push(scale);
            vocab.insert(token, u32::try_from(i).unwrap_or(u32::MAX));
        }
        if r.at != bytes.len() {
            return Err(TableError(format!(
                "{} trailing bytes after {count} tokens",
                bytes.len() - r.at
            )));
        }
        Ok(Self {
            dims,
            max_chars,
            prefix,
            vocab,
            scales,
            offsets,
            values,
        })
    }

    /// The committed table, parsed once; `None` (lexical search only) if it is unreadable.
    pub(crate) fn get() -> Option<&'static TokenTable> {
        static TABLE: OnceLock<Option<TokenTable>> = OnceLock::new();
        TABLE
            .get_or_init(|| match TokenTable::parse(TABLE_BYTES) {
                Err(_) if TABLE_BYTES.is_empty() => None,
                Ok(t) => Some(t),
                Err(e) => {
                    tracing::warn!(error = %e, "capability search runs without semantic vectors");
                    None
                }
            })
            .as_ref()
    }

    /// The length of every vector.
    pub(crate) fn dims(&self) -> usize {
        self.dims
    }

    /// WordPiece ids of `text`; `None` stands for the unknown token.
    pub(crate) fn token_ids(&self, text: &str) -> Vec<Option<u32>> {
        let mut ids = Vec::new();
        for word in basic_tokenize(text) {
            self.wordpiece(&word, &mut ids);
        }
        ids
    }

    fn wordpiece(&self, word: &str, out: &mut Vec<Option<u32>>) {
        wordpiece(&self.vocab, &self.prefix, self.max_chars, word, out);
    }

    /// The normalised mean vector of `text`'s tokens, or `None` when no token has a vector.
    pub(crate) fn embed(&self, text: &str) -> Option<Vector> {
        let mut sum = vec![0f32; self.dims];
        let mut n = 0u32;
        for id in self.token_ids(text).into_iter().flatten() {
            let i = id as usize;
            let scale = self.scales.get(i).copied().unwrap_or(0.0);
            if scale == 0.0 {
                continue;
            }
            let at = self.offsets.get(i).copied().unwrap_or(0) as usize;
            let Some(q) = self.values.get(at..at + self.dims) else {
                continue;
            };
            for (s, &v) in sum.iter_mut().zip(q) {
                *s += scale * f32::from(v);
            }
            n += 1;
        }
        if n == 0 {
            return None;
        }
        // The mean's scale does not change the direction; normalising is enough.
        let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm == 0.0 || !norm.is_finite() {
            return None;
        }
        for s in &mut sum {
            *s /= norm;
        }
        Some(sum)
    }
}

/// The cosine of two normalised vectors.
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f32 {
    // Eight running sums let the compiler vectorise the loop (one sum would serialise it).
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + ra.iter().zip(rb).map(|(x, y)| x * y).sum::<f32>()
}

/// Rows of normalised vectors, one per registry entry, in one buffer.
#[derive(Debug, Clone, Default)]
pub(crate) struct Matrix {
    dims: usize,
    rows: Vec<f32>,
    has_vector: Vec<bool>,
}

impl Matrix {
    /// Appends a row (a zero row marked absent for `None`).
    pub(crate) fn push_row(&mut self, v: Option<Vector>) {
        match v {
            Some(v) => {
                if self.dims == 0 {
                    // Rows pushed before the first vector were zero-width: widen them.
                    self.dims = v.len();
                    self.rows = vec![0.0; self.dims * self.has_vector.len()];
                }
                if v.len() == self.dims {
                    self.rows.extend_from_slice(&v);
                    self.has_vector.push(true);
                    return;
                }
                self.push_absent();
            }
            None => self.push_absent(),
        }
    }

    fn push_absent(&mut self) {
        self.rows.extend(std::iter::repeat_n(0.0, self.dims));
        self.has_vector.push(false);
    }

    /// The cosine of every row with `query`; `None` for rows without a vector.
    pub(crate) fn cosines(&self, query: &[f32]) -> Vec<Option<f32>> {
        if self.dims == 0 || query.len() != self.dims {
            return vec![None; self.has_vector.len()];
        }
        self.rows
            .chunks_exact(self.dims)
            .zip(&self.has_vector)
            .map(|(row, &has)| has.then(|| cosine(row, query)))
            .collect()
    }
}

fn is_punctuation(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_punctuation();
    }
    matches!(
        get_general_category(c),
        GeneralCategory::ConnectorPunctuation
            | GeneralCategory::DashPunctuation
            | GeneralCategory::OpenPunctuation
            | GeneralCategory::ClosePunctuation
            | GeneralCategory::InitialPunctuation
            | GeneralCategory::FinalPunctuation
            | GeneralCategory::OtherPunctuation
    )
}

fn is_cjk(c: char) -> bool {
    matches!(u32::from(c),
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B820..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

/// WordPiece of one word: the longest prefix in `vocab`, then the longest `prefix`-marked
/// continuation from where it stopped, and so on; a word that cannot be covered, or is longer
/// than `max_chars`, is one unknown token (`None`).
pub(crate) fn wordpiece(
    vocab: &HashMap<String, u32>,
    prefix: &str,
    max_chars: usize,
    word: &str,
    out: &mut Vec<Option<u32>>,
) {
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    if chars.len() > max_chars {
        out.push(None);
        return;
    }
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut key = String::new();
    while start < chars.len() {
        let mut end = chars.len();
        let mut found = None;
        while start < end {
            let from = chars[start].0;
            let to = chars.get(end).map_or(word.len(), |c| c.0);
            key.clear();
            if start > 0 {
                key.push_str(prefix);
            }
            key.push_str(&word[from..to]);
            if let Some(&id) = vocab.get(key.as_str()) {
                found = Some(id);
                break;
            }
            end -= 1;
        }
        match found {
            Some(id) => pieces.push(Some(id)),
            None => {
                out.push(None);
                return;
            }
        }
        start = end;
    }
    out.extend(pieces);
}

/// BERT's basic tokenizer (uncased): the words WordPiece then splits.
pub(crate) fn basic_tokenize(text: &str) -> Vec<String> {
    let mut cleaned = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\0' || c == '\u{FFFD}' {
            continue;
        }
        let cat = get_general_category(c);
        if matches!(c, '\t' | '\n' | '\r') || cat == GeneralCategory::SpaceSeparator {
            cleaned.push(' ');
        } else if matches!(cat, GeneralCategory::Control | GeneralCategory::Format) {
            continue;
        } else if is_cjk(c) {
            cleaned.push(' ');
            cleaned.push(c);
            cleaned.push(' ');
        } else {
            cleaned.push(c);
        }
    }
    let lowered: String = cleaned
        .to_lowercase()
        .nfd()
        .filter(|&c| get_general_category(c) != GeneralCategory::NonspacingMark)
        .collect();
    let mut words = Vec::new();
    for w in lowered.split_whitespace() {
        let mut cur = String::new();
        for c in w.chars() {
            if is_punctuation(c) {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
                words.push(c.to_string());
            } else {
                cur.push(c);
            }
        }
        if !cur.is_empty() {
            words.push(cur);
        }
    }
    words
}

#[cfg(all(test, feature = "semantic-search"))]
mod tests {
    use super::*;

    fn table() -> &'static TokenTable {
        match TokenTable::get() {
            Some(t) => t,
            None => unreachable!("the committed table parses"),
        }
    }

    fn pieces(text: &str) -> Vec<String> {
        let t = table();
        let names: HashMap<u32, &str> = t.vocab.iter().map(|(k, &v)| (v, k.as_str())).collect();
        t.token_ids(text)
            .into_iter()
            .map(|id| {
                id.and_then(|i| names.get(&i).copied())
                    .unwrap_or("[UNK]")
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn the_committed_table_parses() {
        let t = table();
        assert_eq!(t.dims, 128);
        assert_eq!(t.vocab.len(), 29_523);
        assert_eq!(t.scales.iter().filter(|&&s| s != 0.0).count(), 27_623);
    }

    #[test]
    fn tokenizes_like_bert_uncased() {
        // Expected pieces as the reference tokenizer (check_table.py, HF BertTokenizer) gives them.
        assert_eq!(
            pieces("Send_Email now!"),
            ["send", "_", "email", "now", "!"]
        );
        assert_eq!(pieces("Café résumé"), ["cafe", "resume"]);
        assert_eq!(pieces("unaffable"), ["una", "##ffa", "##ble"]);
        assert_eq!(pieces("don’t"), ["don", "’", "t"]);
        assert_eq!(pieces("a\u{0}b\tc"), ["ab", "c"]);
        assert_eq!(pieces(&"x".repeat(101)), ["[UNK]"]);
    }

    #[test]
    fn related_texts_are_closer_than_unrelated_ones() {
        let t = table();
        let v = |s: &str| t.embed(s).unwrap_or_default();
        let audio = v("extract the audio track from a video file");
        let soundtrack = v("rip the soundtrack from this mp4");
        let invoice = v("create an invoice for a customer");
        assert!(cosine(&audio, &soundtrack) > cosine(&invoice, &soundtrack));
        assert!((cosine(&audio, &audio) - 1.0).abs() < 1e-5);
        assert_eq!(t.embed("   "), None);
    }

    #[test]
    fn matrix_rows_stay_aligned_whatever_comes_first() {
        let mut m = Matrix::default();
        m.push_row(None);
        m.push_row(Some(vec![1.0, 0.0]));
        m.push_row(Some(vec![0.0, 1.0, 0.5]));
        m.push_row(Some(vec![0.0, 1.0]));
        assert_eq!(
            m.cosines(&[0.0, 1.0]),
            vec![None, Some(0.0), None, Some(1.0)]
        );
        assert_eq!(m.cosines(&[1.0]), vec![None; 4]);
    }

    #[test]
    fn cosine_matches_the_plain_sum() {
        let a: Vec<f32> = (0..19).map(|i| i as f32 / 7.0).collect();
        let b: Vec<f32> = (0..19).map(|i| (19 - i) as f32 / 5.0).collect();
        let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((cosine(&a, &b) - plain).abs() < 1e-3);
    }

    #[test]
    fn corrupt_tables_are_refused_with_a_reason() {
        let err = |b: &[u8]| TokenTable::parse(b).err().map(|e| e.to_string());
        assert_eq!(
            err(b"NOTATABLE"),
            Some("token vector table: bad magic (expected RAVITV01)".into())
        );
        let truncated = &TABLE_BYTES[..TABLE_BYTES.len() - 3];
        assert!(err(truncated).is_some_and(|e| e.contains("truncated")));
    }
}

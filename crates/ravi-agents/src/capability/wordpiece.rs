//! BERT's uncased WordPiece tokenizer over a `vocab.txt`, for embedders that run a BERT-family
//! sentence model themselves (`ravi_providers::LocalEmbeddings`). The same
//! normalisation and splitting the static vectors use (see `semantic.rs`), with the model's
//! own vocabulary and ids.

use std::collections::HashMap;

use super::semantic::{basic_tokenize, wordpiece};

/// Why a vocabulary was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VocabError {
    /// A token every BERT vocabulary has is missing.
    #[error("the vocabulary has no {0} token (expected a BERT `vocab.txt`, one token per line)")]
    Missing(&'static str),
    /// More tokens than ids fit in.
    #[error("the vocabulary has {0} tokens, more than fit in 32-bit ids")]
    TooLarge(usize),
}

/// An uncased BERT WordPiece tokenizer (see the module docs).
#[derive(Debug, Clone)]
pub struct WordPiece {
    vocab: HashMap<String, u32>,
    unk: u32,
    cls: u32,
    sep: u32,
}

/// Longer words become the unknown token, as in BERT.
const MAX_CHARS_PER_WORD: usize = 100;

impl WordPiece {
    /// A tokenizer for a `vocab.txt` (one token per line, the line number is its id).
    pub fn from_vocab(text: &str) -> Result<Self, VocabError> {
        let mut vocab = HashMap::new();
        for (i, token) in text.lines().enumerate() {
            let id = u32::try_from(i).map_err(|_| VocabError::TooLarge(i))?;
            vocab
                .entry(token.trim_end_matches('\r').to_owned())
                .or_insert(id);
        }
        let get = |t: &'static str| vocab.get(t).copied().ok_or(VocabError::Missing(t));
        Ok(Self {
            unk: get("[UNK]")?,
            cls: get("[CLS]")?,
            sep: get("[SEP]")?,
            vocab,
        })
    }

    /// `[CLS]`, the pieces of `text`, `[SEP]`, at most `max_len` ids in all (the pieces are cut
    /// to fit; `max_len` below 2 is taken as 2).
    pub fn encode(&self, text: &str, max_len: usize) -> Vec<u32> {
        let mut pieces = Vec::new();
        for word in basic_tokenize(text) {
            wordpiece(&self.vocab, "##", MAX_CHARS_PER_WORD, &word, &mut pieces);
        }
        let room = max_len.max(2) - 2;
        let mut ids = Vec::with_capacity(pieces.len().min(room) + 2);
        ids.push(self.cls);
        ids.extend(pieces.into_iter().take(room).map(|p| p.unwrap_or(self.unk)));
        ids.push(self.sep);
        ids
    }

    /// The id of `token`, if the vocabulary has it.
    pub fn id(&self, token: &str) -> Option<u32> {
        self.vocab.get(token).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VOCAB: &str = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nsend\nan\nemail\n##s\nun\n##aff\n##able\n!\n";

    #[test]
    fn encodes_like_bert_with_the_models_ids() {
        let wp = WordPiece::from_vocab(VOCAB).unwrap();
        assert_eq!(wp.encode("Send emails!", 16), [2, 4, 6, 7, 11, 3]);
        assert_eq!(wp.encode("unaffable zzz", 16), [2, 8, 9, 10, 1, 3]);
        assert_eq!(wp.encode("send an email", 4), [2, 4, 5, 3], "cut to fit");
        assert_eq!(wp.encode("", 0), [2, 3]);
        assert_eq!(wp.id("email"), Some(6));
    }

    #[test]
    fn a_vocabulary_without_the_special_tokens_is_refused() {
        let err = WordPiece::from_vocab("a\nb\n").unwrap_err();
        assert!(err.to_string().contains("no [UNK] token"), "{err}");
    }
}

//! Token counts of what a model is sent, by OpenAI's public tokenizer (tiktoken's
//! `o200k_base`, through the `tiktoken-rs` crate). Anthropic publishes no tokenizer; its
//! counts differ by some percent, and bytes are given beside every count.

/// The encoding counts are made with.
pub const ENCODING: &str = "o200k_base";

/// How many `o200k_base` tokens `text` is.
pub fn count(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton()
        .encode_with_special_tokens(text)
        .len()
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_tokens_not_bytes() {
        assert_eq!(super::count(""), 0);
        let n = super::count("Run a short Python script that calls tools as functions.");
        assert!((8..=14).contains(&n), "{n}");
    }
}

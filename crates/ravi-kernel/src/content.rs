//! Content blocks: the unit of everything a tool returns and a model reads.
//!
//! A tool result is a list of blocks rather than a string because providers and MCP carry
//! images, audio and links natively; flattening them to text early would lose them for good.

use std::borrow::Cow;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// Where the bytes of a media block live.
///
/// Inline data is base64 on the wire (every provider API and MCP expect that); a URL is passed
/// through untouched so a provider can fetch it itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum MediaSource {
    /// The bytes, base64-encoded (standard alphabet, padded).
    Base64 {
        /// The encoded bytes.
        data: String,
    },
    /// A location the consumer fetches on its own.
    Url {
        /// An absolute URL.
        url: String,
    },
}

impl MediaSource {
    /// Encodes raw bytes as an inline source.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        Self::Base64 {
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }

    /// Decodes inline data; `None` for a URL source or data that is not valid base64.
    pub fn decode(&self) -> Option<Vec<u8>> {
        match self {
            Self::Base64 { data } => base64::engine::general_purpose::STANDARD.decode(data).ok(),
            Self::Url { .. } => None,
        }
    }
}

/// One piece of tool output or message content.
///
/// The variants are the intersection of what OpenAI, Anthropic, Gemini and MCP can carry, so a
/// block survives every hop; `Json` keeps machine-readable output machine-readable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text itself.
        text: String,
    },
    /// An image (PNG, JPEG, GIF, WebP …).
    Image {
        /// IANA media type, e.g. `image/png`.
        media_type: String,
        /// The bytes or where to fetch them.
        source: MediaSource,
    },
    /// An audio clip.
    Audio {
        /// IANA media type, e.g. `audio/wav`.
        media_type: String,
        /// The bytes or where to fetch them.
        source: MediaSource,
    },
    /// A pointer to a resource the consumer may read (MCP `resource_link`).
    ResourceLink {
        /// The resource URI.
        uri: String,
        /// A short name for display.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// What the resource holds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// The resource's media type, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        media_type: Option<String>,
    },
    /// An embedded JSON value (structured data or an embedded MCP resource).
    Json {
        /// The value.
        value: serde_json::Value,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// An inline image from raw bytes.
    pub fn image_bytes(media_type: impl Into<String>, bytes: &[u8]) -> Self {
        Self::Image {
            media_type: media_type.into(),
            source: MediaSource::from_bytes(bytes),
        }
    }

    /// An inline audio clip from raw bytes.
    pub fn audio_bytes(media_type: impl Into<String>, bytes: &[u8]) -> Self {
        Self::Audio {
            media_type: media_type.into(),
            source: MediaSource::from_bytes(bytes),
        }
    }

    /// The text of a text block, `None` for any other kind.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text { text } => Some(text),
            _ => None,
        }
    }

    /// True for blocks that carry media bytes (images and audio).
    pub fn is_media(&self) -> bool {
        matches!(self, Self::Image { .. } | Self::Audio { .. })
    }

    /// The pieces `piece` makes of `blocks` (given each block's position; blocks it makes
    /// nothing of are skipped) joined by newlines, or `None` when it made none: the one layout
    /// of a result's blocks as text, which each reader fills with its own pieces (the
    /// outcome's text, a script's text, a model's cut text, a provider's text-only slot).
    pub fn join_lines<'a>(
        blocks: &'a [ContentBlock],
        mut piece: impl FnMut(usize, &'a ContentBlock) -> Option<Cow<'a, str>>,
    ) -> Option<String> {
        let mut out: Option<String> = None;
        for (i, block) in blocks.iter().enumerate() {
            let Some(line) = piece(i, block) else {
                continue;
            };
            match &mut out {
                Some(text) => {
                    text.push('\n');
                    text.push_str(&line);
                }
                None => out = Some(line.into_owned()),
            }
        }
        out
    }

    /// The text and JSON blocks of `blocks` (JSON compact), whole, joined by newlines; `None`
    /// when there are none.
    pub fn joined_text(blocks: &[ContentBlock]) -> Option<String> {
        Self::join_lines(blocks, |_, block| match block {
            Self::Text { text } => Some(Cow::Borrowed(text)),
            Self::Json { value } => Some(Cow::Owned(value.to_string())),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_round_trips_bytes() {
        let block = ContentBlock::image_bytes("image/png", &[0, 1, 2, 255]);
        let ContentBlock::Image { source, .. } = &block else {
            unreachable!("constructor builds an image")
        };
        assert_eq!(source.decode(), Some(vec![0, 1, 2, 255]));
        assert!(block.is_media());
        assert_eq!(block.as_text(), None);
    }

    #[test]
    fn url_source_has_no_bytes() {
        let s = MediaSource::Url {
            url: "https://example.com/a.png".into(),
        };
        assert_eq!(s.decode(), None);
    }
}

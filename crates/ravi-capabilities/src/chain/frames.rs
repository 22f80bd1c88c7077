//! What the host reads from a guest's bridge messages, as functions of the bytes alone: where
//! a message lies in guest memory, a batch of calls, the finish record, a file frame of the
//! CPython guest. A malicious script controls every one of these bytes; the host calls these
//! and nothing else to interpret them, so they are fuzzed on their own (`fuzz/`, target
//! `bridge_frames`) without an engine.

use std::ops::Range;

use super::abi::{self, CallRequest, Envelope, Failure, FailureKind, Finish, MAX_BATCH};

/// Largest message a guest may send over the bridge, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// A guest message the host refuses; the run ends with it (a script never sees the bridge's
/// bytes, so only a broken or malicious guest sends one).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The operation code names no operation.
    #[error(transparent)]
    UnknownOp(#[from] abi::UnknownOp),
    /// The payload is not the JSON the operation carries.
    #[error("the guest sent a malformed {what}: {source}")]
    Malformed {
        /// What it should have been.
        what: &'static str,
        /// Why it is not.
        source: serde_json::Error,
    },
    /// The message is larger than [`MAX_MESSAGE_BYTES`].
    #[error("bridge message of {len} bytes exceeds {MAX_MESSAGE_BYTES}")]
    TooLarge {
        /// Its length.
        len: usize,
    },
    /// The message does not lie within the guest's memory (or its pointer or length is
    /// negative).
    #[error("bridge message out of bounds ({ptr}, {len} bytes, in {memory} bytes of memory)")]
    OutOfBounds {
        /// Where the guest said it starts.
        ptr: i64,
        /// Its length as the guest gave it.
        len: i64,
        /// The guest memory's size.
        memory: usize,
    },
}

/// Where the message at `ptr` of `len` bytes lies in a guest memory of `memory` bytes.
pub fn message_range(ptr: i32, len: i32, memory: usize) -> Result<Range<usize>, FrameError> {
    let out = || FrameError::OutOfBounds {
        ptr: i64::from(ptr),
        len: i64::from(len),
        memory,
    };
    let start = usize::try_from(ptr).map_err(|_| out())?;
    let n = usize::try_from(len).map_err(|_| out())?;
    if n > MAX_MESSAGE_BYTES {
        return Err(FrameError::TooLarge { len: n });
    }
    let end = start.checked_add(n).ok_or_else(out)?;
    if end > memory {
        return Err(out());
    }
    Ok(start..end)
}

/// The calls of an [`abi::Op::Call`] message.
pub fn calls(bytes: &[u8]) -> Result<Vec<CallRequest>, FrameError> {
    serde_json::from_slice(bytes).map_err(|source| FrameError::Malformed {
        what: "call batch",
        source,
    })
}

/// The answers to a batch of `n` calls when it is over [`MAX_BATCH`]: a failure for each, and
/// none of them runs. `None` when the batch may run.
pub fn over_batch(n: usize) -> Option<Vec<Envelope>> {
    (n > MAX_BATCH).then(|| {
        let failure = Failure::new(
            FailureKind::Error,
            format!("parallel() takes at most {MAX_BATCH} calls, got {n}"),
        );
        vec![Envelope::Error(failure); n]
    })
}

/// The record of an [`abi::Op::Finish`] message.
pub fn finish(bytes: &[u8]) -> Result<Finish, FrameError> {
    serde_json::from_slice(bytes).map_err(|source| FrameError::Malformed {
        what: "finish record",
        source,
    })
}

/// A file the CPython guest returns (a file frame, after its operation byte): where the script
/// left it under `/tmp`, its media type and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileFrame<'a> {
    pub path: String,
    pub media_type: String,
    pub data: &'a [u8],
}

/// Longest media type a file frame may name.
pub const MAX_MEDIA_TYPE: usize = 255;

/// The file in `frame` — a little-endian `u32` header length, a JSON header `{"path",
/// "media_type"}`, then the bytes — or `None` when the frame is malformed, or names a path
/// outside `/tmp/` or an over-long media type.
pub fn file(frame: &[u8]) -> Option<FileFrame<'_>> {
    #[derive(serde::Deserialize)]
    struct Header {
        path: String,
        media_type: String,
    }
    let (len, rest) = frame.split_first_chunk::<4>()?;
    let len = usize::try_from(u32::from_le_bytes(*len)).ok()?;
    let header = rest.get(..len)?;
    let data = rest.get(len..)?;
    let header: Header = serde_json::from_slice(header).ok()?;
    if !header.path.starts_with("/tmp/") || header.media_type.len() > MAX_MEDIA_TYPE {
        return None;
    }
    Some(FileFrame {
        path: header.path,
        media_type: header.media_type,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_stay_in_memory_and_under_the_size_limit() {
        assert_eq!(message_range(10, 5, 100).unwrap(), 10..15);
        assert!(matches!(
            message_range(-1, 5, 100),
            Err(FrameError::OutOfBounds { .. })
        ));
        assert!(matches!(
            message_range(98, 5, 100),
            Err(FrameError::OutOfBounds { .. })
        ));
        assert!(matches!(
            message_range(i32::MAX, i32::MAX, usize::MAX),
            Err(FrameError::TooLarge { .. })
        ));
        assert_eq!(message_range(100, 0, 100).unwrap(), 100..100);
    }

    #[test]
    fn file_frames_are_read_or_refused() {
        let header = br#"{"path":"/tmp/a.png","media_type":"image/png"}"#;
        let mut frame = u32::try_from(header.len()).unwrap().to_le_bytes().to_vec();
        frame.extend_from_slice(header);
        frame.extend_from_slice(b"PNG");
        let f = file(&frame).unwrap();
        assert_eq!((f.path.as_str(), f.data), ("/tmp/a.png", &b"PNG"[..]));
        let outside = br#"{"path":"/etc/x","media_type":"text/plain"}"#;
        let mut frame = u32::try_from(outside.len()).unwrap().to_le_bytes().to_vec();
        frame.extend_from_slice(outside);
        assert!(file(&frame).is_none());
        assert!(file(&[255, 255, 255, 255, b'{']).is_none());
    }

    #[test]
    fn batches_over_the_limit_answer_a_failure_each() {
        assert!(over_batch(MAX_BATCH).is_none());
        assert_eq!(over_batch(MAX_BATCH + 1).unwrap().len(), MAX_BATCH + 1);
    }
}

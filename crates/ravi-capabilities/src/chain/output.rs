//! Where a guest's stdout and stderr go: a capped in-memory buffer that can be emptied between
//! turns, so an interpreter session's turns each get their own output and their own cap.
//!
//! wasmtime-wasi's `MemoryOutputPipe` does the rest of this (and is what this mirrors) but
//! cannot be emptied: a session would carry its first turn's output, and its cap, into every
//! later turn.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// What a write past the cap traps with (matched by the sandbox's trap classification, as
/// wasmtime-wasi words it for its own pipe).
pub(super) const BEYOND_CAPACITY: &str = "write beyond capacity of the output pipe";

#[derive(Default)]
struct Buffer {
    data: BytesMut,
    capacity: usize,
}

/// A guest's stdout or stderr: cloned into the WASI context, read and emptied by the host.
#[derive(Clone)]
pub(super) struct TurnPipe(Arc<Mutex<Buffer>>);

impl TurnPipe {
    /// An empty pipe that takes at most `capacity` bytes.
    pub(super) fn new(capacity: usize) -> Self {
        Self(Arc::new(Mutex::new(Buffer {
            data: BytesMut::new(),
            capacity,
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Buffer> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Everything written since the last [`take`](Self::take), which empties the pipe and sets
    /// the cap of what comes next.
    pub(super) fn take(&self, next_capacity: usize) -> Bytes {
        let mut b = self.lock();
        b.capacity = next_capacity;
        std::mem::take(&mut b.data).freeze()
    }
}

impl IsTerminal for TurnPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for TurnPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl OutputStream for TurnPipe {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        let mut b = self.lock();
        if bytes.len() > b.capacity.saturating_sub(b.data.len()) {
            return Err(StreamError::Trap(wasmtime::format_err!(
                "{BEYOND_CAPACITY}"
            )));
        }
        b.data.extend_from_slice(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        let b = self.lock();
        match b.capacity.checked_sub(b.data.len()) {
            Some(room) if room > 0 => Ok(room),
            _ => Err(StreamError::Closed),
        }
    }
}

#[async_trait::async_trait]
impl Pollable for TurnPipe {
    async fn ready(&mut self) {}
}

impl AsyncWrite for TurnPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut b = self.lock();
        let n = buf.len().min(b.capacity.saturating_sub(b.data.len()));
        b.data.extend_from_slice(&buf[..n]);
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_caps_each_turn_and_empties_between_them() {
        let pipe = TurnPipe::new(4);
        let mut w = pipe.clone();
        assert!(w.write(Bytes::from_static(b"abc")).is_ok());
        assert!(w.write(Bytes::from_static(b"de")).is_err());
        assert_eq!(w.check_write().ok(), Some(1));
        assert_eq!(&pipe.take(6)[..], b"abc");
        assert!(w.write(Bytes::from_static(b"abcdef")).is_ok());
        assert!(matches!(w.check_write(), Err(StreamError::Closed)));
        assert_eq!(&pipe.take(6)[..], b"abcdef");
        assert!(pipe.take(6).is_empty());
    }
}

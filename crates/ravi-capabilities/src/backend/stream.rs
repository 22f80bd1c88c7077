//! Streams: ordered queues of payloads over one backend.
//!
//! A stream has one worker task: payloads submitted to it run FIFO, one at a time, so a
//! sequence such as "write, then run the test" keeps its order. Different streams have
//! different workers and progress concurrently. A payload whose ticket was dropped before its
//! turn is skipped; once started it runs to completion (or to its own time limit).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::sync::{mpsc, oneshot};

use super::Backend;
use super::payload::{BackendRequest, BackendResponse};
use crate::BackendError;

type Reply = oneshot::Sender<Result<BackendResponse, BackendError>>;

static NEXT_STREAM: AtomicU64 = AtomicU64::new(1);

/// A FIFO queue of payloads with its own worker. Dropping it lets queued payloads finish and
/// then stops the worker.
#[derive(Debug)]
pub struct BackendStream {
    id: u64,
    next_seq: AtomicU64,
    tx: mpsc::UnboundedSender<(BackendRequest, Reply)>,
}

impl BackendStream {
    /// A stream over `backend`; its worker runs on the current Tokio runtime.
    pub fn new(backend: Arc<dyn Backend>) -> Result<Self, BackendError> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| {
            BackendError::Unavailable("a backend stream needs a running Tokio runtime".into())
        })?;
        let (tx, mut rx) = mpsc::unbounded_channel::<(BackendRequest, Reply)>();
        handle.spawn(async move {
            while let Some((request, reply)) = rx.recv().await {
                if reply.is_closed() {
                    continue; // nobody waits for it any more
                }
                let result = backend.execute(request).await;
                let _ = reply.send(result);
            }
        });
        Ok(Self {
            id: NEXT_STREAM.fetch_add(1, Ordering::Relaxed),
            next_seq: AtomicU64::new(0),
            tx,
        })
    }

    /// This stream's id (unique in the process).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Queues `request` behind everything submitted before it; await the ticket for the result.
    pub fn submit(&self, request: BackendRequest) -> StreamTicket {
        let (reply, rx) = oneshot::channel();
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let op = request.op();
        // A send error means the worker is gone; the ticket then resolves to Unavailable.
        let _ = self.tx.send((request, reply));
        StreamTicket { seq, op, rx }
    }
}

/// The pending result of one submitted payload.
#[derive(Debug)]
pub struct StreamTicket {
    seq: u64,
    op: &'static str,
    rx: oneshot::Receiver<Result<BackendResponse, BackendError>>,
}

impl StreamTicket {
    /// The payload's position in its stream (0-based, in submission order).
    pub fn seq(&self) -> u64 {
        self.seq
    }
}

impl Future for StreamTicket {
    type Output = Result<BackendResponse, BackendError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let op = self.op;
        Pin::new(&mut self.rx).poll(cx).map(|r| {
            r.unwrap_or_else(|_| {
                Err(BackendError::Unavailable(format!(
                    "the stream's worker stopped before running the {op} payload"
                )))
            })
        })
    }
}

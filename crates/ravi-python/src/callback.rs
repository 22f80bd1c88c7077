//! Calling back into Python: a callable runs on one of the Python half's worker threads
//! (`ravi._dispatch`), never on one of Ravi's, and its answer comes back through a
//! [`Reply`].
//!
//! Why not call it from a Rust thread holding the GIL: a tool may still be running when the
//! interpreter shuts down (a call abandoned after its time limit), and CPython then ends the
//! thread it runs on where it stands. A Python thread ends cleanly; a Rust thread with Rust
//! frames below the Python call would be unwound through them and abort the process. So a
//! Rust thread holds the GIL only for the moment it takes to queue the call, and never once
//! the interpreter is shutting down ([`Python::try_attach`]).

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use tokio::sync::oneshot;

/// `ravi._dispatch.submit(fn, arg, reply)`: runs `fn(arg)` on a worker thread and passes
/// what it returns (or `None` when it raised) to `reply`.
static SUBMIT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Where a Python worker puts a callback's answer; called once.
#[pyclass(module = "ravi._native", frozen)]
pub struct Reply {
    tx: Mutex<Option<oneshot::Sender<Option<String>>>>,
}

#[pymethods]
impl Reply {
    /// Delivers the answer (later calls are ignored).
    #[pyo3(signature = (answer=None))]
    fn __call__(&self, answer: Option<String>) {
        if let Ok(mut slot) = self.tx.lock()
            && let Some(tx) = slot.take()
        {
            let _ = tx.send(answer);
        }
    }
}

/// Why a callback gave no answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallbackError {
    /// The interpreter is shutting down.
    #[error("the Python interpreter is shutting down")]
    Finalizing,
    /// The call could not be queued.
    #[error("the Python callback could not be started: {0}")]
    Submit(String),
    /// The worker ended without answering.
    #[error("the Python callback ended without an answer")]
    NoAnswer,
}

/// Runs `f(arg)` on a Python worker thread and waits for its text answer (`None` when the
/// callable raised or returned something else). Dropping the future abandons the call: it
/// runs to its end on its thread, and its answer is dropped.
pub(crate) async fn call(f: Arc<Py<PyAny>>, arg: String) -> Result<Option<String>, CallbackError> {
    let (tx, rx) = oneshot::channel();
    let reply = Reply {
        tx: Mutex::new(Some(tx)),
    };
    // Queuing holds the GIL for microseconds (a queue put, at most a thread start), so it is
    // done on the runtime's own thread: a hop to a blocking thread costs more than it saves.
    let queued = Python::try_attach(|py| -> PyResult<()> {
        let submit = SUBMIT.import(py, "ravi._dispatch", "submit")?;
        submit.call1((f.clone_ref(py), arg, Bound::new(py, reply)?))?;
        Ok(())
    });
    match queued {
        None => return Err(CallbackError::Finalizing),
        Some(Err(e)) => return Err(CallbackError::Submit(e.to_string())),
        Some(Ok(())) => {}
    }
    rx.await.map_err(|_| CallbackError::NoAnswer)
}

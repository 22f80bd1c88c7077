//! # ravi-python — Ravi for Python (layer L3)
//!
//! The native half of the `ravi` Python package: the code-mode sandbox and the invoker
//! behind a small PyO3 module, `ravi._native`, built as one abi3 wheel (CPython ≥ 3.10) by
//! maturin. The Python half (`python/ravi/`) turns plain Python callables into tool specs
//! (schemas from annotations, descriptions from docstrings), wraps results, and holds the
//! framework adapters; `docs/python.md` is the user's guide.
//!
//! What crosses the boundary, and how:
//! - A run (`Sandbox.run`) releases the GIL for all of Ravi's work: the
//!   sandbox, the invoker, the bridge. A script stuck in a loop is stopped by its wall clock
//!   while other Python threads go on.
//! - A Python tool is called back on a worker thread of the Python half (`ravi._dispatch`)
//!   with the GIL held, its arguments as JSON text, its answer as a JSON envelope; Ravi's own
//!   threads hold the GIL only to queue the call.
//! - Everything else is JSON text too (results, schemas, approval requests), read by the
//!   Python half: no Python object outlives the call that handed it over, except the
//!   callables a run holds while it runs.
//! - A panic never crosses into Python: each entry point catches it and raises
//!   `ravi.RaviError` naming it.
//!
//! Built and installed with `pip install ./crates/ravi-python`; tested by pytest against the
//! installed wheel (`cargo xtask test`). From Python:
//!
//! ```python
//! import ravi
//!
//! def add(a: int, b: int) -> int:
//!     """Adds two integers."""
//!     return a + b
//!
//! result = ravi.Sandbox().run("print(add(a=2, b=3))", tools=[add])
//! assert result.output == "5\n"
//! ```

use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

mod approve;
mod callback;
mod sandbox;
mod schemas;
mod tools;

pyo3::create_exception!(
    _native,
    RaviError,
    PyRuntimeError,
    "Ravi could not do what was asked: the sandbox could not be loaded, an MCP server could \
     not be attached, or an internal failure (the message says which)."
);

/// The runtime every run, MCP connection and Python tool call runs on: two workers (runs
/// are mostly waiting), Python tools on its blocking threads.
fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("ravi")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| RaviError::new_err(format!("the Ravi runtime could not start: {e}")))
}

/// Runs `f`, turning a panic into `ravi.RaviError` (a panic must not unwind into Python).
fn guarded<T>(what: &str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into());
            Err(RaviError::new_err(format!(
                "{what} failed inside Ravi (a bug; please report it): {msg}"
            )))
        }
    }
}

/// A `ValueError` naming the parameter, the value and what was expected.
fn bad_value(param: &str, value: impl std::fmt::Display, expected: &str) -> PyErr {
    PyValueError::new_err(format!("{param}={value} is not valid: expected {expected}"))
}

/// The native module, `ravi._native`.
#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("RaviError", m.py().get_type::<RaviError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<sandbox::NativeSandbox>()?;
    m.add_class::<sandbox::CancelToken>()?;
    m.add_class::<sandbox::RunArtifacts>()?;
    m.add_class::<callback::Reply>()?;
    m.add_class::<tools::PyToolSpec>()?;
    m.add_class::<tools::ToolSet>()?;
    m.add_function(wrap_pyfunction!(schemas::tool_schemas, m)?)?;
    Ok(())
}

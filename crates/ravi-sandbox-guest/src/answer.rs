//! An answer envelope as the script sees it: a value, a handle, files, or the exception the
//! call raises.

use rustpython_vm::builtins::{PyBaseException, PyBaseExceptionRef};
use rustpython_vm::{PyObjectRef, PyResult, VirtualMachine};

use crate::abi::{Content, Envelope, Failure, FailureKind, FilesResult};
use crate::convert::to_py;
use crate::handles::{self, artifact_to_py, file_to_py};

/// The value a call to `tool` returns, or the exception it raises.
pub(crate) fn into_result(tool: &str, envelope: Envelope, vm: &VirtualMachine) -> PyResult {
    match envelope {
        Envelope::Ok(v) => to_py(&v, vm),
        Envelope::Artifact(a) => artifact_to_py(&a, vm),
        Envelope::Files(f) => files_to_py(f, vm),
        Envelope::Error(failure) => Err(exception(tool, failure, vm)?),
    }
}

/// One `ChainFile`, or a list of them when the call returned nothing else; else
/// `{"content": ..., "files": [...]}`.
fn files_to_py(result: FilesResult, vm: &VirtualMachine) -> PyResult {
    let mut files = result
        .files
        .iter()
        .map(|f| file_to_py(f, vm))
        .collect::<PyResult<Vec<_>>>()?;
    let content = match result.content {
        None if files.len() == 1 => return Ok(files.pop().unwrap_or_else(|| vm.ctx.none())),
        None => return Ok(vm.ctx.new_list(files).into()),
        Some(Content::Value(v)) => to_py(&v, vm)?,
        Some(Content::Artifact(a)) => artifact_to_py(&a, vm)?,
    };
    let d = vm.ctx.new_dict();
    d.set_item("content", content, vm)?;
    d.set_item("files", vm.ctx.new_list(files).into(), vm)?;
    Ok(d.into())
}

/// The exception for a failed call: `ToolDenied`, `BudgetExhausted` or `ToolError` by kind,
/// with `.message`, `.tool`, `.status` (the trace's) and `.reason`.
fn exception(tool: &str, failure: Failure, vm: &VirtualMachine) -> PyResult<PyBaseExceptionRef> {
    let cls = handles::with_classes(vm, |c| match failure.kind {
        FailureKind::Denied => c.tool_denied.clone(),
        FailureKind::BudgetExhausted => c.budget_exhausted.clone(),
        _ => c.tool_error.clone(),
    })?;
    let reason: PyObjectRef = match failure.reason {
        Some(r) => vm.ctx.new_str(r).into(),
        None => vm.ctx.none(),
    };
    let exc = cls.call(
        (
            vm.ctx.new_str(failure.message),
            vm.ctx.new_str(tool),
            vm.ctx.new_str(failure.kind.status()),
            reason,
        ),
        vm,
    )?;
    exc.downcast::<PyBaseException>()
        .map_err(|_| vm.new_runtime_error("bridge exception class is not an exception"))
}

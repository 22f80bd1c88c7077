//! The prelude's classes, registered with the bridge once by the prelude: the handles
//! (`Artifact`, `ChainFile`) built from the host's answers and recognised in arguments, the
//! exceptions, and deferred calls.

use std::cell::RefCell;

use rustpython_vm::{AsObject, PyObject, PyObjectRef, PyResult, VirtualMachine};

use crate::abi::{ArtifactHandle, FileHandle};

/// The prelude's classes the native bridge needs.
pub(crate) struct Classes {
    /// `Artifact(ref, preview, size, media_type)`.
    pub(crate) artifact: PyObjectRef,
    /// `ChainFile(path, media_type, size, ref)`.
    pub(crate) chain_file: PyObjectRef,
    /// `ToolError(message, tool, status, reason)`.
    pub(crate) tool_error: PyObjectRef,
    /// `ToolDenied`, a `ToolError`.
    pub(crate) tool_denied: PyObjectRef,
    /// `BudgetExhausted`, deliberately not a `ToolError`.
    pub(crate) budget_exhausted: PyObjectRef,
    /// `_Call(name, kwargs)`, what `tool.defer(...)` returns.
    pub(crate) deferred: PyObjectRef,
}

thread_local! {
    static CLASSES: RefCell<Option<Classes>> = const { RefCell::new(None) };
}

/// Registers the prelude's classes (once, while booting).
pub(crate) fn register(classes: Classes) {
    CLASSES.with(|c| *c.borrow_mut() = Some(classes));
}

/// Reads the registered classes.
pub(crate) fn with_classes<R>(vm: &VirtualMachine, f: impl FnOnce(&Classes) -> R) -> PyResult<R> {
    CLASSES
        .with(|c| c.borrow().as_ref().map(f))
        .ok_or_else(|| vm.new_runtime_error("bridge classes not registered"))
}

/// An `Artifact` for the host's handle.
pub(crate) fn artifact_to_py(a: &ArtifactHandle, vm: &VirtualMachine) -> PyResult {
    let cls = with_classes(vm, |c| c.artifact.clone())?;
    let media_type: PyObjectRef = match &a.media_type {
        Some(m) => vm.ctx.new_str(m.as_str()).into(),
        None => vm.ctx.none(),
    };
    cls.call(
        (
            vm.ctx.new_str(a.artifact_ref.as_str()),
            vm.ctx.new_str(a.preview.as_str()),
            vm.ctx.new_int(a.size),
            media_type,
        ),
        vm,
    )
}

/// A `ChainFile` for the host's handle.
pub(crate) fn file_to_py(f: &FileHandle, vm: &VirtualMachine) -> PyResult {
    let cls = with_classes(vm, |c| c.chain_file.clone())?;
    let artifact_ref: PyObjectRef = match &f.artifact_ref {
        Some(r) => vm.ctx.new_str(r.as_str()).into(),
        None => vm.ctx.none(),
    };
    cls.call(
        (
            vm.ctx.new_str(f.path.as_str()),
            vm.ctx.new_str(f.media_type.as_str()),
            vm.ctx.new_int(f.size),
            artifact_ref,
        ),
        vm,
    )
}

/// What a handle passed in a tool's arguments stands for.
pub(crate) enum Sent {
    /// Its ref, sent as `{"$artifact": ref}` for the invoker to resolve.
    Ref(PyObjectRef),
    /// The path of a file without a ref, sent as it is.
    Path(PyObjectRef),
}

/// What `obj` is sent as when it is an `Artifact` or a `ChainFile` (whose bytes stay on the
/// host); `None` for anything else.
pub(crate) fn sent_as(obj: &PyObject, vm: &VirtualMachine) -> PyResult<Option<Sent>> {
    let cls = obj.class().to_owned();
    let (artifact, file) = with_classes(vm, |c| (cls.is(&c.artifact), cls.is(&c.chain_file)))?;
    if artifact {
        return obj.get_attr("ref", vm).map(|r| Some(Sent::Ref(r)));
    }
    if file {
        let r = obj.get_attr("ref", vm)?;
        if vm.is_none(&r) {
            return obj.get_attr("path", vm).map(|p| Some(Sent::Path(p)));
        }
        return Ok(Some(Sent::Ref(r)));
    }
    Ok(None)
}

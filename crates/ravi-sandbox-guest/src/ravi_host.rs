//! `_ravi_host`, the native Python module behind the prelude: the tool functions bound in a
//! script's globals, `parallel`, `budget`, and the registration of the prelude's classes.
//! Calls go to the host as a batch ([`crate::host::call`]); one call is a batch of one.

use rustpython_vm::builtins::{PyDict, PyStr, PyTuple};
use rustpython_vm::{PyObjectRef, PyResult, VirtualMachine};
use serde_json::{Map, Value};

use crate::abi::{Budget, CallRequest};
use crate::answer;
use crate::convert::dict_to_json;
use crate::host;

/// Sends one call across the bridge; returns its value or raises its exception.
fn call_tool(tool: &str, args: Map<String, Value>, vm: &VirtualMachine) -> PyResult {
    let batch = [CallRequest {
        name: tool.to_owned(),
        args,
        line: crate::run::script_line(vm),
    }];
    let envelope = host::call(&batch, vm)?.pop();
    match envelope {
        Some(e) => answer::into_result(tool, e, vm),
        None => Err(vm.new_runtime_error("the host answered a different number of calls")),
    }
}

/// The budget as the dict `budget()` returns: the fields the host knows, in a stable order.
fn budget_to_py(b: &Budget, vm: &VirtualMachine) -> PyResult {
    let d = vm.ctx.new_dict();
    if let Some(n) = b.calls_used {
        d.set_item("calls_used", vm.ctx.new_int(n).into(), vm)?;
    }
    if let Some(n) = b.calls_remaining {
        d.set_item("calls_remaining", vm.ctx.new_int(n).into(), vm)?;
    }
    if let Some(s) = b.seconds_remaining {
        d.set_item("seconds_remaining", vm.ctx.new_float(s).into(), vm)?;
    }
    Ok(d.into())
}

/// Sends a batch of `(name, kwargs)` pairs; returns `[(ok, value_or_exception), ...]`.
fn parallel_calls(calls: Vec<PyObjectRef>, vm: &VirtualMachine) -> PyResult {
    let mut batch = Vec::with_capacity(calls.len());
    let line = crate::run::script_line(vm);
    for call in &calls {
        let pair = call
            .downcast_ref::<PyTuple>()
            .map(|t| t.as_slice().to_vec());
        let Some([name, args]) = pair.as_deref() else {
            return Err(vm.new_type_error("parallel() expects (name, kwargs) pairs"));
        };
        let Some(name) = name.downcast_ref::<PyStr>() else {
            return Err(vm.new_type_error("a tool name must be a str"));
        };
        let Some(args) = args.downcast_ref::<PyDict>() else {
            return Err(vm.new_type_error("parallel() expects (name, kwargs) pairs"));
        };
        batch.push(CallRequest {
            name: name.to_string_lossy().into_owned(),
            args: dict_to_json(args, vm, 0)?,
            line,
        });
    }
    let envelopes = host::call(&batch, vm)?;
    let mut out = Vec::with_capacity(envelopes.len());
    for (req, envelope) in batch.iter().zip(envelopes) {
        let pair = match answer::into_result(&req.name, envelope, vm) {
            Ok(v) => vec![vm.ctx.new_bool(true).into(), v],
            Err(e) => vec![vm.ctx.new_bool(false).into(), e.into()],
        };
        out.push(vm.ctx.new_tuple(pair).into());
    }
    Ok(vm.ctx.new_list(out).into())
}

/// The module itself (`#[pymodule]` needs it inline).
#[rustpython_vm::pymodule]
pub(crate) mod _ravi_host {
    use rustpython_vm::builtins::{PyBaseExceptionRef, PyDictRef, PyStrRef};
    use rustpython_vm::function::FuncArgs;
    use rustpython_vm::types::{Callable, Representable};
    use rustpython_vm::{Py, PyObjectRef, PyPayload, PyResult, VirtualMachine, pyclass};
    use serde_json::Map;

    use crate::convert::{dict_to_json, to_json};
    use crate::handles::{self, Classes};
    use crate::host;

    /// Registers the prelude's classes with the bridge (called once by the prelude).
    #[pyfunction]
    fn _register(
        artifact: PyObjectRef,
        chain_file: PyObjectRef,
        tool_error: PyObjectRef,
        tool_denied: PyObjectRef,
        budget_exhausted: PyObjectRef,
        deferred: PyObjectRef,
    ) {
        handles::register(Classes {
            artifact,
            chain_file,
            tool_error,
            tool_denied,
            budget_exhausted,
            deferred,
        });
    }

    /// Calls one tool with keyword arguments; returns its result or raises.
    #[pyfunction]
    fn call(name: PyStrRef, args: PyDictRef, vm: &VirtualMachine) -> PyResult {
        let args = dict_to_json(&args, vm, 0)?;
        super::call_tool(&name.to_string_lossy(), args, vm)
    }

    /// One tool as a script function: `read_file(path="a.txt")`. Native, so a call costs no
    /// Python frame: the keyword arguments go straight to JSON and across the bridge.
    #[pyattr]
    #[pyclass(name = "Tool", module = "_ravi_host")]
    #[derive(Debug, PyPayload)]
    pub struct PyTool {
        /// The Python identifier.
        pub pyname: String,
        /// The registered tool name.
        pub tool: String,
        /// The function's help text.
        pub doc: String,
    }

    #[pyclass(with(Callable, Representable))]
    impl PyTool {
        #[pygetset]
        fn __name__(zelf: &Py<Self>) -> String {
            zelf.pyname.clone()
        }

        #[pygetset]
        fn __qualname__(zelf: &Py<Self>) -> String {
            zelf.pyname.clone()
        }

        #[pygetset]
        fn __doc__(zelf: &Py<Self>) -> String {
            zelf.doc.clone()
        }

        /// A call to run later with `parallel(...)`.
        #[pymethod]
        fn defer(zelf: &Py<Self>, args: FuncArgs, vm: &VirtualMachine) -> PyResult {
            if !args.args.is_empty() {
                return Err(positional_error(&zelf.pyname, vm));
            }
            let kwargs = vm.ctx.new_dict();
            for (k, v) in args.kwargs {
                kwargs.set_item(&*k.to_string_lossy(), v, vm)?;
            }
            let cls = handles::with_classes(vm, |c| c.deferred.clone())?;
            cls.call((vm.ctx.new_str(zelf.tool.as_str()), kwargs), vm)
        }
    }

    impl Callable for PyTool {
        type Args = FuncArgs;

        fn call(zelf: &Py<Self>, args: FuncArgs, vm: &VirtualMachine) -> PyResult {
            if !args.args.is_empty() {
                return Err(positional_error(&zelf.pyname, vm));
            }
            let mut map = Map::new();
            for (k, v) in &args.kwargs {
                map.insert(k.to_string_lossy().into_owned(), to_json(v, vm, 1)?);
            }
            super::call_tool(&zelf.tool, map, vm)
        }
    }

    impl Representable for PyTool {
        fn repr_str(zelf: &Py<Self>, _vm: &VirtualMachine) -> PyResult<String> {
            Ok(format!("<tool {}>", zelf.pyname))
        }
    }

    fn positional_error(pyname: &str, vm: &VirtualMachine) -> PyBaseExceptionRef {
        vm.new_type_error(format!(
            "{pyname}() takes keyword arguments only, e.g. {pyname}(path=...)"
        ))
    }

    /// Calls several tools concurrently; returns `[(ok, value_or_exception), ...]`.
    #[pyfunction]
    fn parallel(calls: PyObjectRef, vm: &VirtualMachine) -> PyResult {
        super::parallel_calls(calls.try_to_value(vm)?, vm)
    }

    /// The remaining budget as a dict.
    #[pyfunction]
    fn budget(vm: &VirtualMachine) -> PyResult {
        super::budget_to_py(&host::budget(vm)?, vm)
    }
}

//! Ravi's code-mode guest: a RustPython interpreter built for `wasm32-wasip1`.
//!
//! The module is a WASI reactor. At build time wizer calls [`wizer_initialize`], which boots
//! the interpreter, runs the prelude and imports the commonly used stdlib modules; the
//! resulting memory becomes the snapshot every run starts from, so a run pays only for its
//! own script.
//!
//! # ABI (language-agnostic, so another guest could implement it)
//! Exports:
//! - `ravi_alloc(len) -> ptr`: a buffer the host fills with the run request;
//! - `ravi_run(ptr, len) -> i32`: runs the request (JSON: `script`, `filename`, `tools`),
//!   reports the outcome through `host_call(OP_FINISH, ..)` and returns 0.
//!
//! Imports from module `ravi`:
//! - `host_call(op, ptr, len) -> i64`: a request to the host; the answer's length in bytes;
//! - `host_take(dst)`: copies the pending answer into a buffer of that length.
//!
//! Ops: [`OP_CALL`] (the tool name, a NUL byte, the arguments as a JSON object → envelope),
//! [`OP_PARALLEL`] (array of `{"name", "args"}` → array of envelopes), [`OP_BUDGET`]
//! (→ envelope), [`OP_FINISH`] (the outcome; no answer).
//! An envelope is `{"ok": value}` or `{"error": {"kind", "message", "reason"}}` (`kind` picks
//! the exception: `error`, `denied`, `budget_exhausted` or `timeout`; `reason` is the
//! invoker's typed failure reason or null). In values, objects with a `"$ravi"` key are
//! handles: `"artifact"` (`ref`, `preview`, `size`, `media_type`) and `"file"` (`path`,
//! `media_type`, `size`, `ref`). A handle passed back to a tool is sent as
//! `{"$artifact": ref}` (a file without a ref as its path).

use std::cell::RefCell;

use rustpython::InterpreterBuilderExt;
use rustpython_vm::builtins::{
    PyBaseException, PyBaseExceptionRef, PyDict, PyDictRef, PyFloat, PyInt, PyList, PyStr, PyTuple,
};
use rustpython_vm::scope::Scope;
use rustpython_vm::{
    AsObject, Interpreter, InterpreterBuilder, PyObject, PyObjectRef, PyPayload, PyResult,
    Settings, VirtualMachine,
};
use serde_json::{Map, Value};

mod arena;

/// Snapshot heap before a run starts, a fresh arena for the run (see [`arena`]).
#[global_allocator]
static ALLOC: arena::RunArena = arena::RunArena::new();

/// Runs one tool call.
pub const OP_CALL: i32 = 1;
/// Runs several tool calls concurrently.
pub const OP_PARALLEL: i32 = 2;
/// Reports the remaining budget.
pub const OP_BUDGET: i32 = 3;
/// Reports the run's outcome.
pub const OP_FINISH: i32 = 4;

const PRELUDE: &str = include_str!("prelude.py");

/// How deep a value may nest when it crosses the bridge.
const MAX_DEPTH: usize = 64;

/// Modules imported while pre-initialising, so scripts find them ready. Nothing that seeds
/// itself from entropy (random, secrets, uuid, tempfile, or statistics, which imports
/// random): a snapshot would freeze the seed, and reseeding it costs every run.
const PREIMPORTS: &[&str] = &[
    "json",
    "re",
    "math",
    "collections",
    "itertools",
    "functools",
    "datetime",
    "string",
    "textwrap",
    "dataclasses",
    "typing",
    "enum",
    "traceback",
    "operator",
    "copy",
    "heapq",
    "bisect",
    "base64",
    "hashlib",
    "decimal",
    "fractions",
    "csv",
    "io",
    "linecache",
];

#[link(wasm_import_module = "ravi")]
unsafe extern "C" {
    fn host_call(op: i32, ptr: *const u8, len: usize) -> i64;
    fn host_take(dst: *mut u8);
}

struct State {
    interp: Interpreter,
    prelude: PyDictRef,
}

/// The prelude's classes, needed by the native bridge functions.
struct Classes {
    artifact: PyObjectRef,
    chain_file: PyObjectRef,
    tool_error: PyObjectRef,
    tool_denied: PyObjectRef,
    budget_exhausted: PyObjectRef,
    deferred: PyObjectRef,
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
    static CLASSES: RefCell<Option<Classes>> = const { RefCell::new(None) };
}

/// Sends a request to the host and returns its answer.
fn host_request(op: i32, payload: &[u8]) -> Vec<u8> {
    // SAFETY: the host reads `payload` within its bounds during the call, then writes
    // exactly the announced number of bytes into the buffer we allocated for it.
    unsafe {
        let len = host_call(op, payload.as_ptr(), payload.len());
        let len = usize::try_from(len).unwrap_or(0);
        let mut buf = vec![0u8; len];
        if len > 0 {
            host_take(buf.as_mut_ptr());
        }
        buf
    }
}

fn boot() -> State {
    let mut settings = Settings::default();
    settings.import_site = false;
    settings.ignore_environment = true;
    settings.isolated = true;
    settings.safe_path = true;
    settings.write_bytecode = false;
    settings.install_signal_handlers = false;
    // Text straight to the file descriptor; the prelude makes it line-buffered.
    settings.buffered_stdio = false;
    settings.argv = vec!["script".to_owned()];
    let builder = InterpreterBuilder::new().settings(settings).init_stdlib();
    let host_mod = _ravi_host::module_def(&builder.ctx);
    let interp = builder.add_native_module(host_mod).interpreter();
    let prelude = interp.enter(|vm| {
        cpython_sets::install(vm);
        let scope = vm.new_scope_with_builtins();
        if let Err(exc) = vm.run_string(scope.clone(), PRELUDE, "<ravi-prelude>") {
            vm.print_exception(&exc);
            std::process::abort();
        }
        if let Err(exc) = export_prelude(vm, &scope.globals) {
            vm.print_exception(&exc);
            std::process::abort();
        }
        for name in PREIMPORTS {
            if let Err(exc) = vm.import(*name, 0) {
                vm.print_exception(&exc);
                std::process::abort();
            }
        }
        scope.globals
    });
    State { interp, prelude }
}

/// Puts the prelude's public names (`__all__`) into builtins, once, at snapshot time: every
/// script sees them without a per-run copy, and may still shadow them.
fn export_prelude(vm: &VirtualMachine, prelude: &PyDictRef) -> PyResult<()> {
    let exports: Vec<PyObjectRef> = prelude.get_item("__all__", vm)?.try_to_value(vm)?;
    for name in exports {
        let value = prelude.get_item(&*name, vm)?;
        let Some(name) = name.downcast_ref::<PyStr>() else {
            return Err(vm.new_type_error("__all__ holds a non-string"));
        };
        vm.builtins.as_object().set_attr(name, value, vm)?;
    }
    Ok(())
}

fn init() {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if s.is_none() {
            *s = Some(boot());
        }
    });
}

/// Boots the interpreter at snapshot time (called by wizer, never at run time).
#[unsafe(export_name = "wizer.initialize")]
pub extern "C" fn wizer_initialize() {
    init();
}

/// Allocates a buffer of `len` bytes for the host to write a run request into.
#[unsafe(no_mangle)]
pub extern "C" fn ravi_alloc(len: usize) -> *mut u8 {
    let buf = vec![0u8; len].into_boxed_slice();
    Box::into_raw(buf).cast::<u8>()
}

/// Runs the request the host wrote at `ptr` (from [`ravi_alloc`]).
#[unsafe(no_mangle)]
pub extern "C" fn ravi_run(ptr: *mut u8, len: usize) -> i32 {
    // SAFETY: `ptr`/`len` come from `ravi_alloc(len)`, which leaked a boxed slice of
    // exactly that length; we take it back exactly once.
    let request = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) };
    init();
    arena::start_run(&ALLOC);
    let outcome = match serde_json::from_slice::<Value>(&request) {
        Ok(req) => run_request(&req),
        Err(e) => finish_error("RaviBridgeError", &format!("bad run request: {e}"), ""),
    };
    host_request(OP_FINISH, outcome.to_string().as_bytes());
    0
}

fn finish_error(ty: &str, message: &str, traceback: &str) -> Value {
    serde_json::json!({"status": "error", "type": ty, "message": message, "traceback": traceback})
}

fn run_request(req: &Value) -> Value {
    let script = req.get("script").and_then(Value::as_str).unwrap_or("");
    let filename = req
        .get("filename")
        .and_then(Value::as_str)
        .unwrap_or("<script>");
    let empty = Vec::new();
    let tools = req.get("tools").and_then(Value::as_array).unwrap_or(&empty);
    STATE.with(|s| {
        let s = s.borrow();
        let Some(state) = s.as_ref() else {
            return finish_error("RaviBridgeError", "interpreter not initialised", "");
        };
        state.interp.enter(|vm| {
            let outcome = match run_script(vm, script, filename, tools) {
                Ok(()) => serde_json::json!({"status": "ok"}),
                Err(exc) => describe_exception(vm, &state.prelude, exc),
            };
            flush_stdio(vm);
            outcome
        })
    })
}

fn run_script(vm: &VirtualMachine, script: &str, filename: &str, tools: &[Value]) -> PyResult<()> {
    let globals = vm.ctx.new_dict();
    globals.set_item("__name__", vm.ctx.new_str("__main__").into(), vm)?;
    globals.set_item("__builtins__", vm.builtins.clone().into(), vm)?;
    for tool in tools {
        let py = tool.get("py").and_then(Value::as_str).unwrap_or("");
        let name = tool.get("name").and_then(Value::as_str).unwrap_or(py);
        let doc = tool.get("doc").and_then(Value::as_str).unwrap_or("");
        if py.is_empty() {
            continue;
        }
        let f = _ravi_host::PyTool {
            pyname: py.to_owned(),
            tool: name.to_owned(),
            doc: doc.to_owned(),
        }
        .into_ref(&vm.ctx);
        globals.set_item(py, f.into(), vm)?;
    }
    reseed_random(vm);
    let scope = Scope::with_builtins(None, globals, vm);
    match vm.run_string(scope, script, filename) {
        Ok(_) => Ok(()),
        Err(exc) => {
            // `sys.exit()` / `sys.exit(0)` end a script successfully, as in CPython.
            if exc.fast_isinstance(vm.ctx.exceptions.system_exit) {
                let code = exc.args().as_slice().first().cloned();
                let ok = match code {
                    None => true,
                    Some(c) if vm.is_none(&c) => true,
                    Some(c) => c
                        .downcast_ref::<PyInt>()
                        .is_some_and(|i| i.as_bigint() == &0.into()),
                };
                if ok {
                    return Ok(());
                }
            }
            Err(exc)
        }
    }
}

/// `random` may have been imported while pre-initialising (`statistics` imports it), which
/// froze its state in the snapshot; every run reseeds it from fresh host entropy.
fn reseed_random(vm: &VirtualMachine) {
    let Ok(modules) = vm.sys_module.get_attr("modules", vm) else {
        return;
    };
    // A plain lookup: asking for a missing key through `get_item` would build a KeyError.
    let random = modules
        .downcast_ref::<PyDict>()
        .and_then(|m| m.get_item_opt("random", vm).ok().flatten());
    if let Some(random) = random {
        // Not `seed()`: without an argument RustPython draws from an in-process generator
        // whose state is in the snapshot too. `os.urandom` asks the host every time.
        let seed = vm
            .import("os", 0)
            .and_then(|os| vm.call_method(&os, "urandom", (32,)))
            .and_then(|b| {
                let int_type: PyObjectRef = vm.ctx.types.int_type.to_owned().into();
                vm.call_method(&int_type, "from_bytes", (b, vm.ctx.new_str("little")))
            });
        if let Ok(seed) = seed {
            let _ = vm.call_method(&random, "seed", (seed,));
        }
    }
}

fn describe_exception(vm: &VirtualMachine, prelude: &PyDictRef, exc: PyBaseExceptionRef) -> Value {
    let ty = exc.class().name().to_string();
    let message = exc
        .as_object()
        .str(vm)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let traceback = prelude
        .get_item("_format_exception", vm)
        .and_then(|f| f.call((exc.clone(),), vm))
        .ok()
        .and_then(|s| {
            s.downcast_ref::<PyStr>()
                .map(|s| s.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    finish_error(&ty, &message, &traceback)
}

fn flush_stdio(vm: &VirtualMachine) {
    for name in ["stdout", "stderr"] {
        if let Ok(stream) = vm.sys_module.get_attr(name, vm) {
            let _ = vm.call_method(&stream, "flush", ());
        }
    }
}

// ---------------------------------------------------------------------------------------
// Value conversion at the boundary (native, no Python json).

fn with_classes<R>(f: impl FnOnce(&Classes) -> R) -> Option<R> {
    CLASSES.with(|c| c.borrow().as_ref().map(f))
}

fn to_json(obj: &PyObject, vm: &VirtualMachine, depth: usize) -> PyResult<Value> {
    if depth > MAX_DEPTH {
        return Err(vm.new_value_error(format!(
            "tool arguments nest deeper than {MAX_DEPTH} levels"
        )));
    }
    if vm.is_none(obj) {
        return Ok(Value::Null);
    }
    if obj.is(&vm.ctx.true_value) {
        return Ok(Value::Bool(true));
    }
    if obj.is(&vm.ctx.false_value) {
        return Ok(Value::Bool(false));
    }
    if let Some(i) = obj.downcast_ref::<PyInt>() {
        if let Ok(v) = i.try_to_primitive::<i64>(vm) {
            return Ok(Value::from(v));
        }
        if let Ok(v) = i.try_to_primitive::<u64>(vm) {
            return Ok(Value::from(v));
        }
        return Err(vm.new_value_error(format!(
            "the integer {} is too large to send to a tool (limit: 64 bits); pass it as a string",
            i.as_bigint()
        )));
    }
    if let Some(f) = obj.downcast_ref::<PyFloat>() {
        let v = f.to_f64();
        return serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| vm.new_value_error(format!("cannot send the float {v} to a tool")));
    }
    if let Some(s) = obj.downcast_ref::<PyStr>() {
        return Ok(Value::String(s.to_string_lossy().into_owned()));
    }
    if let Some(l) = obj.downcast_ref::<PyList>() {
        let items: Vec<PyObjectRef> = l.borrow_vec().to_vec();
        return items
            .iter()
            .map(|x| to_json(x, vm, depth + 1))
            .collect::<PyResult<Vec<_>>>()
            .map(Value::Array);
    }
    if let Some(t) = obj.downcast_ref::<PyTuple>() {
        return t
            .as_slice()
            .iter()
            .map(|x| to_json(x, vm, depth + 1))
            .collect::<PyResult<Vec<_>>>()
            .map(Value::Array);
    }
    if let Some(d) = obj.downcast_ref::<PyDict>() {
        let mut map = Map::new();
        for (k, v) in d.items_vec() {
            let Some(key) = k.downcast_ref::<PyStr>() else {
                return Err(vm.new_type_error(format!(
                    "dictionary keys sent to a tool must be str, not {}",
                    k.class().name()
                )));
            };
            map.insert(
                key.to_string_lossy().into_owned(),
                to_json(&v, vm, depth + 1)?,
            );
        }
        return Ok(Value::Object(map));
    }
    let cls = obj.class().to_owned();
    let handle = with_classes(|c| {
        if cls.is(&c.artifact) {
            Some(true)
        } else if cls.is(&c.chain_file) {
            Some(false)
        } else {
            None
        }
    })
    .flatten();
    match handle {
        Some(true) => {
            let r = obj.get_attr("ref", vm)?;
            let r = to_json(&r, vm, depth + 1)?;
            Ok(serde_json::json!({ "$artifact": r }))
        }
        Some(false) => {
            // The file's bytes stay on the host: send its ref for the invoker to resolve.
            let r = obj.get_attr("ref", vm)?;
            if vm.is_none(&r) {
                let p = obj.get_attr("path", vm)?;
                return to_json(&p, vm, depth + 1);
            }
            let r = to_json(&r, vm, depth + 1)?;
            Ok(serde_json::json!({ "$artifact": r }))
        }
        None => Err(vm.new_type_error(format!(
            "cannot send a {} to a tool: use dict, list, tuple, str, int, float, bool, None, \
             Artifact or ChainFile",
            cls.name()
        ))),
    }
}

fn to_py(v: &Value, vm: &VirtualMachine) -> PyResult {
    Ok(match v {
        Value::Null => vm.ctx.none(),
        Value::Bool(b) => vm.ctx.new_bool(*b).into(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                vm.ctx.new_int(i).into()
            } else if let Some(u) = n.as_u64() {
                vm.ctx.new_int(u).into()
            } else {
                vm.ctx.new_float(n.as_f64().unwrap_or(f64::NAN)).into()
            }
        }
        Value::String(s) => vm.ctx.new_str(s.as_str()).into(),
        Value::Array(items) => {
            let items = items
                .iter()
                .map(|x| to_py(x, vm))
                .collect::<PyResult<Vec<_>>>()?;
            vm.ctx.new_list(items).into()
        }
        Value::Object(map) => {
            if let Some(kind) = map.get("$ravi").and_then(Value::as_str) {
                return handle_to_py(kind, map, vm);
            }
            let d = vm.ctx.new_dict();
            for (k, x) in map {
                d.set_item(k.as_str(), to_py(x, vm)?, vm)?;
            }
            d.into()
        }
    })
}

fn handle_to_py(kind: &str, map: &Map<String, Value>, vm: &VirtualMachine) -> PyResult {
    let field = |k: &str| -> PyResult {
        map.get(k)
            .map_or_else(|| Ok(vm.ctx.none()), |v| to_py(v, vm))
    };
    let cls = with_classes(|c| {
        if kind == "artifact" {
            c.artifact.clone()
        } else {
            c.chain_file.clone()
        }
    })
    .ok_or_else(|| vm.new_runtime_error("bridge classes not registered"))?;
    if kind == "artifact" {
        cls.call(
            (
                field("ref")?,
                field("preview")?,
                field("size")?,
                field("media_type")?,
            ),
            vm,
        )
    } else {
        cls.call(
            (
                field("path")?,
                field("media_type")?,
                field("size")?,
                field("ref")?,
            ),
            vm,
        )
    }
}

/// Turns an envelope into a value or the exception the script sees.
fn envelope_to_result(
    tool: &str,
    env: &Value,
    vm: &VirtualMachine,
) -> Result<PyObjectRef, PyBaseExceptionRef> {
    if let Some(v) = env.get("ok") {
        return to_py(v, vm);
    }
    let err = env.get("error");
    let kind = err
        .and_then(|e| e.get("kind"))
        .and_then(Value::as_str)
        .unwrap_or("error");
    let message = err
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .unwrap_or("the tool call failed");
    let reason: PyObjectRef = match err.and_then(|e| e.get("reason")).and_then(Value::as_str) {
        Some(r) => vm.ctx.new_str(r).into(),
        None => vm.ctx.none(),
    };
    // `.status` is the call's status as the trace records it.
    let status = match kind {
        "denied" => "denied",
        "timeout" => "timeout",
        _ => "error",
    };
    let cls = with_classes(|c| match kind {
        "denied" => c.tool_denied.clone(),
        "budget_exhausted" => c.budget_exhausted.clone(),
        _ => c.tool_error.clone(),
    })
    .ok_or_else(|| vm.new_runtime_error("bridge classes not registered"))?;
    let exc = cls.call(
        (
            vm.ctx.new_str(message),
            vm.ctx.new_str(tool),
            vm.ctx.new_str(status),
            reason,
        ),
        vm,
    )?;
    match exc.downcast::<PyBaseException>() {
        Ok(e) => Err(e),
        Err(_) => Err(vm.new_runtime_error("bridge exception class is not an exception")),
    }
}

/// Sends one call across the bridge and turns the answer into a value or an exception.
fn call_tool(tool: &str, args: Value, vm: &VirtualMachine) -> PyResult {
    let mut req = Vec::with_capacity(64);
    req.extend_from_slice(tool.as_bytes());
    req.push(0);
    if serde_json::to_writer(&mut req, &args).is_err() {
        return Err(vm.new_runtime_error("could not encode the tool arguments"));
    }
    let answer = host_request(OP_CALL, &req);
    let env = parse_answer(&answer, vm)?;
    envelope_to_result(tool, &env, vm)
}

fn parse_answer(bytes: &[u8], vm: &VirtualMachine) -> PyResult<Value> {
    serde_json::from_slice(bytes)
        .map_err(|e| vm.new_runtime_error(format!("the host sent a malformed answer: {e}")))
}

#[rustpython_vm::pymodule]
mod _ravi_host {
    use super::*;
    use rustpython_vm::builtins::PyStrRef;
    use rustpython_vm::function::FuncArgs;
    use rustpython_vm::types::{Callable, Representable};
    use rustpython_vm::{Py, pyclass};

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
        CLASSES.with(|c| {
            *c.borrow_mut() = Some(Classes {
                artifact,
                chain_file,
                tool_error,
                tool_denied,
                budget_exhausted,
                deferred,
            });
        });
    }

    /// Calls one tool with keyword arguments; returns its result or raises.
    #[pyfunction]
    fn call(name: PyStrRef, args: PyDictRef, vm: &VirtualMachine) -> PyResult {
        let args = to_json(args.as_object(), vm, 0)?;
        call_tool(&name.to_string_lossy(), args, vm)
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
            let cls = with_classes(|c| c.deferred.clone())
                .ok_or_else(|| vm.new_runtime_error("bridge classes not registered"))?;
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
            call_tool(&zelf.tool, Value::Object(map), vm)
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
        let calls: Vec<PyObjectRef> = calls.try_to_value(vm)?;
        let mut batch = Vec::with_capacity(calls.len());
        let mut names = Vec::with_capacity(calls.len());
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
            let name = name.to_string_lossy().into_owned();
            batch.push(serde_json::json!({"name": name, "args": to_json(args, vm, 0)?}));
            names.push(name);
        }
        let answer = host_request(OP_PARALLEL, Value::Array(batch).to_string().as_bytes());
        let answer = parse_answer(&answer, vm)?;
        let envs = answer.as_array().cloned().unwrap_or_default();
        if envs.len() != names.len() {
            return Err(vm.new_runtime_error("the host answered a different number of calls"));
        }
        let mut out = Vec::with_capacity(envs.len());
        for (name, env) in names.iter().zip(envs.iter()) {
            let pair = match envelope_to_result(name, env, vm) {
                Ok(v) => vec![vm.ctx.new_bool(true).into(), v],
                Err(e) => vec![vm.ctx.new_bool(false).into(), e.into()],
            };
            out.push(vm.ctx.new_tuple(pair).into());
        }
        Ok(vm.ctx.new_list(out).into())
    }

    /// The remaining budget as a dict.
    #[pyfunction]
    fn budget(vm: &VirtualMachine) -> PyResult {
        let answer = host_request(OP_BUDGET, b"{}");
        let env = parse_answer(&answer, vm)?;
        envelope_to_result("budget", &env, vm)
    }
}

/// Set iteration in CPython's order.
///
/// RustPython keeps sets in insertion order; CPython iterates its hash table, so
/// `print({x % 3 for x in [3, 8, 1]})` shows `{0, 1, 2}` there and `{0, 2, 1}` here. Scripts
/// (and the expected outputs models reason with) follow CPython, so the `iter` and `repr`
/// slots of `set` and `frozenset` replay CPython 3.11's table (`setobject.c`: 8 slots,
/// linear probing of 9, perturbed probing, growth to 4× `used` when 3/5 full) over the
/// elements in insertion order. Exact for sets built by adding elements (literals,
/// comprehensions, `set(list)`, `.add`); for ints, whose hashes are the same in both, it
/// reproduces CPython's order exactly.
mod cpython_sets {
    use rustpython_vm::builtins::{PyFrozenSet, PySet, PyStr};
    use rustpython_vm::{AsObject, PyObject, PyObjectRef, PyRef, PyResult, VirtualMachine};

    const LINEAR_PROBES: u64 = 9;
    const PERTURB_SHIFT: u32 = 5;
    const MIN_SIZE: u64 = 8;

    pub fn install(vm: &VirtualMachine) {
        for ty in [vm.ctx.types.set_type, vm.ctx.types.frozenset_type] {
            ty.slots.iter.store(Some(iter_slot));
            ty.slots.repr.store(Some(repr_slot));
        }
    }

    fn elements(obj: &PyObject) -> Option<Vec<PyObjectRef>> {
        if let Some(s) = obj.downcast_ref::<PySet>() {
            return Some(s.elements());
        }
        obj.downcast_ref::<PyFrozenSet>().map(|s| s.elements())
    }

    fn free_slot(table: &[Option<usize>], mask: u64, hash: u64) -> usize {
        let mut perturb = hash;
        let mut i = hash & mask;
        loop {
            if table[i as usize].is_none() {
                return i as usize;
            }
            if i + LINEAR_PROBES <= mask {
                for j in 1..=LINEAR_PROBES {
                    if table[(i + j) as usize].is_none() {
                        return (i + j) as usize;
                    }
                }
            }
            perturb >>= PERTURB_SHIFT;
            i = (i.wrapping_mul(5).wrapping_add(1).wrapping_add(perturb)) & mask;
        }
    }

    pub fn order(items: Vec<PyObjectRef>, vm: &VirtualMachine) -> PyResult<Vec<PyObjectRef>> {
        if items.len() < 2 {
            return Ok(items);
        }
        let hashes = items
            .iter()
            .map(|o| o.hash(vm).map(|h| h as u64))
            .collect::<PyResult<Vec<u64>>>()?;
        let mut mask = MIN_SIZE - 1;
        let mut table: Vec<Option<usize>> = vec![None; MIN_SIZE as usize];
        for (idx, &h) in hashes.iter().enumerate() {
            let slot = free_slot(&table, mask, h);
            table[slot] = Some(idx);
            let used = idx as u64 + 1;
            if used * 5 >= mask * 3 {
                let minused = if used > 50_000 { used * 2 } else { used * 4 };
                let mut size = MIN_SIZE;
                while size <= minused {
                    size <<= 1;
                }
                let old = std::mem::replace(&mut table, vec![None; size as usize]);
                mask = size - 1;
                for i in old.into_iter().flatten() {
                    let slot = free_slot(&table, mask, hashes[i]);
                    table[slot] = Some(i);
                }
            }
        }
        Ok(table
            .into_iter()
            .flatten()
            .map(|i| items[i].clone())
            .collect())
    }

    fn iter_slot(zelf: PyObjectRef, vm: &VirtualMachine) -> PyResult {
        let items = elements(&zelf).unwrap_or_default();
        let ordered = order(items, vm)?;
        Ok(vm.ctx.new_list(ordered).as_object().get_iter(vm)?.into())
    }

    fn repr_slot(zelf: &PyObject, vm: &VirtualMachine) -> PyResult<PyRef<PyStr>> {
        let class = zelf.class();
        let name = class.name().to_string();
        let items = elements(zelf).unwrap_or_default();
        if items.is_empty() {
            return Ok(vm.ctx.new_str(format!("{name}()")));
        }
        let mut parts = Vec::with_capacity(items.len());
        for item in vm.with_recursion("while getting the repr of a set", || order(items, vm))? {
            parts.push(item.repr(vm)?.to_string_lossy().into_owned());
        }
        let body = format!("{{{}}}", parts.join(", "));
        Ok(vm.ctx.new_str(if name == "set" {
            body
        } else {
            format!("{name}({body})")
        }))
    }
}

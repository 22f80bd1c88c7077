//! Boot (once, at snapshot time), the exports, and one run: request → script → finish record.

use std::cell::RefCell;

use rustpython::InterpreterBuilderExt;
use rustpython_vm::builtins::{PyBaseExceptionRef, PyDict, PyDictRef, PyInt, PyStr};
use rustpython_vm::scope::Scope;
use rustpython_vm::{
    AsObject, Interpreter, InterpreterBuilder, PyObjectRef, PyPayload, PyResult, Settings,
    VirtualMachine,
};

use crate::abi::{Exhausted, Finish, RunRequest, ScriptError, ToolBinding};
use crate::ravi_host::_ravi_host;
use crate::{ALLOC, arena, cpython_sets, host};

const PRELUDE: &str = include_str!("prelude.py");

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

struct State {
    interp: Interpreter,
    prelude: PyDictRef,
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
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

/// Runs the [`RunRequest`] the host wrote at `ptr` (from [`ravi_alloc`]) and reports its
/// [`Finish`] record.
#[unsafe(no_mangle)]
pub extern "C" fn ravi_run(ptr: *mut u8, len: usize) -> i32 {
    // SAFETY: `ptr`/`len` come from `ravi_alloc(len)`, which leaked a boxed slice of
    // exactly that length; we take it back exactly once.
    let request = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) };
    init();
    arena::start_run(&ALLOC);
    let outcome = match serde_json::from_slice::<RunRequest<'_>>(&request) {
        Ok(req) => run_request(&req),
        Err(e) => bridge_error(&format!("bad run request: {e}")),
    };
    host::finish(&outcome);
    0
}

fn bridge_error(message: &str) -> Finish {
    Finish::Error(ScriptError::new("RaviBridgeError", message, ""))
}

fn run_request(req: &RunRequest<'_>) -> Finish {
    STATE.with(|s| {
        let s = s.borrow();
        let Some(state) = s.as_ref() else {
            return bridge_error("interpreter not initialised");
        };
        state.interp.enter(|vm| {
            let outcome = match run_script(vm, &req.script, &req.filename, &req.tools) {
                Ok(()) => Finish::Ok,
                Err(exc) => describe_exception(vm, &state.prelude, exc),
            };
            flush_stdio(vm);
            outcome
        })
    })
}

thread_local! {
    /// The running script's file name, which tells its frames from the prelude's.
    static SCRIPT_FILE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The line of the running script that is executing now: the innermost frame of the script's
/// own file (a call made through the prelude, e.g. `parallel`, is reported at the script line
/// that called it). `None` outside a script.
pub(crate) fn script_line(vm: &VirtualMachine) -> Option<u32> {
    SCRIPT_FILE.with(|file| {
        let file = file.borrow();
        let mut frame = vm.current_frame();
        while let Some(f) = frame {
            if f.f_code().source_path().as_str() == file.as_str() {
                return u32::try_from(f.lineno()).ok().filter(|l| *l > 0);
            }
            frame = f.f_back(vm);
        }
        None
    })
}

fn run_script(
    vm: &VirtualMachine,
    script: &str,
    filename: &str,
    tools: &[ToolBinding],
) -> PyResult<()> {
    let globals = vm.ctx.new_dict();
    globals.set_item("__name__", vm.ctx.new_str("__main__").into(), vm)?;
    globals.set_item("__builtins__", vm.builtins.clone().into(), vm)?;
    for tool in tools {
        if tool.python_name.is_empty() {
            continue;
        }
        let f = _ravi_host::PyTool {
            pyname: tool.python_name.clone(),
            tool: tool.tool.clone(),
            doc: tool.doc.clone(),
        }
        .into_ref(&vm.ctx);
        globals.set_item(tool.python_name.as_str(), f.into(), vm)?;
    }
    reseed_random(vm);
    SCRIPT_FILE.with(|f| filename.clone_into(&mut f.borrow_mut()));
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

/// The finish record of a script that raised `exc`: its type, message and traceback, and the
/// limit it stands for, if any.
fn describe_exception(vm: &VirtualMachine, prelude: &PyDictRef, exc: PyBaseExceptionRef) -> Finish {
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
    let error = ScriptError::new(ty, message, traceback);
    // By class (subclasses included), not by name: a script's own `MemoryError` is its error.
    let error = if exc.fast_isinstance(vm.ctx.exceptions.memory_error) {
        error.exhausting(Exhausted::Memory)
    } else if exc.fast_isinstance(vm.ctx.exceptions.recursion_error) {
        error.exhausting(Exhausted::Stack)
    } else {
        error
    };
    Finish::Error(error)
}

fn flush_stdio(vm: &VirtualMachine) {
    for name in ["stdout", "stderr"] {
        if let Ok(stream) = vm.sys_module.get_attr(name, vm) {
            let _ = vm.call_method(&stream, "flush", ());
        }
    }
}

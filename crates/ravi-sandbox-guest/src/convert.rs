//! Python values to and from JSON at the boundary, natively (never Python's `json` module,
//! whose `dumps`/`loads` would cost every call tens of microseconds).

use rustpython_vm::builtins::{PyDict, PyFloat, PyInt, PyList, PyStr, PyTuple};
use rustpython_vm::{AsObject, PyObject, PyObjectRef, PyResult, VirtualMachine};
use serde_json::{Map, Value};

use crate::abi::ARTIFACT_KEY;
use crate::handles::{self, Sent};

/// How deep a value may nest when it crosses the bridge.
const MAX_DEPTH: usize = 64;

/// A tool's keyword arguments (a dict with str keys) as a JSON object; `depth` is how deep
/// the dict already sits.
pub(crate) fn dict_to_json(
    d: &PyDict,
    vm: &VirtualMachine,
    depth: usize,
) -> PyResult<Map<String, Value>> {
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
    Ok(map)
}

/// A Python value as JSON: dict, list, tuple, str, int (64 bits), float (finite), bool,
/// None, and the handles (`Artifact` and `ChainFile`, sent by reference).
pub(crate) fn to_json(obj: &PyObject, vm: &VirtualMachine, depth: usize) -> PyResult<Value> {
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
        return dict_to_json(d, vm, depth).map(Value::Object);
    }
    match handles::sent_as(obj, vm)? {
        Some(Sent::Ref(r)) => {
            let mut reference = Map::new();
            reference.insert(ARTIFACT_KEY.to_owned(), to_json(&r, vm, depth + 1)?);
            Ok(Value::Object(reference))
        }
        Some(Sent::Path(p)) => to_json(&p, vm, depth + 1),
        None => Err(vm.new_type_error(format!(
            "cannot send a {} to a tool: use dict, list, tuple, str, int, float, bool, None, \
             Artifact or ChainFile",
            obj.class().name()
        ))),
    }
}

/// A JSON value as plain Python values. Objects become dicts whatever their keys: handles
/// arrive only as their own envelope variants (see [`crate::answer`]).
pub(crate) fn to_py(v: &Value, vm: &VirtualMachine) -> PyResult {
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
            let d = vm.ctx.new_dict();
            for (k, x) in map {
                d.set_item(k.as_str(), to_py(x, vm)?, vm)?;
            }
            d.into()
        }
    })
}

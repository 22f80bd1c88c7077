//! Set iteration in CPython's order.
//!
//! RustPython keeps sets in insertion order; CPython iterates its hash table, so
//! `print({x % 3 for x in [3, 8, 1]})` shows `{0, 1, 2}` there and `{0, 2, 1}` here. Scripts
//! (and the expected outputs models reason with) follow CPython, so the `iter` and `repr`
//! slots of `set` and `frozenset` replay CPython 3.11's table (`setobject.c`: 8 slots,
//! linear probing of 9, perturbed probing, growth to 4× `used` when 3/5 full) over the
//! elements in insertion order. Exact for sets built by adding elements (literals,
//! comprehensions, `set(list)`, `.add`); for ints, whose hashes are the same in both, it
//! reproduces CPython's order exactly.

use rustpython_vm::builtins::{PyFrozenSet, PySet, PyStr};
use rustpython_vm::{AsObject, PyObject, PyObjectRef, PyRef, PyResult, VirtualMachine};

const LINEAR_PROBES: u64 = 9;
const PERTURB_SHIFT: u32 = 5;
const MIN_SIZE: u64 = 8;

/// Replaces the `iter` and `repr` slots of `set` and `frozenset` (once, at boot).
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

/// `items` (a set's elements in insertion order) in the order CPython iterates them.
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

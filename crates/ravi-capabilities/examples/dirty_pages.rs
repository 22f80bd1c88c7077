#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs,
    unsafe_code,
    reason = "deserializing a precompiled module Ravi built and keyed itself (see above)"
)]
include!("../src/chain/engine_config.rs");
use wasmtime::*;
use wasmtime_wasi::p1::WasiP1Ctx;
struct S {
    wasi: WasiP1Ctx,
}
fn main() {
    let path = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| ravi_capabilities::chain::prepared_guest().unwrap());
    let script = std::env::args().nth(2).unwrap_or("print(1)".into());
    let engine = Engine::new(&engine_config(None)).unwrap();
    // SAFETY: the guest this build prepared for this wasmtime and engine config.
    let module = unsafe { Module::deserialize_file(&engine, &path) }.unwrap();
    let mut linker: Linker<S> = Linker::new(&engine);
    wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |s: &mut S| &mut s.wasi).unwrap();
    linker
        .func_wrap(
            "ravi",
            "host_call",
            |_c: Caller<'_, S>, _op: i32, _p: i32, _l: i32| -> i64 { 0 },
        )
        .unwrap();
    linker
        .func_wrap("ravi", "host_take", |_c: Caller<'_, S>, _d: i32| {})
        .unwrap();
    let wasi = wasmtime_wasi::WasiCtxBuilder::new().build_p1();
    let mut store = Store::new(&engine, S { wasi });
    store.set_epoch_deadline(u64::MAX);
    let inst = linker.instantiate(&mut store, &module).unwrap();
    let mem = inst.get_memory(&mut store, "memory").unwrap();
    let before = mem.data(&store).to_vec();
    let req = serde_json::json!({"script": script, "filename": "x.py", "tools": []}).to_string();
    let alloc = inst
        .get_typed_func::<i32, i32>(&mut store, "ravi_alloc")
        .unwrap();
    let run = inst
        .get_typed_func::<(i32, i32), i32>(&mut store, "ravi_run")
        .unwrap();
    let ptr = alloc.call(&mut store, req.len() as i32).unwrap();
    mem.write(&mut store, ptr as usize, req.as_bytes()).unwrap();
    run.call(&mut store, (ptr, req.len() as i32)).unwrap();
    let after = mem.data(&store);
    println!(
        "memory {} KiB before, {} KiB after",
        before.len() >> 10,
        after.len() >> 10
    );
    let mut changed = vec![];
    for (i, (a, b)) in before.chunks(4096).zip(after.chunks(4096)).enumerate() {
        if a != b {
            changed.push(i);
        }
    }
    let grown = (after.len() - before.len()) / 4096;
    let mut regions = 0;
    let mut last = usize::MAX - 1;
    for &p in &changed {
        if p != last + 1 {
            regions += 1;
        }
        last = p;
    }
    println!(
        "{} pages changed in {} regions; {} pages grown",
        changed.len(),
        regions,
        grown
    );
    let mut line = String::new();
    for &p in &changed {
        line.push_str(&format!("{p} "));
    }
    println!("{line}");
}

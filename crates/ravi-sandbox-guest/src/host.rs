//! The host's imports (`ravi.host_call`, `ravi.host_take`) and the requests made over them.
//! Every payload and answer is an [`abi`](crate::abi) type, serialised with serde.

use rustpython_vm::{PyResult, VirtualMachine};
use serde::de::DeserializeOwned;

use crate::abi::{Budget, CallRequest, Envelope, Finish, Op};

// The module and names are `abi::IMPORT_MODULE`, `abi::HOST_CALL` and `abi::HOST_TAKE`
// (attributes take literals only).
#[link(wasm_import_module = "ravi")]
unsafe extern "C" {
    fn host_call(op: i32, ptr: *const u8, len: usize) -> i64;
    fn host_take(dst: *mut u8);
}

/// Sends `payload` with `op` and returns the host's answer (empty when there is none).
fn request(op: Op, payload: &[u8]) -> Vec<u8> {
    // SAFETY: the host reads `payload` within its bounds during the call, then writes
    // exactly the announced number of bytes into the buffer we allocated for it.
    unsafe {
        let len = host_call(op.code(), payload.as_ptr(), payload.len());
        let len = usize::try_from(len).unwrap_or(0);
        let mut buf = vec![0u8; len];
        if len > 0 {
            host_take(buf.as_mut_ptr());
        }
        buf
    }
}

fn decode<T: DeserializeOwned>(answer: &[u8], vm: &VirtualMachine) -> PyResult<T> {
    serde_json::from_slice(answer)
        .map_err(|e| vm.new_runtime_error(format!("the host sent a malformed answer: {e}")))
}

/// Runs a batch of calls (one call is a batch of one): one envelope per call, in order.
pub(crate) fn call(batch: &[CallRequest], vm: &VirtualMachine) -> PyResult<Vec<Envelope>> {
    let payload = serde_json::to_vec(batch)
        .map_err(|e| vm.new_runtime_error(format!("could not encode the tool call: {e}")))?;
    let envelopes: Vec<Envelope> = decode(&request(Op::Call, &payload), vm)?;
    if envelopes.len() != batch.len() {
        return Err(vm.new_runtime_error("the host answered a different number of calls"));
    }
    Ok(envelopes)
}

/// What is left of the run's budget.
pub(crate) fn budget(vm: &VirtualMachine) -> PyResult<Budget> {
    decode(&request(Op::Budget, &[]), vm)
}

/// Reports how the run ended. Encoding a `Finish` cannot fail; if it somehow did, the host
/// would see no report and end the run with its own error.
pub(crate) fn finish(outcome: &Finish) {
    if let Ok(payload) = serde_json::to_vec(outcome) {
        request(Op::Finish, &payload);
    }
}

use ravi_capabilities::fuzzing::abi::{CallRequest, MAX_BATCH, Op};
use ravi_capabilities::fuzzing::frames::{
    FrameError, MAX_MEDIA_TYPE, MAX_MESSAGE_BYTES, calls, file, finish, message_range, over_batch,
};

/// The host side of the code-mode bridge fed the bytes a malicious script's guest could send
/// (a script controls its interpreter, so every byte of a bridge message): operation codes,
/// pointers and lengths into guest memory, call batches, finish records and file frames. Never
/// a panic; a message's range always lies inside the memory and under the size limit; what
/// decodes encodes back to the same value; an over-long batch is answered, not run; a file
/// frame only ever names a path under `/tmp/`.
pub fn bridge_frames(input: &[u8]) {
    // Twelve bytes of header: the operation code, a pointer, a length (as `host_call` gets
    // them); the memory size is the rest's length times a factor the first byte picks.
    let Some((head, payload)) = input.split_first_chunk::<12>() else {
        return;
    };
    let op = i32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let ptr = i32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    let len = i32::from_le_bytes([head[8], head[9], head[10], head[11]]);
    let memory = payload.len() * (usize::from(head[0] % 4) + 1);
    match message_range(ptr, len, memory) {
        Ok(r) => {
            assert!(
                r.start <= r.end && r.end <= memory,
                "{r:?} outside {memory}"
            );
            assert!(r.len() <= MAX_MESSAGE_BYTES);
            assert_eq!(r.len(), usize::try_from(len).unwrap());
        }
        Err(FrameError::TooLarge { len: n }) => assert!(n > MAX_MESSAGE_BYTES),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    match Op::try_from(op) {
        Ok(Op::Call) => match calls(payload) {
            Ok(batch) => {
                let again: Vec<CallRequest> =
                    serde_json::from_slice(&serde_json::to_vec(&batch).unwrap()).unwrap();
                assert_eq!(again, batch, "a batch changed when encoded again");
                match over_batch(batch.len()) {
                    Some(answers) => {
                        assert!(batch.len() > MAX_BATCH);
                        assert_eq!(answers.len(), batch.len(), "one answer per call");
                    }
                    None => assert!(batch.len() <= MAX_BATCH),
                }
            }
            Err(e) => assert!(e.to_string().contains("call batch"), "{e}"),
        },
        Ok(Op::Finish) => match finish(payload) {
            Ok(record) => {
                let wire = serde_json::to_vec(&record).unwrap();
                assert_eq!(finish(&wire).unwrap(), record, "a finish record changed");
            }
            Err(e) => assert!(e.to_string().contains("finish record"), "{e}"),
        },
        Ok(_) => {}
        Err(e) => assert_eq!(e.0, op),
    }
    // The CPython guest's file frame: the same bytes as one.
    if let Some(f) = file(payload) {
        assert!(f.path.starts_with("/tmp/"), "{:?}", f.path);
        assert!(f.media_type.len() <= MAX_MEDIA_TYPE);
        assert!(f.data.len() <= payload.len());
    }
}

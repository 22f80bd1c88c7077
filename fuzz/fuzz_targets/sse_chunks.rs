//! See `ravi_fuzz_targets::sse_chunks`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ravi_fuzz_targets::sse_chunks(data);
});

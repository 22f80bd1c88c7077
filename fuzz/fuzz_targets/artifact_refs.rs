//! See `ravi_fuzz_targets::artifact_refs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ravi_fuzz_targets::artifact_refs(data);
});

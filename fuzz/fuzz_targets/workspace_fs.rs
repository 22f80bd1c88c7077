//! See `ravi_fuzz_targets::workspace_fs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ravi_fuzz_targets::workspace_fs(data);
});

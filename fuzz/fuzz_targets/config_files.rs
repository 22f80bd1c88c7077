//! See `ravi_fuzz_targets::config_files`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ravi_fuzz_targets::config_files(data);
});

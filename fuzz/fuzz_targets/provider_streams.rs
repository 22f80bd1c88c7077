//! See `ravi_fuzz_targets::provider_streams`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ravi_fuzz_targets::provider_streams(data);
});

//! See `ravi_fuzz_targets::provider_schemas`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ravi_fuzz_targets::provider_schemas(data);
});

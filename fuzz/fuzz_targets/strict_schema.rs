//! See `ravi_fuzz_targets::strict_schema`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ravi_fuzz_targets::strict_schema(data);
});

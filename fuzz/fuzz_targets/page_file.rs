#![no_main]
//! See rust/fuzzing: `fuzzing::page_file`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::page_file(data));

#![no_main]
//! See rust/fuzzing: `fuzzing::page_store_recovery`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::page_store_recovery(data));

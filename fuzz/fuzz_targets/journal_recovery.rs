#![no_main]
//! See rust/fuzzing: `fuzzing::journal_recovery`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::journal_recovery(data));

#![no_main]
//! See rust/fuzzing: `fuzzing::data_plane`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::data_plane(data));

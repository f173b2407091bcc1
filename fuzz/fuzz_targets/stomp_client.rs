#![no_main]
//! See rust/fuzzing: `fuzzing::stomp_client`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::stomp_client(data));

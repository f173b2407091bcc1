#![no_main]
//! See rust/fuzzing: `fuzzing::stomp_server`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::stomp_server(data));

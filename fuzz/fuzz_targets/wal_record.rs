//! libFuzzer entry for the `wal_record` target; its body is `bufpool_fuzz::wal_record` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bufpool_fuzz::wal_record(data));

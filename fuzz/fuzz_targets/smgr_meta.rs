//! libFuzzer entry for the `smgr_meta` target; its body is `bufpool_fuzz::smgr_meta` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bufpool_fuzz::smgr_meta(data));

//! libFuzzer entry for the `prewarm_blocks` target; its body is `bufpool_fuzz::prewarm_blocks` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bufpool_fuzz::prewarm_blocks(data));

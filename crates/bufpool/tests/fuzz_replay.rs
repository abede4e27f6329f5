//! Replays the committed fuzz corpora (`fuzz/corpus/<target>/*`) through the fuzz targets'
//! bodies, without libFuzzer, in the normal `cargo test`.
//!
//! Proves: every input the fuzzers kept (the seeds made from real pages, WAL records,
//! control files, SLRU pages, configuration lines and metadata files, what the fuzzers grew
//! from them, and every input that once crashed) still goes through the decoders of the
//! page header and checksum, WAL records, the control file, SLRU pages, the configuration,
//! the data directory's metadata file, access traces, autoprewarm's block list, the
//! configuration file's syntax and the bench's HTTP and socket requests with no panic and with each target's properties
//! holding (see fuzz/src/lib.rs, included here: it is the only copy of the target bodies).
//! The named regression tests below pin the crashes the fuzzers found.
//!
//! `cargo test -p pgbufpool --test fuzz_replay -- --ignored write_seeds` rewrites the seed
//! files (`fuzz/corpus/<target>/seed-*`) from a real engine run in memory.

#[path = "../../../fuzz/src/lib.rs"]
mod targets;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bufpool::config::{Config, PoolSize};
use bufpool::page::{self, PAGE_SIZES};
use bufpool::table::Heap;
use bufpool::wal::record::{self, Invalid};
use bufpool::{Engine, Lsn, MemVfs, RelFileId, Vfs};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

/// Runs every file of `target`'s corpus through its body; returns how many.
fn replay(target: &str) -> usize {
    let (_, body) = targets::TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .expect("a known target");
    let dir = corpus_dir(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    for f in &files {
        let data = std::fs::read(f).expect("a corpus file");
        let run = std::panic::catch_unwind(|| body(&data));
        assert!(run.is_ok(), "{target}: {} panicked", f.display());
    }
    files.len()
}

#[test]
fn every_corpus_has_a_test_and_seeds() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .expect("fuzz/corpus")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut known: Vec<String> = targets::TARGETS
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    known.sort();
    assert_eq!(
        on_disk, known,
        "a corpus directory per target, and no other"
    );
    for name in &known {
        let seeds = std::fs::read_dir(dir.join(name))
            .expect("corpus dir")
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("seed-"))
            })
            .count();
        assert!(seeds > 0, "{name} has no seed from real data");
    }
}

#[test]
fn page_corpus() {
    assert!(replay("page") > 0);
}

#[test]
fn wal_record_corpus() {
    assert!(replay("wal_record") > 0);
}

#[test]
fn control_corpus() {
    assert!(replay("control") > 0);
}

#[test]
fn slru_corpus() {
    assert!(replay("slru") > 0);
}

#[test]
fn config_corpus() {
    assert!(replay("config") > 0);
}

#[test]
fn smgr_meta_corpus() {
    assert!(replay("smgr_meta") > 0);
}

#[test]
fn trace_corpus() {
    assert!(replay("trace") > 0);
}

#[test]
fn prewarm_blocks_corpus() {
    assert!(replay("prewarm_blocks") > 0);
}

#[test]
fn conf_file_corpus() {
    assert!(replay("conf_file") > 0);
}

#[test]
fn http_request_corpus() {
    assert!(replay("http_request") > 0);
}

#[test]
fn socket_request_corpus() {
    assert!(replay("socket_request") > 0);
}

// ---------------------------------------------------------------------------------------
// Regressions: crashes the fuzzers found (each input is also in its corpus as `crash-*`).

/// Found by the `config` target (fields mode, corpus file `crash-block-size-zero`):
/// `Config::validate` divided a pool size given in bytes by `block_size`, so a config with
/// a zero block size (a public field, or `Config::builder().block_size(0)`) panicked with a
/// division by zero instead of being refused.
#[test]
fn regression_config_block_size_zero_is_refused_not_divided_by() {
    let mut c = Config::default();
    c.block_size = 0;
    assert_eq!(c.validate().unwrap_err().knob, "block_size");
    assert_eq!(
        Config::builder().block_size(0).build().unwrap_err().knob,
        "block_size"
    );
}

// ---------------------------------------------------------------------------------------
// Seeds: real files from a real engine run.

fn write_seed(target: &str, name: &str, sel: &[u8], bytes: &[u8]) {
    let dir = corpus_dir(target);
    std::fs::create_dir_all(&dir).unwrap();
    let mut data = sel.to_vec();
    data.extend_from_slice(bytes);
    std::fs::write(dir.join(format!("seed-{name}")), data).unwrap();
}

/// A data directory in memory after a few committed inserts and a checkpoint, with pages of
/// `block_size` bytes.
fn real_directory(block_size: &str) -> MemVfs {
    let vfs = MemVfs::new();
    let mut c = Config::default();
    c.set("shared_buffers", "32").unwrap();
    c.set("block_size", block_size).unwrap();
    c.set("wal_segment_size", "64kB").unwrap();
    let e = Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &c,
        true,
    )
    .unwrap();
    {
        let heap = Heap::create(&e, RelFileId::new(0, 16384)).unwrap();
        for i in 0..3u32 {
            let xid = e.begin_xid().unwrap();
            heap.insert(xid, format!("row {i} of the seed heap").as_bytes())
                .unwrap();
            if i == 1 {
                e.abort_transaction(xid).unwrap();
            } else {
                e.commit_transaction(xid).unwrap();
            }
        }
        e.checkpoint().unwrap();
        let xid = e.begin_xid().unwrap();
        heap.insert(xid, b"after the checkpoint").unwrap();
        e.commit_transaction(xid).unwrap();
    }
    e.shutdown().unwrap();
    vfs
}

/// Every file under `dir` (recursively) with its contents.
fn files_under(vfs: &MemVfs, dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for name in vfs.list_dir(dir).unwrap() {
        let p = dir.join(&name);
        match vfs.contents(&p) {
            Some(bytes) => out.push((p, bytes)),
            None => out.extend(files_under(vfs, &p)),
        }
    }
    out.sort();
    out
}

#[test]
#[ignore = "rewrites fuzz/corpus/*/seed-*; run by hand"]
fn write_seeds() {
    for (sel, block_size) in [(0u8, "4kB"), (1, "8kB")] {
        let ps = PAGE_SIZES[usize::from(sel)];
        let vfs = real_directory(block_size);
        let files = files_under(&vfs, Path::new("/db"));

        // Data pages: the heap's first page, as read (raw mode), and its body for the round
        // trip.
        let (_, heap) = files
            .iter()
            .find(|(p, _)| p.ends_with("base/0/16384"))
            .expect("the heap file");
        let mut tag = Vec::new();
        tag.extend_from_slice(&0u32.to_le_bytes());
        tag.extend_from_slice(&16384u32.to_le_bytes());
        tag.push(0);
        tag.extend_from_slice(&0u32.to_le_bytes());
        let img = &heap[..ps];
        assert_eq!(
            page::verify(
                img,
                &bufpool::BufferTag::new(RelFileId::new(0, 16384), bufpool::ForkNumber::Main, 0)
            ),
            Ok(())
        );
        write_seed(
            "page",
            &format!("heap-{ps}"),
            &[&[sel][..], &tag].concat(),
            img,
        );
        let mut rt = vec![sel | 4];
        rt.extend_from_slice(&tag);
        rt.extend_from_slice(&page::lsn(img).0.to_le_bytes());
        rt.extend_from_slice(&page::flags(img).to_le_bytes());
        rt.extend_from_slice(&((ps as u16).wrapping_sub(page::special(img))).to_le_bytes());
        rt.extend_from_slice(&100u32.to_le_bytes());
        rt.push(3);
        rt.extend_from_slice(&[0x01, 0x80, 0xff, 0x10]);
        write_seed(
            "page",
            &format!("heap-roundtrip-{ps}"),
            &rt,
            &img[page::PAGE_HEADER_SIZE..],
        );

        // WAL records: every record of the first segment, each as its own input (raw).
        let (_, seg) = files
            .iter()
            .find(|(p, _)| p.parent().is_some_and(|d| d.ends_with("wal")))
            .expect("a WAL segment");
        let mut at = 0usize;
        let mut n = 0;
        let mut kinds = std::collections::BTreeSet::new();
        while at + record::HEADER_SIZE <= seg.len() {
            match record::decode(&seg[at..], Lsn(at as u64), ps) {
                Ok(r) => {
                    // One seed per kind and per shape (with or without an image).
                    let shape = (
                        r.kind as u8,
                        r.blocks
                            .iter()
                            .map(|b| matches!(b.change, record::BlockChange::Image(_)))
                            .collect::<Vec<_>>(),
                    );
                    if kinds.insert(shape) {
                        write_seed(
                            "wal_record",
                            &format!("{ps}-{n:02}-kind{}", r.kind as u8),
                            &[sel],
                            &seg[at..at + r.len],
                        );
                        n += 1;
                    }
                    at = r.end().0 as usize;
                }
                Err(Invalid::Zero) => at = (at / 4096 + 1) * 4096,
                Err(_) => break,
            }
        }
        assert!(n >= 3, "the run logged several kinds of record");

        // The commit log page, the control file and the metadata file.
        let (_, xact) = files
            .iter()
            .find(|(p, _)| p.ends_with("xact/0000"))
            .expect("the commit log");
        write_seed("slru", &format!("xact-{ps}"), &[sel | 8, 0, 0], xact);
        let mut generic = xact[..ps].to_vec();
        generic[10] = 0x5a;
        write_seed("slru", &format!("fixed-{ps}"), &[sel | 4, 0, 0], &generic);
        if sel == 1 {
            let (_, ctl) = files
                .iter()
                .find(|(p, _)| p.ends_with("bufpool.control"))
                .expect("the control file");
            write_seed("control", "real", &[0; 25], ctl);
            let body = &ctl[..ctl.len() - "crc32c=00000000\n".len()];
            write_seed("control", "real-body", &[1; 25], body);
        }
        let (_, meta) = files
            .iter()
            .find(|(p, _)| p.ends_with("bufpool.meta"))
            .expect("the metadata file");
        write_seed("smgr_meta", &format!("real-{ps}"), &[sel], meta);
    }

    // Configuration: every knob's default and the README's and CI's settings, as text.
    let mut lines: Vec<String> = bufpool::config::KNOBS
        .iter()
        .map(|k| format!("{}={}", k.name, k.default))
        .collect();
    lines.extend(
        [
            "shared_buffers=64MB",
            "shared_buffers=16",
            "block_size=4kB",
            "segment_size=64kB",
            "wal_segment_size=64kB",
            "wal_buffers=1MB",
            "synchronous_commit=off",
            "checkpoint_timeout=30s",
            "wal_writer_delay=1s",
            "huge_pages=off",
            "wal_sync_method=open_datasync",
        ]
        .map(String::from),
    );
    write_seed(
        "config",
        "defaults-and-settings",
        &[0],
        lines.join("\n").as_bytes(),
    );
    let d = Config::default();
    let mut fields = Vec::new();
    let PoolSize::Bytes(b) = d.shared_buffers else {
        unreachable!("the default is in bytes")
    };
    fields.extend_from_slice(&(b << 1).to_le_bytes());
    fields.extend_from_slice(&(d.block_size as u32).to_le_bytes());
    fields.extend_from_slice(&d.segment_size.to_le_bytes());
    fields.extend_from_slice(&(d.buffer_mapping_partitions as u32).to_le_bytes());
    fields.push(8 | 16); // huge_pages try, synchronous_commit, full_page_writes
    fields.extend_from_slice(&d.wal_segment_size.to_le_bytes());
    fields.extend_from_slice(&0u64.to_le_bytes()); // wal_buffers auto
    fields.extend_from_slice(&d.wal_writer_delay_ms.to_le_bytes());
    fields.extend_from_slice(&d.checkpoint_timeout_ms.to_le_bytes());
    write_seed("config", "default-fields", &[1], &fields);
}

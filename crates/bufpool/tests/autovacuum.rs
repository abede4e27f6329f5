//! Autovacuum: the launcher's threshold, its cost pacing, its stop, and its counters.
//!
//! Proves: a table whose dead versions pass `threshold + scale_factor × live rows` is
//! vacuumed by a round and a table below it is not; the row counters (pg_stat_user_tables)
//! follow inserts, updates, pruning and VACUUM; a paced VACUUM naps once per cost limit
//! spent (page hit 1, read 2, dirtied 20) and an unpaced one never; a stop interrupts both
//! the launcher's nap and a VACUUM in progress (which is then not counted); the launcher
//! runs rounds on its own every naptime; the knobs refuse bad values by name.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use bufpool::table::{
    Autovacuum, AutovacuumOptions, Heap, Tid, VacuumCost, VacuumOptions, VACUUM_COST_PAGE_DIRTY,
    VACUUM_COST_PAGE_HIT, VACUUM_COST_PAGE_MISS,
};
use bufpool::{Config, Engine, MemVfs, RelFileId, Vfs};

const A: RelFileId = RelFileId::new(0, 910);
const B: RelFileId = RelFileId::new(0, 911);

fn open(vfs: &MemVfs) -> Engine {
    let mut c = Config::default();
    c.set("shared_buffers", "64").unwrap();
    c.set("wal_segment_size", "1MB").unwrap();
    Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &c,
        true,
    )
    .unwrap()
}

fn row(id: u64, v: u64) -> Vec<u8> {
    let mut r = id.to_le_bytes().to_vec();
    r.extend_from_slice(&v.to_le_bytes());
    r.extend_from_slice(&[7u8; 84]);
    r
}

fn insert(e: &Engine, heap: &Heap<'_>, n: u64) -> Vec<Tid> {
    let t = e.begin_xid().unwrap();
    let tids = (0..n)
        .map(|i| heap.insert(t, &row(i, 0)).unwrap())
        .collect();
    e.commit_transaction(t).unwrap();
    tids
}

/// Updates each row of `tids` once, in one committed transaction.
fn update(e: &Engine, heap: &Heap<'_>, tids: &[Tid], v: u64) {
    let t = e.begin_xid().unwrap();
    for &tid in tids {
        heap.update(t, tid, |d| {
            row(u64::from_le_bytes(d[..8].try_into().unwrap()), v)
        })
        .unwrap()
        .unwrap();
    }
    e.commit_transaction(t).unwrap();
}

/// PostgreSQL's defaults but for the pacing (off here; measured in its own test).
fn options(naptime: Duration) -> AutovacuumOptions {
    AutovacuumOptions {
        naptime,
        cost: None,
        ..AutovacuumOptions::from_config(&Config::default())
    }
}

#[test]
fn a_table_past_its_threshold_is_vacuumed_and_a_quiet_one_is_not() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let (a, b) = (Heap::create(&e, A).unwrap(), Heap::create(&e, B).unwrap());
    let (ta, tb) = (insert(&e, &a, 200), insert(&e, &b, 200));
    // 200 live rows: due past 50 + 0.2 x 200 = 90 dead versions.
    update(&e, &a, &ta, 1);
    update(&e, &b, &tb[..20], 1);
    let (sa, sb) = (a.row_stats(), b.row_stats());
    assert_eq!((sa.inserted, sa.updated, sa.live), (200, 200, 200));
    assert_eq!(sb.updated, 20);
    let av = Autovacuum::new(options(Duration::from_secs(60)));
    assert_eq!(av.options().dead_limit(&sa), 90.0);
    assert!(
        av.options().due(&sa) && !av.options().due(&sb),
        "{sa:?} {sb:?}"
    );
    let done = av.round(&[("a", &a), ("b", &b)]).unwrap();
    assert_eq!(done, vec!["a".to_string()]);
    // Its I/O is the autovacuum worker's in pg_stat_io (the vacuum ring's context).
    let rows = e.stat_io();
    assert!(
        rows.iter().any(|r| r.backend_type == "autovacuum worker"
            && r.object == "relation"
            && r.hits + r.reads > 0),
        "{rows:#?}"
    );
    let (sa, sb) = (a.row_stats(), b.row_stats());
    assert_eq!((sa.autovacuums, sa.vacuums), (1, 0));
    assert!(sa.last_autovacuum_ms > 0);
    assert_eq!(
        sa.dead, 0,
        "VACUUM removed every dead version and kept none: {sa:?}"
    );
    assert_eq!(sa.live, 200, "the live estimate is VACUUM's count");
    assert_eq!((sb.autovacuums, sb.dead), (0, 20));
    let s = av.stats();
    assert_eq!((s.rounds, s.vacuums), (1, 1));
    assert_eq!(s.per_table, vec![("a".to_string(), 1)]);
    assert!(s.removed >= 1 && s.pages >= 1, "{s:?}");
    // Nothing is due now: the next round vacuums nothing.
    assert!(av.round(&[("a", &a), ("b", &b)]).unwrap().is_empty());
    assert_eq!(av.stats().rounds, 2);
    // A manual VACUUM counts as one.
    b.vacuum(false).unwrap();
    assert_eq!(b.row_stats().vacuums, 1);
}

#[test]
fn a_paced_vacuum_naps_once_per_cost_limit_spent() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, A).unwrap();
    let tids = insert(&e, &heap, 2_000);
    update(&e, &heap, &tids[..500], 1);
    let unpaced = heap.vacuum(false).unwrap();
    assert_eq!(
        (unpaced.cost_naps, unpaced.cost_nap_time),
        (0, Duration::ZERO)
    );
    update(&e, &heap, &tids[500..1000], 2);
    // Written out, so that pruning finds the pages clean and dirties them.
    e.checkpoint().unwrap();
    let limit = 30;
    let cost = VacuumCost {
        limit,
        delay: Duration::from_millis(1),
    };
    let opts = VacuumOptions {
        cost: Some(cost),
        ..VacuumOptions::default()
    };
    let r = heap
        .vacuum_with_options(&opts, heap.vacuum_ring().as_mut())
        .unwrap();
    assert_eq!(r.pages_hit + r.pages_read, u64::from(r.pages), "{r:?}");
    assert!(r.pages_dirtied >= 1, "the updated pages were pruned: {r:?}");
    let spent = r.pages_hit * VACUUM_COST_PAGE_HIT
        + r.pages_read * VACUUM_COST_PAGE_MISS
        + r.pages_dirtied * VACUUM_COST_PAGE_DIRTY;
    // A nap each time the balance reaches the limit, then a new balance: at most one nap
    // per limit spent, and naps that together last the delay per limit of what was spent
    // before the last one (each nap is the delay times its balance over the limit; no
    // balance here passes four limits: a burst of read-ahead is at most 16 reads).
    assert!(
        r.cost_naps >= 1 && r.cost_naps <= spent / limit,
        "{} naps for a cost of {spent}: {r:?}",
        r.cost_naps
    );
    let owed = cost.delay.mul_f64((spent - limit) as f64 / limit as f64);
    assert!(
        r.cost_nap_time >= owed,
        "{:?} of naps, {owed:?} owed",
        r.cost_nap_time
    );
}

#[test]
fn a_stop_interrupts_a_vacuum_and_the_launchers_nap() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, A).unwrap();
    let tids = insert(&e, &heap, 300);
    update(&e, &heap, &tids, 1);
    let stop = AtomicBool::new(true);
    let opts = VacuumOptions {
        interrupt: Some(&stop),
        autovacuum: true,
        ..VacuumOptions::default()
    };
    let r = heap.vacuum_with_options(&opts, None).unwrap();
    assert!(r.interrupted && r.removed == 0, "{r:?}");
    let s = heap.row_stats();
    assert_eq!(
        (s.autovacuums, s.dead),
        (0, 300),
        "an interrupted pass is not counted"
    );
    // A launcher napping for an hour returns as soon as it is stopped (within a minute,
    // or the wake-up was lost).
    let av = Autovacuum::new(options(Duration::from_secs(3600)));
    let (tx, rx) = std::sync::mpsc::channel();
    let stats = std::thread::scope(|s| {
        s.spawn(|| tx.send(av.run(&[("a", &heap)])).unwrap());
        while !av.napping() {
            std::thread::yield_now();
        }
        av.stop();
        rx.recv_timeout(Duration::from_secs(60))
            .expect("the stop woke the nap")
            .unwrap()
    });
    assert_eq!((stats.rounds, stats.vacuums), (0, 0));
}

#[test]
fn the_launcher_looks_at_the_tables_every_naptime() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, A).unwrap();
    let tids = insert(&e, &heap, 300);
    update(&e, &heap, &tids, 1);
    let av = Autovacuum::new(options(Duration::from_secs(1)));
    let stats = std::thread::scope(|s| {
        let h = s.spawn(|| av.run(&[("a", &heap)]));
        let looked = av.wait_for_rounds(2, Duration::from_secs(60));
        av.stop();
        assert!(looked, "two rounds within a minute of 1 s naps");
        h.join().unwrap().unwrap()
    });
    assert!(stats.rounds >= 2 && stats.vacuums == 1, "{stats:?}");
    assert_eq!(heap.row_stats().autovacuums, 1);
}

#[test]
fn the_autovacuum_knobs_are_checked_and_translated() {
    let mut c = Config::default();
    assert_eq!(c.get("autovacuum").unwrap(), "off");
    for (knob, bad) in [
        ("autovacuum_naptime", "0"),
        ("autovacuum_vacuum_scale_factor", "-1"),
        ("autovacuum_vacuum_cost_limit", "0"),
        ("autovacuum_vacuum_cost_delay", "1s"),
    ] {
        let err = c.set(knob, bad).unwrap_err().to_string();
        assert!(err.contains(knob), "{knob}={bad}: {err}");
    }
    c.set("autovacuum_naptime", "5").unwrap();
    c.set("autovacuum_vacuum_scale_factor", "0.05").unwrap();
    c.set("autovacuum_vacuum_cost_limit", "400").unwrap();
    let o = AutovacuumOptions::from_config(&c);
    assert_eq!(o.naptime, Duration::from_secs(5));
    assert_eq!(o.scale_factor, 0.05);
    assert_eq!(
        o.cost,
        Some(VacuumCost {
            limit: 400,
            delay: Duration::from_millis(2)
        })
    );
    c.set("autovacuum_vacuum_cost_delay", "0").unwrap();
    assert_eq!(AutovacuumOptions::from_config(&c).cost, None);
}

/// Counted when made, aborted deletes leave the dead estimate too high and a running
/// insert the live one; the next VACUUM sets both from what it finds (an insert still
/// running is neither live nor dead, as in PostgreSQL), so the errors do not pile up and
/// the table is not due for ever.
#[test]
fn vacuum_resets_the_estimates_that_aborted_and_running_changes_skew() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, A).unwrap();
    let tids = insert(&e, &heap, 100);
    let t = e.begin_xid().unwrap();
    for &tid in &tids[..80] {
        assert!(heap.delete(t, tid).unwrap());
    }
    e.abort_transaction(t).unwrap();
    let s = heap.row_stats();
    assert_eq!((s.live, s.dead), (20, 80), "counted when made: {s:?}");
    let av = Autovacuum::new(options(Duration::from_secs(60)));
    assert!(av.options().due(&s), "80 dead > 50 + 0.2 x 20");
    let running = e.begin_xid().unwrap();
    for i in 0..10 {
        heap.insert(running, &row(1000 + i, 0)).unwrap();
    }
    assert_eq!(av.round(&[("a", &heap)]).unwrap(), vec!["a".to_string()]);
    let s = heap.row_stats();
    assert_eq!((s.live, s.dead), (100, 0), "VACUUM's own counts: {s:?}");
    assert!(!av.options().due(&s));
    e.commit_transaction(running).unwrap();
}

//! The engine's counters as metrics (`bufpool::metrics`): the sample list, its OpenMetrics
//! text, and (feature `metrics`) what reaches a recorder through the `metrics` facade.
//!
//! Proves: the samples carry pg_stat_io's rows with their labels and the engine's values;
//! the text is well formed (a TYPE and HELP line per family before its samples, counters
//! ending `_total`, label values escaped, `# EOF` last); published values equal the
//! samples.

mod common;

use std::path::Path;
use std::sync::Arc;

use bufpool::metrics::{render_openmetrics, samples, Kind, Sample};
use bufpool::{Engine, MemVfs, Vfs};
use common::*;

fn engine() -> Engine {
    let vfs = MemVfs::new();
    let mut c = config("64");
    c.set("wal_segment_size", "1MB").unwrap();
    let e = Engine::open_vfs(Arc::new(vfs) as Arc<dyn Vfs>, Path::new("/db"), &c, true).unwrap();
    fill(e.pool(), 8);
    e.pool().evict_all().unwrap();
    for b in 0..8 {
        drop(e.pool().read(tag(b)).unwrap());
    }
    e.checkpoint().unwrap();
    e
}

fn find<'a>(s: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> &'a Sample {
    s.iter()
        .find(|x| {
            x.name == name
                && labels
                    .iter()
                    .all(|(k, v)| x.labels.iter().any(|(a, b)| a == k && b == v))
        })
        .unwrap_or_else(|| panic!("no {name} {labels:?}"))
}

#[test]
fn samples_carry_the_engines_counters_with_their_labels() {
    let e = engine();
    let s = samples(&e);
    let rows = e.stat_io();
    let backend = rows
        .iter()
        .find(|r| {
            r.backend_type == "client backend" && r.object == "relation" && r.context == "normal"
        })
        .unwrap();
    let reads = find(
        &s,
        "bufpool_io_reads",
        &[
            ("backend_type", "client backend"),
            ("object", "relation"),
            ("context", "normal"),
        ],
    );
    assert_eq!(reads.value, backend.reads as f64);
    assert!(reads.value >= 8.0 && reads.kind == Kind::Counter);
    let used = find(&s, "bufpool_buffers", &[("state", "used")]);
    assert_eq!(used.kind, Kind::Gauge);
    assert_eq!(
        used.value,
        e.pool().buffercache_summary().buffers_used as f64
    );
    let done = find(&s, "bufpool_checkpointer_num_done", &[]);
    assert_eq!(done.value, e.checkpointer_stats().num_done as f64);
    e.shutdown().unwrap();
}

#[test]
fn the_text_is_openmetrics() {
    let e = engine();
    let mut s = samples(&e);
    s.push(Sample {
        name: "bufpool_test",
        help: "a label value to escape",
        kind: Kind::Gauge,
        labels: vec![("v", "a\"b\\c".to_string())],
        value: 1.5,
    });
    let text = render_openmetrics(&s);
    assert!(text.ends_with("# EOF\n"));
    let mut typed = std::collections::HashSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(kind == "counter" || kind == "gauge", "{line}");
            assert!(typed.insert(name.to_string()), "{name} typed twice");
        } else if !line.starts_with('#') {
            let name = line.split(['{', ' ']).next().unwrap();
            let family = name.strip_suffix("_total").unwrap_or(name);
            assert!(typed.contains(family), "{line} before its TYPE");
            let value = line.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }
    assert!(text.contains(
        "bufpool_io_hits_total{backend_type=\"client backend\",object=\"relation\",context=\"normal\"} "
    ));
    assert!(
        text.contains("bufpool_test{v=\"a\\\"b\\\\c\"} 1.5"),
        "{text}"
    );
    e.shutdown().unwrap();
}

#[cfg(feature = "metrics")]
mod facade {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use metrics::{
        Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
    };

    use super::*;

    /// A recorder keeping each series' last value.
    #[derive(Default)]
    struct Capture(Mutex<HashMap<String, Arc<AtomicU64>>>);

    impl Capture {
        fn slot(&self, key: &Key) -> Arc<AtomicU64> {
            let mut labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            let id = format!("{}{{{}}}", key.name(), labels.join(","));
            self.0.lock().unwrap().entry(id).or_default().clone()
        }

        fn get(&self, id: &str) -> u64 {
            self.0.lock().unwrap()[id].load(Ordering::Relaxed)
        }
    }

    impl Recorder for Capture {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            Counter::from_arc(self.slot(key))
        }
        fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::from_arc(self.slot(key))
        }
        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    #[test]
    fn published_values_are_the_samples() {
        let e = engine();
        let rec = Capture::default();
        metrics::with_local_recorder(&rec, || bufpool::metrics::publish(&e));
        let s = samples(&e);
        let reads = find(
            &s,
            "bufpool_io_reads",
            &[
                ("backend_type", "client backend"),
                ("object", "relation"),
                ("context", "normal"),
            ],
        );
        assert_eq!(
            rec.get("bufpool_io_reads{backend_type=client backend,context=normal,object=relation}"),
            reads.value as u64
        );
        let used = find(&s, "bufpool_buffers", &[("state", "used")]);
        let bits = rec.get("bufpool_buffers{state=used}");
        assert_eq!(f64::from_bits(bits), used.value, "a gauge holds its f64");
        e.shutdown().unwrap();
    }
}

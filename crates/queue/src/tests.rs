//! The queue's parts on their own: settings, records, delays. The whole
//! service runs against the real core in tests/tests/queue (end to end).

use crate::backoff;
use crate::record::{Failure, Record, Stored};
use crate::settings::{Backend, Backoff, Mode, Settings, Sync};
use std::time::Duration;

fn table(text: &str) -> toml::Table {
    toml::from_str(text).unwrap()
}

#[test]
fn settings_defaults_and_every_refusal_names_its_key() {
    let s = Settings::parse(&table("dir = \"/tmp/q\"")).unwrap();
    assert_eq!((s.mode, s.sync, s.retry, s.max_deliveries), (Mode::Destination, Sync::Always, 2, 3));
    assert_eq!(s.retry_on.len(), 4);
    let s = Settings::parse(&table("dir = \"q\"\nsync = \"interval\"\nsync_interval_ms = 5\nretry = 0")).unwrap();
    assert_eq!((s.sync, s.max_deliveries), (Sync::Interval(Duration::from_millis(5)), 1));
    for (text, names) in [
        ("", "settings.dir is required"),
        ("dir = \"q\"\nnope = 1", "unknown setting 'nope'"),
        ("dir = \"q\"\nmode = \"eventually\"", "settings.mode"),
        ("dir = \"q\"\nsync = \"sometimes\"", "settings.sync"),
        ("dir = \"q\"\nsync_interval_ms = 5", "needs sync = \"interval\""),
        ("dir = \"q\"\nretry_on = [\"ok\"]", "settings.retry_on"),
        ("dir = \"q\"\nretry_jitter = 2.0", "settings.retry_jitter"),
        ("dir = \"q\"\ndead_letter = \"x\"", "settings.dead_letter"),
        ("dir = \"q\"\nmax_bytes = 100", "settings.max_bytes"),
        ("dir = \"q\"\nmax_bytes = 100000\nsegment_bytes = 200000", "segment_bytes must be at most max_bytes"),
        ("dir = \"q\"\nbackend = \"jetstream\"", "settings.dir is a setting of the file backend only"),
        ("backend = \"jetstream\"\nsync = \"never\"", "settings.sync is a setting of the file backend only"),
        ("dir = \"q\"\nreplicas = 3", "settings.replicas is a setting of the jetstream backend only"),
        ("backend = \"jetstream\"\nreplicas = 7", "settings.replicas"),
        ("backend = \"jetstream\"\nstream = \"a.b\"", "settings.stream"),
        ("dir = \"q\"\nretry_delay_ms = 500\nretry_max_delay_ms = 100", "retry_max_delay_ms"),
    ] {
        let e = Settings::parse(&table(text)).unwrap_err();
        assert!(e.contains(names), "{text:?}: {e}");
    }
    let s = Settings::parse(&table("backend = \"jetstream\"\nreplicas = 3")).unwrap();
    assert_eq!(s.backend, Backend::JetStream { replicas: 3, stream: None });
    // A delay above the default cap raises the cap rather than failing.
    let s = Settings::parse(&table("dir = \"q\"\nretry_delay_ms = 60000")).unwrap();
    assert_eq!(s.retry_max_delay, Duration::from_secs(60));
}

#[test]
fn records_round_trip_and_garbage_is_refused() {
    let s = Stored {
        id: 7,
        arrived_ms: 1_700_000_000_000,
        expires_ms: 0,
        timeout_ms: 5000,
        priority: -3,
        dead: true,
        attempts: 2,
        history: vec![Failure { attempt: 1, at_ms: 5, status: 1 }, Failure { attempt: 2, at_ms: 9, status: 4 }],
        destination: "/a/b".into(),
        reply_to: "/r/".into(),
        idempotency_key: "k".into(),
        request_info: b"x\0y\0"[..].into(),
        request: [1u8, 2, 3][..].into(),
    };
    for r in [
        Record::Put(s),
        Record::Started { id: 1, attempt: 3 },
        Record::Failed { id: 2, failure: Failure { attempt: 1, at_ms: 2, status: 3 } },
        Record::Dead { id: 3 },
        Record::Revive { id: 4 },
        Record::Done { id: 5 },
    ] {
        let bytes = r.encode();
        assert_eq!(Record::decode(&bytes), Some(r.clone()));
        // Cut short or with a byte more, it is not a record.
        assert_eq!(Record::decode(&bytes[..bytes.len() - 1]), None);
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(Record::decode(&longer), None);
    }
    assert_eq!(Record::decode(&[99, 0, 0]), None);
    assert_eq!(Record::decode(&[]), None);
}

#[test]
fn delays_grow_within_their_cap_and_jitter() {
    let mut s = Settings::parse(&table("dir = \"q\"\nretry_delay_ms = 100\nretry_max_delay_ms = 1000")).unwrap();
    s.backoff = Backoff::Exponential;
    for _ in 0..200 {
        for (failed, base) in [(1u32, 100.0), (2, 200.0), (3, 400.0), (4, 800.0), (5, 1000.0), (40, 1000.0)] {
            let d = backoff::delay(&s, failed).as_secs_f64() * 1000.0;
            assert!(d >= base * 0.8 - 1e-6 && d <= base * 1.2 + 1e-6, "attempt {failed}: {d} ms, base {base}");
        }
    }
    s.backoff = Backoff::Constant;
    s.jitter = 0.0;
    assert_eq!(backoff::delay(&s, 9), Duration::from_millis(100));
}

/// A request of `n` bytes with this id, as the intake makes it.
fn request(id: u64, n: usize) -> Stored {
    Stored {
        id,
        arrived_ms: crate::store::now_ms(),
        expires_ms: 0,
        timeout_ms: 1000,
        priority: 0,
        dead: false,
        attempts: 0,
        history: vec![],
        destination: "/d/x".into(),
        reply_to: String::new(),
        idempotency_key: String::new(),
        request_info: b""[..].into(),
        request: vec![id as u8; n].into(),
    }
}

/// Compaction on a real log: segments whose requests all ended go; the one
/// request left in the oldest segment is written again at the head, after
/// which that segment goes too, and a reopened store still holds it.
#[test]
fn compaction_deletes_drained_segments_and_moves_a_request_that_pins_one() {
    use crate::store::Store;
    let dir = tempfile::tempdir().unwrap();
    let text = format!("dir = {:?}\nsegment_bytes = 65536\nmax_bytes = 16777216", dir.path().to_str().unwrap());
    let settings = Settings::parse(&table(&text)).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut store = Store::open(&settings).unwrap();
        let first = store.take_id();
        for i in 0..120 {
            let id = if i == 0 { first } else { store.take_id() };
            let s = request(id, 2048);
            let pos = store.append_put(&s).await.unwrap();
            store.insert(s, pos, &settings);
        }
        assert!(store.log().active_segment() >= 4, "120 x 2 KiB fill several 64 KiB segments");
        // Every request but the first ends.
        for id in first + 1..first + 120 {
            store.finish(id);
        }
        assert_eq!(store.removable_through(), Some(0), "the first request pins segment 1, and so all");
        let (from, moved) = store.take_relocation(settings.segment_bytes).expect("segment 1 to rewrite");
        assert_eq!((from, moved.len(), moved[0].id), (1, 1, first));
        let records = moved.iter().map(crate::record::encode_put).collect();
        let positions = store.log().append_many(records).await.unwrap();
        store.relocated(from, &moved, &positions);
        let through = store.removable_through().expect("drained segments");
        assert!(through + 1 >= positions[0].segment(), "everything before the rewritten request can go");
        let before = store.log().stats().segments();
        store.log().remove_through_async(through).await.unwrap();
        assert!(store.log().stats().segments() < before);
    });
    drop(rt);
    // Reopened: the one request left, whole.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let store = Store::open(&settings).unwrap();
        assert_eq!(store.len(), 1);
        assert_eq!(store.depth(), 1);
    });
}

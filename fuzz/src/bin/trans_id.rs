//! trans_id handling (PROTOCOL.md 2.2): the stamp (time, node, instance)
//! reads back as written, byte order is time order, the hex form is
//! faithful, and a generator's ids only increase whatever it started from.
#![no_main]

use cumulo_proto::{TransId, TransIdGen};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: ([u8; 16], (u64, u32, u32), (u64, u32, u32), u8)| {
    let (raw, a, b, steps) = input;
    let t = TransId(raw);
    assert_eq!(TransId::new(t.nanos(), t.node_id(), t.instance_id()), t);
    let hex = t.to_hex();
    assert_eq!(hex.len(), 32);
    let parsed: Vec<u8> = (0..16).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap()).collect();
    assert_eq!(parsed, raw);
    let (ta, tb) = (TransId::new(a.0, a.1, a.2), TransId::new(b.0, b.1, b.2));
    assert_eq!((ta.nanos(), ta.node_id(), ta.instance_id()), a);
    assert_eq!(ta.cmp(&tb), a.cmp(&b), "byte order is (time, node, instance) order");
    let mut g = TransIdGen::new(a.1, a.2);
    let mut prev = g.next();
    for _ in 0..steps {
        let next = g.next();
        assert!(next > prev);
        assert_eq!((next.node_id(), next.instance_id()), (a.1, a.2));
        prev = next;
    }
});

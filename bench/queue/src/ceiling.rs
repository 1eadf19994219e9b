//! The ceiling: the least a program must do to acknowledge requests only
//! once they are on disk. Sender threads append their records (a 40-byte
//! header and the body, as a queue's log record has) to one shared buffer;
//! one writer thread takes everything queued, writes it with one write,
//! makes it durable with one fdatasync (`File::sync_data`), then
//! acknowledges every record of the batch: group commit. While the writer
//! waits for the disk, the next batch gathers.
//!
//! No framing on a socket, no routing, no delivery afterwards: what cumulo's
//! queue does besides this is what the ratio to this program measures.

use crate::{latency_fields, new_histogram, record, Load, Window};
use anyhow::Context;
use hdrhistogram::Histogram;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Bytes of a record's header: length, CRC-32 of the rest, id, time
/// enqueued, timeout, priority, flags, and the sender (the fields a queue
/// needs to deliver the request later and answer its sender).
pub const HEADER: usize = 40;

#[derive(clap::Args)]
pub struct CeilingArgs {
    #[command(flatten)]
    pub load: Load,
    /// The folder the log file is written in (the disk measured).
    #[arg(long)]
    pub dir: PathBuf,
    /// One sender, one record in flight: one fdatasync per record, the raw
    /// fdatasync rate of the disk (overrides --senders and --in-flight).
    #[arg(long)]
    pub no_group: bool,
    /// Keep the log file afterwards (it is removed by default).
    #[arg(long)]
    pub keep: bool,
}

/// What senders have handed over and the writer has not taken yet.
struct Pending {
    /// The records, back to back, as they will be written.
    bytes: Vec<u8>,
    /// Who is owed an acknowledgement for each record, and since when.
    waiters: Vec<(usize, Instant)>,
    /// Senders still running: the writer stops when none is left and
    /// nothing is pending.
    senders_left: usize,
}

/// The acknowledgements of one sender: the enqueue times of its records
/// now durable.
#[derive(Default)]
struct AckBox {
    acks: Mutex<Vec<Instant>>,
    ready: Condvar,
}

struct Shared {
    pending: Mutex<Pending>,
    work: Condvar,
    acks: Vec<AckBox>,
    next_id: AtomicU64,
    syncs: AtomicU64,
    records: AtomicU64,
    bytes_written: AtomicU64,
}

pub fn run(mut args: CeilingArgs) -> anyhow::Result<()> {
    if args.no_group {
        args.load.senders = 1;
        args.load.in_flight = 1;
    }
    args.load.check()?;
    std::fs::create_dir_all(&args.dir).with_context(|| format!("cannot create {}", args.dir.display()))?;
    let path = args.dir.join(format!("ceiling-{}.log", std::process::id()));
    let file = File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
    let load = args.load.clone();
    let shared = Arc::new(Shared {
        pending: Mutex::new(Pending {
            bytes: Vec::with_capacity(load.senders * load.in_flight * (HEADER + load.body)),
            waiters: Vec::with_capacity(load.senders * load.in_flight),
            senders_left: load.senders,
        }),
        work: Condvar::new(),
        acks: (0..load.senders).map(|_| AckBox::default()).collect(),
        next_id: AtomicU64::new(1),
        syncs: AtomicU64::new(0),
        records: AtomicU64::new(0),
        bytes_written: AtomicU64::new(0),
    });

    let window = load.window();
    let writer = {
        let shared = shared.clone();
        std::thread::Builder::new().name("writer".into()).spawn(move || write_loop(&shared, file))?
    };
    let senders: Vec<_> = (0..load.senders)
        .map(|index| {
            let (shared, load) = (shared.clone(), load.clone());
            std::thread::Builder::new()
                .name(format!("sender-{index}"))
                .spawn(move || send_loop(&shared, index, &load, window))
        })
        .collect::<Result<_, _>>()?;

    // The writer's counters at both ends of the window: records per
    // fdatasync over the measured time only.
    std::thread::sleep(window.from.saturating_duration_since(Instant::now()));
    let (syncs0, records0, bytes0) = counters(&shared);
    std::thread::sleep(window.until.saturating_duration_since(Instant::now()));
    let (syncs1, records1, bytes1) = counters(&shared);

    let mut latency = new_histogram();
    let mut acked = 0u64;
    for sender in senders {
        let (h, n) = sender.join().map_err(|_| anyhow::anyhow!("a sender thread panicked"))?;
        latency.add(&h)?;
        acked += n;
    }
    writer.join().map_err(|_| anyhow::anyhow!("the writer thread panicked"))??;
    if !args.keep {
        std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
    }

    let seconds = window.seconds();
    let syncs = syncs1 - syncs0;
    let records = records1 - records0;
    println!(
        "ceiling acked={acked} seconds={seconds:.3} acked_per_s={:.1} {} syncs={syncs} syncs_per_s={:.1} \
         records_per_sync={:.2} write_mib_per_s={:.1} senders={} in_flight={} body={} header={HEADER} group={} dir={}",
        acked as f64 / seconds,
        latency_fields(&latency),
        syncs as f64 / seconds,
        if syncs == 0 { 0.0 } else { records as f64 / syncs as f64 },
        (bytes1 - bytes0) as f64 / seconds / (1024.0 * 1024.0),
        load.senders,
        load.in_flight,
        load.body,
        !args.no_group,
        args.dir.display(),
    );
    anyhow::ensure!(acked > 0, "no record was acknowledged in the measured window");
    Ok(())
}

fn counters(shared: &Shared) -> (u64, u64, u64) {
    (
        shared.syncs.load(Ordering::Relaxed),
        shared.records.load(Ordering::Relaxed),
        shared.bytes_written.load(Ordering::Relaxed),
    )
}

/// The writer: takes everything pending, writes it in one write, one
/// fdatasync, then acknowledges each record to its sender.
fn write_loop(shared: &Shared, mut file: File) -> anyhow::Result<()> {
    let mut bytes = Vec::new();
    let mut waiters = Vec::new();
    let mut per_sender: Vec<Vec<Instant>> = vec![Vec::new(); shared.acks.len()];
    loop {
        bytes.clear();
        waiters.clear();
        {
            let mut pending = shared.pending.lock().unwrap();
            while pending.waiters.is_empty() && pending.senders_left > 0 {
                pending = shared.work.wait(pending).unwrap();
            }
            if pending.waiters.is_empty() {
                return Ok(());
            }
            // Swapped, not copied: the senders fill the other buffers
            // while this batch is on its way to the disk.
            std::mem::swap(&mut pending.bytes, &mut bytes);
            std::mem::swap(&mut pending.waiters, &mut waiters);
        }
        file.write_all(&bytes).context("write")?;
        file.sync_data().context("fdatasync")?;
        shared.syncs.fetch_add(1, Ordering::Relaxed);
        shared.records.fetch_add(waiters.len() as u64, Ordering::Relaxed);
        shared.bytes_written.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        for &(sender, since) in &waiters {
            per_sender[sender].push(since);
        }
        for (sender, acks) in per_sender.iter_mut().enumerate() {
            if acks.is_empty() {
                continue;
            }
            let ack_box = &shared.acks[sender];
            ack_box.acks.lock().unwrap().append(acks);
            ack_box.ready.notify_one();
        }
    }
}

/// One sender: keeps `in_flight` records handed over until the window
/// ends, then waits for what it has in flight; returns the latencies and
/// the count of acknowledgements that arrived in the window.
fn send_loop(shared: &Shared, index: usize, load: &Load, window: Window) -> (Histogram<u64>, u64) {
    let body = load.body_bytes();
    let mut records = Vec::with_capacity(load.in_flight * (HEADER + load.body));
    let mut acks = Vec::with_capacity(load.in_flight);
    let mut latency = new_histogram();
    let (mut in_flight, mut acked) = (0usize, 0u64);
    loop {
        if Instant::now() < window.until && in_flight < load.in_flight {
            // Every free place at once, in one hand-over.
            let n = load.in_flight - in_flight;
            records.clear();
            for _ in 0..n {
                encode(&mut records, shared.next_id.fetch_add(1, Ordering::Relaxed), index, &body);
            }
            let now = Instant::now();
            let mut pending = shared.pending.lock().unwrap();
            pending.bytes.extend_from_slice(&records);
            pending.waiters.extend(std::iter::repeat_n((index, now), n));
            drop(pending);
            shared.work.notify_one();
            in_flight += n;
        }
        if in_flight == 0 {
            break;
        }
        {
            let ack_box = &shared.acks[index];
            let mut ready = ack_box.acks.lock().unwrap();
            while ready.is_empty() {
                ready = ack_box.ready.wait(ready).unwrap();
            }
            std::mem::swap(&mut *ready, &mut acks);
        }
        let now = Instant::now();
        in_flight -= acks.len();
        if window.contains(now) {
            for &since in &acks {
                record(&mut latency, now - since);
            }
            acked += acks.len() as u64;
        }
        acks.clear();
    }
    let mut pending = shared.pending.lock().unwrap();
    pending.senders_left -= 1;
    drop(pending);
    shared.work.notify_one();
    (latency, acked)
}

/// Appends one record: the header, then the body.
fn encode(out: &mut Vec<u8>, id: u64, sender: usize, body: &[u8]) {
    let start = out.len();
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    out.extend_from_slice(&((HEADER + body.len()) as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]); // the CRC, below
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&nanos.to_le_bytes());
    out.extend_from_slice(&5000u32.to_le_bytes()); // timeout, ms
    out.extend_from_slice(&[0, 0, 0, 0]); // priority, flags, reserved
    out.extend_from_slice(&(sender as u64).to_le_bytes());
    debug_assert_eq!(out.len() - start, HEADER);
    out.extend_from_slice(body);
    let crc = crc32fast::hash(&out[start + 8..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_its_header_then_its_body_with_a_crc_of_both() {
        let mut out = Vec::new();
        encode(&mut out, 7, 3, b"hello");
        assert_eq!(out.len(), HEADER + 5);
        assert_eq!(u32::from_le_bytes(out[0..4].try_into().unwrap()) as usize, HEADER + 5);
        assert_eq!(u64::from_le_bytes(out[8..16].try_into().unwrap()), 7);
        assert_eq!(u64::from_le_bytes(out[32..40].try_into().unwrap()), 3);
        assert_eq!(&out[HEADER..], b"hello");
        assert_eq!(u32::from_le_bytes(out[4..8].try_into().unwrap()), crc32fast::hash(&out[8..]));
    }

    #[test]
    fn a_short_run_acknowledges_records_in_batches() {
        let dir = std::env::temp_dir().join(format!("queue-bench-test-{}", std::process::id()));
        let args = CeilingArgs {
            load: Load { senders: 2, in_flight: 4, body: 64, duration: 0.3, warmup: 0.0 },
            dir: dir.clone(),
            no_group: false,
            keep: false,
        };
        run(args).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "the log file is removed");
        std::fs::remove_dir(&dir).unwrap();
    }
}

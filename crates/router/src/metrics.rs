//! Counters of what the core did, kept on the event-loop thread (plain
//! integers in `Cell`s, no atomics): core-wide `Stats`, and per service a
//! `ServiceMetrics` that every instance of the service points to, so the hot
//! path counts with one increment on a struct it already holds. They feed the
//! final log line and `GET /metrics` (Prometheus text format, written here).

use cumulo_proto::Status;
use std::cell::Cell;
use std::fmt::Write;

#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// Requests accepted for routing (multicast copies included).
    pub requests: u64,
    /// Answers routed back to their senders.
    pub responses: u64,
    pub forwards: u64,
    pub timeouts: u64,
    pub no_service: u64,
    /// Requests for a configured service that was given up or stopped.
    pub unavailable: u64,
    pub queue_full: u64,
    /// Requests failed because their instance went away.
    pub crashed: u64,
    /// Answers that arrived after their request had timed out.
    pub late: u64,
    /// Connections closed for frames that broke the protocol.
    pub protocol_errors: u64,
    /// Connections closed because they did not read their frames.
    pub slow_consumers: u64,
    /// HELLOs refused for their token, or for a prefix they may not claim.
    pub unauthorized: u64,
    /// Sends and subscriptions refused by the sender's rules
    /// (dest_list_allow / dest_list_deny, core.*_anonymous).
    pub denied: u64,
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "requests {}, responses {}, forwards {}, timeouts {}, no_service {}, unavailable {}, queue_full {}, crashed {}, late {}, protocol_errors {}, slow_consumers {}, unauthorized {}, denied {}",
            self.requests, self.responses, self.forwards, self.timeouts, self.no_service, self.unavailable, self.queue_full,
            self.crashed, self.late, self.protocol_errors, self.slow_consumers, self.unauthorized, self.denied
        )
    }
}

/// Status codes counted one by one (0 ..= UNAVAILABLE); any other code a
/// service returns is counted in the last slot, shown as "OTHER".
pub const STATUS_SLOTS: usize = 15;
const OTHER_SLOT: usize = STATUS_SLOTS - 1;

fn slot(status: Status) -> usize {
    (status.code() as usize).min(OTHER_SLOT)
}

fn slot_name(i: usize) -> &'static str {
    if i == OTHER_SLOT {
        "OTHER"
    } else {
        Status::from_code(i as u16).name()
    }
}

/// Upper bounds of the request-duration histogram, microseconds (100 µs to
/// 10 s: a local round trip to a slow batch job).
pub const DURATION_BOUNDS_US: [u64; 15] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000,
    10_000_000,
];

/// A fixed-bucket histogram: one compare per bucket up to the match, one
/// increment, one add.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Per bucket (not cumulative); the last one is +Inf.
    counts: [Cell<u64>; DURATION_BOUNDS_US.len() + 1],
    sum_us: Cell<u64>,
}

impl Histogram {
    pub fn observe_us(&self, us: u64) {
        let i = DURATION_BOUNDS_US.iter().position(|&b| us <= b).unwrap_or(DURATION_BOUNDS_US.len());
        bump(&self.counts[i]);
        self.sum_us.set(self.sum_us.get() + us);
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().map(Cell::get).sum()
    }

    /// Counts per bucket (not cumulative), the last one +Inf.
    pub fn buckets(&self) -> Vec<u64> {
        self.counts.iter().map(Cell::get).collect()
    }

    /// Its counts as they are now, to send to another thread or to merge.
    pub fn counts(&self) -> HistogramCounts {
        HistogramCounts { counts: self.counts.each_ref().map(Cell::get), sum_us: self.sum_us.get() }
    }
}

/// A `Histogram`'s counts, read: plain integers, `Send`, summed across
/// shards bucket by bucket (the buckets are the same everywhere).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistogramCounts {
    /// Per bucket (not cumulative); the last one is +Inf.
    pub counts: [u64; DURATION_BOUNDS_US.len() + 1],
    pub sum_us: u64,
}

impl HistogramCounts {
    pub fn add(&mut self, other: &HistogramCounts) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.sum_us += other.sum_us;
    }
}

#[inline]
pub fn bump(c: &Cell<u64>) {
    c.set(c.get() + 1);
}

/// What one service did. Shared (`Rc`) by its instances and its record in
/// the supervisor; unmanaged instances share one of their own.
#[derive(Debug, Default)]
pub struct ServiceMetrics {
    /// Requests routed to its instances (delivered or queued).
    pub received: Cell<u64>,
    /// Requests its instances sent (multicast copies included).
    pub sent: Cell<u64>,
    /// Answers its instances returned, by the status they returned.
    pub responses: [Cell<u64>; STATUS_SLOTS],
    /// Requests routed to it that the core ended with an error instead of an
    /// answer (QUEUE_FULL, TIMEOUT, CRASHED, SHUTTING_DOWN).
    pub errors: [Cell<u64>; STATUS_SLOTS],
    /// From acceptance at the core to the answer reaching the core.
    pub duration: Histogram,
    /// Processes restarted after they exited (not counting admin restarts).
    pub restarts: Cell<u64>,
}

impl ServiceMetrics {
    #[inline]
    pub fn answered(&self, status: Status, elapsed_us: u64) {
        bump(&self.responses[slot(status)]);
        self.duration.observe_us(elapsed_us);
    }

    #[inline]
    pub fn failed(&self, status: Status) {
        bump(&self.errors[slot(status)]);
    }

    /// Answers returned, whatever their status.
    pub fn handled(&self) -> u64 {
        self.responses.iter().map(Cell::get).sum()
    }

    pub fn timeouts(&self) -> u64 {
        self.errors[slot(Status::Timeout)].get()
    }

    /// Its counters as they are now (see `ServiceCounts`).
    pub fn counts(&self) -> ServiceCounts {
        ServiceCounts {
            received: self.received.get(),
            sent: self.sent.get(),
            responses: self.responses.each_ref().map(Cell::get),
            errors: self.errors.each_ref().map(Cell::get),
            duration: self.duration.counts(),
            restarts: self.restarts.get(),
        }
    }
}

/// A service's counters read at one moment: plain integers, `Send`, so that
/// a shard can report them to the one serving the admin API, which adds up
/// every shard's (`shards::report`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceCounts {
    pub received: u64,
    pub sent: u64,
    pub responses: [u64; STATUS_SLOTS],
    pub errors: [u64; STATUS_SLOTS],
    pub duration: HistogramCounts,
    pub restarts: u64,
}

impl ServiceCounts {
    pub fn add(&mut self, other: &ServiceCounts) {
        self.received += other.received;
        self.sent += other.sent;
        for (a, b) in self.responses.iter_mut().zip(&other.responses) {
            *a += b;
        }
        for (a, b) in self.errors.iter_mut().zip(&other.errors) {
            *a += b;
        }
        self.duration.add(&other.duration);
        self.restarts += other.restarts;
    }

    /// Answers returned, whatever their status.
    pub fn handled(&self) -> u64 {
        self.responses.iter().sum()
    }

    /// Requests the core ended with an error instead of an answer.
    pub fn failed(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Answers with a status other than OK.
    pub fn error_answers(&self) -> u64 {
        self.responses.iter().skip(1).sum()
    }

    pub fn timeouts(&self) -> u64 {
        self.errors[slot(Status::Timeout)]
    }
}

impl Stats {
    /// Adds another shard's counts.
    pub fn add(&mut self, o: &Stats) {
        self.requests += o.requests;
        self.responses += o.responses;
        self.forwards += o.forwards;
        self.timeouts += o.timeouts;
        self.no_service += o.no_service;
        self.unavailable += o.unavailable;
        self.unauthorized += o.unauthorized;
        self.denied += o.denied;
        self.queue_full += o.queue_full;
        self.crashed += o.crashed;
        self.late += o.late;
        self.protocol_errors += o.protocol_errors;
        self.slow_consumers += o.slow_consumers;
    }
}

/// CPU time and resident memory of this process, from /proc (Linux).
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessUsage {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
}

impl ProcessUsage {
    pub fn read() -> Option<ProcessUsage> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
        let (ticks, pages) = parse_proc(&stat, &statm)?;
        Some(ProcessUsage {
            cpu_seconds: ticks as f64 / cumulo_sys::clock_ticks_per_second() as f64,
            resident_bytes: pages * cumulo_sys::page_size(),
        })
    }
}

/// utime + stime (clock ticks) from /proc/self/stat, and resident pages from
/// /proc/self/statm. The command name in stat may hold spaces and ')', so
/// fields are counted from the last ')'.
fn parse_proc(stat: &str, statm: &str) -> Option<(u64, u64)> {
    let after = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // after ')': state is field 3 of the man page, utime 14, stime 15
    let utime: u64 = f.get(14 - 3)?.parse().ok()?;
    let stime: u64 = f.get(15 - 3)?.parse().ok()?;
    let resident: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some((utime + stime, resident))
}

/// Writes the Prometheus text exposition format (version 0.0.4).
#[derive(Default)]
pub struct PromText {
    pub out: String,
}

/// Label values escaped as the format requires (\\, \", \n).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

impl PromText {
    pub fn header(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    /// One sample per status that has a non-zero count.
    pub fn by_status(&mut self, name: &str, labels: &[(&str, &str)], counts: &[Cell<u64>; STATUS_SLOTS]) {
        self.by_status_counts(name, labels, &counts.each_ref().map(Cell::get));
    }

    /// As `by_status`, from counts read (`ServiceCounts`).
    pub fn by_status_counts(&mut self, name: &str, labels: &[(&str, &str)], counts: &[u64; STATUS_SLOTS]) {
        for (i, &c) in counts.iter().enumerate() {
            if c > 0 {
                let mut l = labels.to_vec();
                l.push(("status", slot_name(i)));
                self.sample(name, &l, c);
            }
        }
    }

    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &Histogram) {
        self.histogram_counts(name, labels, &h.counts());
    }

    /// As `histogram`, from counts read (`HistogramCounts`).
    pub fn histogram_counts(&mut self, name: &str, labels: &[(&str, &str)], h: &HistogramCounts) {
        let mut cumulative = 0;
        let bucket = format!("{name}_bucket");
        for (i, c) in h.counts.iter().enumerate() {
            cumulative += c;
            let le = match DURATION_BOUNDS_US.get(i) {
                Some(us) => format!("{}", *us as f64 / 1e6),
                None => "+Inf".to_string(),
            };
            let mut l = labels.to_vec();
            l.push(("le", &le));
            self.sample(&bucket, &l, cumulative);
        }
        self.sample(&format!("{name}_sum"), labels, h.sum_us as f64 / 1e6);
        self.sample(&format!("{name}_count"), labels, cumulative);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_with_sum_and_count() {
        let h = Histogram::default();
        for us in [50, 100, 101, 3_000, 20_000_000] {
            h.observe_us(us);
        }
        let mut p = PromText::default();
        p.histogram("d_seconds", &[("service", "/a/")], &h);
        let t = p.out;
        assert!(t.contains("d_seconds_bucket{service=\"/a/\",le=\"0.0001\"} 2\n"), "{t}");
        assert!(t.contains("d_seconds_bucket{service=\"/a/\",le=\"0.00025\"} 3\n"), "{t}");
        assert!(t.contains("d_seconds_bucket{service=\"/a/\",le=\"0.005\"} 4\n"), "{t}");
        assert!(t.contains("d_seconds_bucket{service=\"/a/\",le=\"10\"} 4\n"), "{t}");
        assert!(t.contains("d_seconds_bucket{service=\"/a/\",le=\"+Inf\"} 5\n"), "{t}");
        assert!(t.contains("d_seconds_sum{service=\"/a/\"} 20.003251\n"), "{t}");
        assert!(t.contains("d_seconds_count{service=\"/a/\"} 5\n"), "{t}");
        assert_eq!(h.count(), 5);
    }

    #[test]
    fn statuses_and_label_escaping() {
        let m = ServiceMetrics::default();
        m.answered(Status::Ok, 10);
        m.answered(Status::Ok, 10);
        m.answered(Status::Other(999), 10);
        m.failed(Status::Timeout);
        assert_eq!((m.handled(), m.timeouts()), (3, 1));
        let mut p = PromText::default();
        p.by_status("r_total", &[("service", "/q\"\\/")], &m.responses);
        assert_eq!(
            p.out,
            "r_total{service=\"/q\\\"\\\\/\",status=\"OK\"} 2\nr_total{service=\"/q\\\"\\\\/\",status=\"OTHER\"} 1\n"
        );
    }

    #[test]
    fn proc_files_parse_even_with_odd_command_names() {
        let stat = "4242 (cu mo) lo) S 1 4242 4242 0 -1 4194560 500 0 0 0 170 30 0 0 20 0 3 0 100 9000000 2048 18446744073709551615";
        assert_eq!(parse_proc(stat, "5000 2048 300 10 0 400 0\n"), Some((200, 2048)));
        assert_eq!(parse_proc("garbage", "1 2"), None);
        let live = ProcessUsage::read().expect("/proc/self is readable on Linux");
        assert!(live.resident_bytes > 0);
    }
}

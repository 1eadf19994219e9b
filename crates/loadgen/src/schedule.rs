//! Open-loop pacing. The schedule, not the answers, says when each request
//! is due: request k of the run is due at `start + k / rate`, whether or not
//! earlier ones were answered. A sender that waits for answers before
//! sending more (closed loop) sends less exactly when the service is slow,
//! and never measures the requests it failed to send: its latencies hide the
//! stalls ("coordinated omission"). Here latency is measured from the time a
//! request was due, so a stall shows up in every request it delayed.
//!
//! The load is split over lanes (connections, or internal instances): lane i
//! of n sends requests i, i + n, i + 2n, ... of the schedule, so together
//! they send evenly spaced requests at the full rate.

use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Timer resolution of the event loop (tokio's timer wheel): lateness up to
/// this much is the pacer's, not the service's, and is not counted as latency.
pub const TIMER_RESOLUTION: Duration = Duration::from_millis(1);

/// What the lanes should do now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// `rate` requests per second in total, counted from `start`.
    Rate { start: Instant, rate: f64 },
    /// Each lane sends its next request as soon as the previous one is
    /// answered (closed loop; latency is then from the actual send).
    AsFastAsPossible,
    /// Closed loop with at most this many requests in flight per lane: the
    /// dynamic search's probe of the capacity (enough to keep the target's
    /// queue full, not so many that they crowd its queue limits).
    Probe { inflight_per_lane: usize },
    /// Send nothing for now (between ticks of a rate search).
    Paused,
    /// The run is over.
    Stopped,
}

/// The current pace, with a generation so lanes notice every change.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub generation: u64,
    pub pace: Pace,
}

pub fn channel() -> (watch::Sender<Schedule>, watch::Receiver<Schedule>) {
    watch::channel(Schedule { generation: 0, pace: Pace::Paused })
}

/// Sets a new pace (a new generation).
pub fn set(tx: &watch::Sender<Schedule>, pace: Pace) {
    tx.send_modify(|s| {
        s.generation += 1;
        s.pace = pace;
    });
}

/// When one lane's requests are due.
pub struct Pacer {
    lane: u64,
    lanes: u64,
    rx: watch::Receiver<Schedule>,
    current: Schedule,
    /// This lane's next request, counted in its own sequence.
    k: u64,
}

/// The next thing a lane should do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Due {
    /// Send one request, due at this instant.
    At(Instant),
    /// Closed loop: send now, latency from the actual send.
    Now,
    Stop,
}

impl Pacer {
    pub fn new(lane: usize, lanes: usize, rx: watch::Receiver<Schedule>) -> Pacer {
        let current = *rx.borrow();
        Pacer { lane: lane as u64, lanes: lanes.max(1) as u64, rx, current, k: 0 }
    }

    /// The due time of this lane's k-th request under a rate.
    fn due(&self, start: Instant, rate: f64) -> Instant {
        let index = self.k * self.lanes + self.lane;
        start + Duration::from_secs_f64(index as f64 / rate)
    }

    /// Waits until this lane's next request is due. A lane that fell behind
    /// gets its overdue requests at once, one per call (they are still
    /// measured from when they were due).
    pub async fn next(&mut self) -> Due {
        loop {
            // (changed() below marks a new value as seen: compare
            // generations, not has_changed())
            let s = *self.rx.borrow_and_update();
            if s.generation != self.current.generation {
                self.current = s;
                self.k = 0;
            }
            match self.current.pace {
                Pace::Stopped => return Due::Stop,
                Pace::AsFastAsPossible | Pace::Probe { .. } => return Due::Now,
                Pace::Paused => {
                    if self.rx.changed().await.is_err() {
                        return Due::Stop;
                    }
                }
                Pace::Rate { start, rate } => {
                    let at = self.due(start, rate);
                    if at <= Instant::now() {
                        self.k += 1;
                        return Due::At(at);
                    }
                    tokio::select! {
                        _ = tokio::time::sleep_until(at.into()) => {
                            self.k += 1;
                            return Due::At(at);
                        }
                        r = self.rx.changed() => if r.is_err() { return Due::Stop },
                    }
                }
            }
        }
    }
}

impl Pacer {
    /// Most requests in flight on this lane now: the lane's own limit, or
    /// the probe's when lower.
    pub fn inflight_cap(&self, lane_max: usize) -> usize {
        match self.current.pace {
            Pace::Probe { inflight_per_lane } => lane_max.min(inflight_per_lane.max(1)),
            _ => lane_max,
        }
    }
}

/// Where latency is measured from: when the request was due, forgiving the
/// timer's resolution (a request sent within 1 ms of its due time counts
/// from when it was sent; one sent later counts all but that 1 ms).
pub fn latency_origin(due: Instant, sent: Instant) -> Instant {
    sent.min(due + TIMER_RESOLUTION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn lanes_interleave_into_one_even_schedule() {
        let (tx, rx) = channel();
        let start = Instant::now();
        set(&tx, Pace::Rate { start, rate: 1000.0 });
        let mut lanes: Vec<Pacer> = (0..3).map(|i| Pacer::new(i, 3, rx.clone())).collect();
        let mut due = Vec::new();
        for lane in lanes.iter_mut() {
            for _ in 0..4 {
                match lane.next().await {
                    Due::At(t) => due.push(t.duration_since(start)),
                    other => panic!("{other:?}"),
                }
            }
        }
        due.sort();
        let want: Vec<Duration> = (0..12).map(Duration::from_millis).collect();
        assert_eq!(due, want);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_new_pace_restarts_the_sequence_and_stop_ends_it() {
        let (tx, rx) = channel();
        let mut p = Pacer::new(0, 1, rx);
        let t0 = Instant::now();
        set(&tx, Pace::Rate { start: t0, rate: 10.0 });
        assert_eq!(p.next().await, Due::At(t0));
        assert_eq!(p.next().await, Due::At(t0 + Duration::from_millis(100)));
        let t1 = Instant::now() + Duration::from_secs(5);
        set(&tx, Pace::Rate { start: t1, rate: 2.0 });
        assert_eq!(p.next().await, Due::At(t1));
        set(&tx, Pace::AsFastAsPossible);
        assert_eq!(p.next().await, Due::Now);
        assert_eq!(p.inflight_cap(1024), 1024);
        set(&tx, Pace::Probe { inflight_per_lane: 64 });
        assert_eq!(p.next().await, Due::Now);
        assert_eq!((p.inflight_cap(1024), p.inflight_cap(8)), (64, 8));
        set(&tx, Pace::Stopped);
        assert_eq!(p.next().await, Due::Stop);
    }

    #[test]
    fn lateness_within_the_timer_resolution_is_forgiven() {
        let due = Instant::now();
        let early = due + Duration::from_micros(300);
        assert_eq!(latency_origin(due, early), early);
        let late = due + Duration::from_millis(40);
        assert_eq!(latency_origin(due, late), due + TIMER_RESOLUTION);
    }
}

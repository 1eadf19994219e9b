use crate::*;
use cumulo_config::policy::{BreakerConfig, OutlierConfig, PolicyConfig, RetryConfig};
use cumulo_proto::Status;
use std::time::{Duration, Instant};

fn policy(name: &str, destinations: &[&str]) -> PolicyConfig {
    PolicyConfig {
        name: name.into(),
        destinations: destinations.iter().map(|d| d.to_string()).collect(),
        timeout_ms: 0,
        retry: Some(RetryConfig::default()),
        circuit_breaker: None,
        outlier: None,
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn the_most_specific_destination_wins_whatever_the_order() {
    let mut p = Policies::new(&[
        policy("default", &["*"]),
        policy("pay", &["/pay/*"]),
        policy("pay-charge", &["/pay/charge/*"]),
        policy("exact", &["/pay/charge/now"]),
    ]);
    let name = |p: &mut Policies, n: &str| p.for_name(n).map(|x| x.name.clone());
    assert_eq!(name(&mut p, "/pay/charge/now").as_deref(), Some("exact"));
    assert_eq!(name(&mut p, "/pay/charge/later").as_deref(), Some("pay-charge"));
    assert_eq!(name(&mut p, "/pay/refund").as_deref(), Some("pay"));
    assert_eq!(name(&mut p, "/other").as_deref(), Some("default"));
    let mut none = Policies::new(&[policy("pay", &["/pay/*"])]);
    assert!(none.for_name("/other").is_none());
}

#[test]
fn names_remembered_are_bounded() {
    let mut p = Policies::new(&[policy("pay", &["/pay/*"])]);
    for i in 0..MAX_CACHED_NAMES + 10 {
        assert!(p.for_name(&format!("/pay/{i}")).is_some());
    }
    assert!(p.cache_len() <= MAX_CACHED_NAMES);
}

#[test]
fn backoff_doubles_up_to_its_ceiling_within_the_jitter() {
    let r = Policy::new(
        0,
        &PolicyConfig {
            retry: Some(RetryConfig { interval_ms: 10, max_interval_ms: 35, jitter: 0.2, ..Default::default() }),
            ..policy("p", &["*"])
        },
    )
    .retry
    .unwrap();
    assert_eq!(r.delay(1, 0.5), ms(10));
    assert_eq!(r.delay(2, 0.5), ms(20));
    assert_eq!(r.delay(3, 0.5), ms(35), "40 ms capped at max_interval");
    assert_eq!(r.delay(1, 0.0), ms(8));
    assert!(r.delay(1, 0.999_999) <= ms(12));
    assert!(r.retries(Status::NoService) && r.retries(Status::QueueFull));
    assert!(!r.retries(Status::Timeout) && !r.retries(Status::ServiceError), "not by default: the work may have run");
    assert!(!r.needs_copy());
}

fn breaker_settings(c: BreakerConfig) -> BreakerSettings {
    Policy::new(0, &PolicyConfig { circuit_breaker: Some(c), ..policy("p", &["*"]) }).breaker.unwrap()
}

#[test]
fn a_breaker_trips_refuses_half_opens_closes_and_reopens() {
    let s = breaker_settings(BreakerConfig { consecutive_failures: 3, open_ms: 100, ..Default::default() });
    let t0 = Instant::now();
    let mut b = Breaker::new(t0);
    for _ in 0..2 {
        assert_eq!(b.admit(&s, t0), Admission::Pass);
        assert_eq!(b.record(&s, true, false, t0), None);
    }
    assert_eq!(b.record(&s, false, false, t0), None, "a success ends the run");
    for _ in 0..2 {
        b.record(&s, true, false, t0);
    }
    assert_eq!(b.record(&s, true, false, t0), Some(BreakerState::Open));
    assert_eq!(b.admit(&s, t0 + ms(10)), Admission::Refused(ms(90)));
    assert_eq!(b.state(t0 + ms(100)), BreakerState::HalfOpen);
    assert_eq!(b.admit(&s, t0 + ms(100)), Admission::Probe);
    assert_eq!(b.admit(&s, t0 + ms(101)), Admission::Refused(Duration::ZERO), "one probe at a time");
    assert_eq!(b.record(&s, true, true, t0 + ms(102)), Some(BreakerState::Open), "a failed probe reopens it");
    assert_eq!(b.admit(&s, t0 + ms(150)), Admission::Refused(ms(52)));
    assert_eq!(b.admit(&s, t0 + ms(202)), Admission::Probe);
    assert_eq!(b.record(&s, false, true, t0 + ms(203)), Some(BreakerState::Closed));
    assert_eq!(b.admit(&s, t0 + ms(204)), Admission::Pass);
    assert_eq!((b.trips(), b.refused()), (2, 3));
}

#[test]
fn a_breaker_trips_on_a_failure_ratio_over_its_window() {
    let s = breaker_settings(BreakerConfig {
        consecutive_failures: 0,
        failure_ratio: 0.5,
        window: 4,
        ..Default::default()
    });
    let t0 = Instant::now();
    let mut b = Breaker::new(t0);
    for failed in [true, false, true] {
        assert_eq!(b.record(&s, failed, false, t0), None, "judged once the window is full");
    }
    assert_eq!(b.record(&s, false, false, t0), Some(BreakerState::Open), "2 of 4");
}

#[test]
fn a_lost_probe_does_not_hold_the_breaker_half_open() {
    let s = breaker_settings(BreakerConfig { consecutive_failures: 1, open_ms: 100, ..Default::default() });
    let t0 = Instant::now();
    let mut b = Breaker::new(t0);
    b.record(&s, true, false, t0);
    assert_eq!(b.admit(&s, t0 + ms(100)), Admission::Probe);
    assert_eq!(b.admit(&s, t0 + ms(150)), Admission::Refused(Duration::ZERO));
    assert_eq!(b.admit(&s, t0 + ms(200)), Admission::Probe, "another probe after another open_ms");
    b.reset();
    assert_eq!(b.state(t0), BreakerState::Closed);
}

#[test]
fn an_outlier_is_ejected_for_longer_while_it_keeps_failing() {
    let s = Policy::new(
        0,
        &PolicyConfig {
            outlier: Some(OutlierConfig {
                consecutive_failures: 2,
                ejection_ms: 100,
                max_ejection_ms: 250,
                ..Default::default()
            }),
            ..policy("p", &["*"])
        },
    )
    .outlier
    .unwrap();
    let t0 = Instant::now();
    let mut o = Outlier::default();
    assert!(!o.record(&s, true));
    assert!(o.record(&s, true));
    assert_eq!(o.eject(&s, t0), t0 + ms(100));
    assert!(o.is_out(t0 + ms(99)) && !o.is_out(t0 + ms(100)));
    o.record(&s, true);
    o.record(&s, true);
    assert_eq!(o.eject(&s, t0), t0 + ms(200));
    o.record(&s, true);
    o.record(&s, true);
    assert_eq!(o.eject(&s, t0), t0 + ms(250), "at most max_ejection");
    assert!(!o.record(&s, false));
    assert_eq!(o.ejections(), 0, "a success forgets the ejections");
    assert!(!o.is_out(t0));
}

#[test]
fn status_sets_hold_what_they_were_given() {
    let s = StatusSet::of(&[Status::Timeout, Status::Crashed]);
    assert!(s.contains(Status::Timeout) && !s.contains(Status::Ok));
    assert_eq!(s.names(), vec!["TIMEOUT", "CRASHED"]);
}

//! The cron service (docs/CRON.md): events on time, once each, and a bad
//! schedule refused at load with its file, field and reason.

use cumulo::{Answer, Request};
use cumulo_e2e::*;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How late past its second an event may reach its destination.
const ON_TIME: Duration = Duration::from_millis(50);

/// `internal = "cron"` at `/cron/` with these jobs (TOML inline tables).
fn cron(jobs: &[&str]) -> Service {
    Service::internal("/cron/", "cron")
        .set("settings", format!("{{ timezone = \"utc\", job = [ {} ] }}", jobs.join(", ")))
}

fn unix_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// One request as the destination saw it.
struct Seen {
    arrived_ms: i64,
    job: String,
    unix: i64,
    time: String,
    next: String,
    timeout: u32,
}

#[test]
fn an_every_second_job_fires_sixty_times_in_a_minute_each_on_time_once() {
    let core = Core::start(Config::new().service(cron(&[
        "{ name = \"tick\", schedule = \"* * * * * * *\", dest = \"/rec/tick/post\", request = \"hello\" }",
    ])));
    let mut api = core.client_with_prefix("/rec/");
    let seen: Rc<RefCell<Vec<Seen>>> = Rc::default();
    let s = seen.clone();
    api.subscribe("tick/post", move |_, req: &Request<'_>| {
        let arrived_ms = unix_ms(SystemTime::now());
        let i = info(req.request_info);
        assert_eq!(req.request, b"hello");
        s.borrow_mut().push(Seen {
            arrived_ms,
            job: i.get("cron-job").cloned().unwrap_or_default(),
            unix: i.get("cron-unix").and_then(|u| u.parse().ok()).unwrap_or(-1),
            time: i.get("cron-time").cloned().unwrap_or_default(),
            next: i.get("cron-next").cloned().unwrap_or_default(),
            timeout: req.timeout,
        });
        Ok(Answer::body(b"done".to_vec()))
    })
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(75);
    while seen.borrow().len() < 61 {
        assert!(Instant::now() < deadline, "{} events in 75 s", seen.borrow().len());
        api.poll(Some(ms(20))).unwrap();
    }
    // The first event may have raced the subscription: count the 60 after it.
    let seen = seen.borrow();
    let events = &seen[1..61];
    let first = events[0].unix;
    let mut worst = 0;
    for (k, e) in events.iter().enumerate() {
        assert_eq!(e.job, "tick");
        assert_eq!(e.unix, first + k as i64, "event {k}: a second skipped or repeated");
        let late = e.arrived_ms - e.unix * 1000;
        assert!((0..ON_TIME.as_millis() as i64).contains(&late), "event {k} at {}: {late} ms late", e.time);
        worst = worst.max(late);
        assert!(e.time.ends_with('Z') && e.time.len() == 20, "cron-time {}", e.time);
        assert!(!e.next.is_empty() && e.next > e.time, "cron-next {} after {}", e.next, e.time);
        // the default timeout runs to the next event
        assert!(e.timeout <= 1000 && e.timeout > 1000 - ON_TIME.as_millis() as u32 - 20, "timeout {}", e.timeout);
    }
    eprintln!("60 events, the latest {worst} ms after its second");
    // The service's own view of its jobs, by name.
    let r = api.send_sync("/cron/jobs.json/get", b"", b"", opts(5000)).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let job = &v["jobs"][0];
    assert_eq!(job["name"], "tick", "{v}");
    assert!(job["ok"].as_u64().unwrap() >= 60, "{v}");
    assert!(job["fired"].as_u64().unwrap() >= 61, "{v}");
    assert!(job["late_ms_max"].as_u64().is_some() && job["next"].is_string(), "{v}");
}

#[test]
fn a_bad_schedule_is_refused_by_check_and_run_with_file_field_and_reason() {
    let dir = TempDir::new();
    let path = dir.0.join("cron.toml");
    std::fs::write(
        &path,
        "[[service]]\nprefix = \"/cron/\"\ninternal = \"cron\"\n[[service.settings.job]]\nname = \"nightly\"\n\
         schedule = \"0 3 32 * *\"\ndest = \"/reports/post\"\n",
    )
    .unwrap();
    let path = path.to_str().unwrap();
    for cmd in ["check", "run"] {
        let o = cumulo_cmd().args([cmd, "--config", path]).output().unwrap();
        let t = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert_eq!(o.status.code(), Some(1), "{cmd}: {t}");
        assert!(t.contains(path), "{cmd}: the file is not named: {t}");
        assert!(t.contains("service[0] (/cron/).settings"), "{cmd}: no field: {t}");
        assert!(t.contains("cron: job[0] (nightly).schedule: day-of-month: 32 is out of range 1-31"), "{cmd}: {t}");
    }
}

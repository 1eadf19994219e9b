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
    let port = free_port();
    let core = Core::start(Config::new().admin("port", port).service(cron(&[
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
    // The same through the admin API, and the counters in /metrics.
    let v: serde_json::Value = serde_json::from_str(&admin_get(port, "/v1/cron")).unwrap();
    assert_eq!(v["cron"][0]["prefix"], "/cron/", "{v}");
    assert_eq!(v["cron"][0]["jobs"][0]["name"], "tick", "{v}");
    let metrics = admin_get(port, "/metrics");
    for name in
        ["cumulo_cron_fired_total", "cumulo_cron_ok_total", "cumulo_cron_failed_total", "cumulo_cron_late_seconds_max"]
    {
        assert!(metrics.contains(&format!("{name}{{cron=\"/cron/\",job=\"tick\"}}")), "no {name} in:\n{metrics}");
    }
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

/// A node of cloud `cloud` on these NATS servers, with an admin port.
fn node(cloud: &str, servers: &[String], name: &str, id: u32) -> Config {
    cluster_node(cloud, servers, name, id, 1000)
}

fn admin_port(cfg: &Config) -> u16 {
    let text = cfg.render("x");
    let at = text.find("[admin]").unwrap();
    text[at..].lines().find_map(|l| l.strip_prefix("port = ")).unwrap().trim().parse().unwrap()
}

/// Waits until the queue at `/q/` reports itself (its stream is set up).
fn wait_queue(core: &Core, port: u16) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = core.admin_cmd(port, &["queues", "--output", "json"]);
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&out) {
            if let Some(q) = v["queues"].as_array().and_then(|l| l.iter().find(|q| q["prefix"] == "/q/")) {
                return q.clone();
            }
        }
        assert!(Instant::now() < deadline, "queue /q/ not up within 30 s; log:\n{}", core.log());
        std::thread::sleep(ms(100));
    }
}

#[test]
fn through_a_jetstream_queue_each_event_of_two_nodes_is_done_once_with_a_node_killed_as_it_fires() {
    let nats = NatsServer::start_jetstream(None);
    let urls = [nats.url()];
    // Both nodes run the same cron and the same queue (one stream); the
    // queue retries NO_SERVICE until the destination is known everywhere.
    let services = |cfg: Config| {
        cfg.service(
            Service::internal("/q/", "queue")
                .set("settings", "{ backend = \"jetstream\", mode = \"accepted\", retry = 100, retry_delay_ms = 100 }"),
        )
        .service(Service::internal("/cron/", "cron").set(
            "settings",
            "{ via = \"/q/\", job = [ { name = \"tick\", schedule = \"* * * * * * *\", dest = \"/rec/tick\" } ] }",
        ))
    };
    let cfg_a = services(node("cron2", &urls, "a", 1));
    let cfg_b = services(node("cron2", &urls, "b", 2));
    let (port_a, port_b) = (admin_port(&cfg_a), admin_port(&cfg_b));
    let a = Core::start(cfg_a);
    let b = Core::start(cfg_b);
    wait_queue(&a, port_a);
    wait_queue(&b, port_b);
    let mut api = a.client_with_prefix("/rec/");
    // (the event's second, the queue's attempt number) of every delivery
    let seen: Rc<RefCell<Vec<(i64, u32)>>> = Rc::default();
    let s = seen.clone();
    api.subscribe("tick", move |_, req: &Request<'_>| {
        let i = info(req.request_info);
        assert!(i.contains_key("queue-id"), "delivered by the queue: {i:?}");
        let unix = i.get("cron-unix").and_then(|u| u.parse().ok()).unwrap_or(-1);
        let attempt = i.get("queue-attempt").and_then(|a| a.parse().ok()).unwrap_or(0);
        s.borrow_mut().push((unix, attempt));
        Ok(Answer::body(b"done".to_vec()))
    })
    .unwrap();
    // Node b is killed (SIGKILL) at the moment of a firing, 6 s in: as the
    // first whole second after that starts, when both crons send that
    // second's event. The loop polls at most 1 ms, so the kill comes at
    // once, or as soon as a busy machine runs this thread again (a window
    // of a few ms to hit could be missed every second).
    let start = Instant::now();
    let end = start + Duration::from_secs(14);
    let kill_ms = (unix_ms(SystemTime::now()) / 1000 + 7) * 1000;
    let mut killed_at: Option<i64> = None;
    while Instant::now() < end {
        api.poll(Some(ms(1))).unwrap();
        let now = unix_ms(SystemTime::now());
        if killed_at.is_none() && now >= kill_ms {
            b.signal(libc::SIGKILL);
            killed_at = Some(kill_ms / 1000);
            eprintln!("node b killed {} ms after its second began", now - kill_ms);
        }
    }
    let killed_at = killed_at.expect("node b killed");
    let seen = seen.borrow();
    let mut counts = std::collections::BTreeMap::new();
    for (u, _) in seen.iter() {
        *counts.entry(*u).or_insert(0) += 1;
    }
    // Every second from the third to the second-last is stored once and done
    // once: with two nodes, at the second node b died in, and with node a
    // alone after it. The one exception is the queue's at-least-once: an
    // event node b had taken from the stream to deliver when it died is
    // delivered again by node a after the ack wait, as a later attempt of the
    // same stored request (never a second copy, which would be attempt 1).
    let (first, last) = (*counts.keys().next().unwrap(), *counts.keys().last().unwrap());
    assert!(last - first >= 10 && last - killed_at >= 5, "events {first}..{last}, b killed at {killed_at}: {counts:?}");
    for u in first + 2..=last - 2 {
        let attempts: Vec<u32> = seen.iter().filter(|(s, _)| *s == u).map(|(_, a)| *a).collect();
        let redelivered = attempts.len() == 2
            && attempts.iter().filter(|a| **a == 1).count() <= 1
            && attempts.iter().any(|a| *a >= 2);
        assert!(
            attempts.len() == 1 || (redelivered && (u - killed_at).abs() <= 1),
            "second {u} done {} times, attempts {attempts:?} (b killed at {killed_at}): {counts:?}",
            attempts.len()
        );
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).map(|(u, _)| *u).collect();
    assert!(twice.len() <= 1, "more than one event done twice: {counts:?}");
    // Both crons fired while both ran; the stream kept one of each pair.
    let duplicates = wait_queue(&a, port_a)["duplicates"].as_u64().unwrap_or(0);
    let fired = |core: &Core| {
        let r = core.client().send_sync("/cron/jobs.json/get", b"", b"", opts(5000)).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        v["jobs"][0]["fired"].as_u64().unwrap()
    };
    let fa = fired(&a);
    assert!(fa >= 12, "node a fired {fa}");
    eprintln!(
        "node a fired {fa}; node b killed at {killed_at}; {} events done, {} of them again after the kill; {duplicates} duplicates at node a",
        counts.len(),
        twice.len()
    );
}

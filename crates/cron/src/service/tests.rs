//! The service against a fake core: what a job sends at each event (name,
//! request_info, timeout), through a queue and by multicast, and how the
//! answers are counted. Real time: an every-second job for about 2.5 s.

use super::run;
use crate::settings::Settings;
use cumulo_service::{info, Report, Request, Response, SendOptions, ServiceApi, ServiceError, Status, TransId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

/// One send as the fake core saw it.
#[derive(Debug, Clone)]
struct Sent {
    mcast: bool,
    name: String,
    info: HashMap<String, String>,
    body: Vec<u8>,
    o: SendOptions,
}

struct NoRequest;

impl Request for NoRequest {
    fn name(&self) -> &str {
        ""
    }
    fn request_info(&self) -> &[u8] {
        b""
    }
    fn body(&self) -> &[u8] {
        b""
    }
    fn priority(&self) -> i8 {
        0
    }
    fn trans_id(&self) -> TransId {
        TransId([0; 16])
    }
    fn remaining_ms(&self) -> u32 {
        1
    }
}

/// Records every send; answers each with `status`; stops the instance
/// after `runs_for`.
struct FakeCore {
    sent: Rc<RefCell<Vec<Sent>>>,
    report: Rc<RefCell<Option<Rc<dyn Report>>>>,
    status: Status,
    runs_for: Duration,
}

impl FakeCore {
    fn record(&self, mcast: bool, name: &str, i: &[u8], body: &[u8], o: SendOptions) {
        let info = info::parse(i)
            .filter_map(Result::ok)
            .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), String::from_utf8_lossy(v).into_owned()))
            .collect();
        self.sent.borrow_mut().push(Sent { mcast, name: name.into(), info, body: body.to_vec(), o });
    }

    fn answer(&self) -> Response {
        Response { trans_id: TransId([0; 16]), status: self.status, response_info: vec![], response: b"why".to_vec() }
    }
}

impl ServiceApi for FakeCore {
    type Request = NoRequest;
    fn prefix(&self) -> &str {
        "/cron/"
    }
    fn process_index(&self) -> u32 {
        0
    }
    fn process_count(&self) -> u32 {
        1
    }
    fn thread_count(&self) -> u32 {
        1
    }
    fn max_request(&self) -> usize {
        1 << 20
    }
    fn max_name(&self) -> usize {
        4096
    }
    fn shard(&self) -> (u32, u32) {
        (0, 1)
    }
    fn open_sibling(&self, _: &str) -> Result<FakeCore, ServiceError> {
        Err(ServiceError::new(Status::InvalidArgument, "cron opens no sibling"))
    }
    fn take_file_handles(&self) {}
    fn subscribe(&self, _: &str) -> Result<(), ServiceError> {
        Ok(())
    }
    fn unsubscribe(&self, _: &str) -> Result<(), ServiceError> {
        Ok(())
    }
    fn is_served(&self, _: &str) -> bool {
        true
    }
    fn next_request(&self) -> impl Future<Output = Option<NoRequest>> {
        let d = self.runs_for;
        async move {
            tokio::time::sleep(d).await;
            None
        }
    }
    fn return_(&self, _: &NoRequest, _: Status, _: &[u8], _: &[u8]) {}
    fn call(
        &self,
        name: &str,
        i: &[u8],
        body: &[u8],
        o: SendOptions,
    ) -> impl Future<Output = Response> + 'static + use<> {
        self.record(false, name, i, body, o);
        let r = self.answer();
        async move { r }
    }
    fn send_async(&self, _: &str, _: &[u8], _: &[u8], _: SendOptions) -> TransId {
        unreachable!("cron sends with call or mcast")
    }
    fn recv_async(&self, _: Option<TransId>) -> impl Future<Output = Response> {
        let r = self.answer();
        async move { r }
    }
    fn mcast_async(&self, name: &str, i: &[u8], body: &[u8], o: SendOptions) -> Vec<TransId> {
        self.record(true, name, i, body, o);
        vec![TransId([1; 16]), TransId([2; 16])]
    }
    fn forward(&self, _: &NoRequest, _: &str, _: &[u8], _: &[u8], _: SendOptions) {}
    fn sender_takes_file_handles(&self, _: &NoRequest) -> bool {
        false
    }
    fn report(&self, report: Rc<dyn Report>) {
        *self.report.borrow_mut() = Some(report);
    }
}

/// Runs a cron with `settings` (TOML) for 2.5 s: what it sent, its report.
fn run_for_a_while(settings: &str, status: Status) -> (Vec<Sent>, serde_json::Value, Vec<cumulo_service::Metric>) {
    let table: toml::Table = toml::from_str(settings).unwrap();
    let settings = Settings::from_settings(&table).unwrap();
    let (sent, report) = (Rc::default(), Rc::default());
    let fake =
        FakeCore { sent: Rc::clone(&sent), report: Rc::clone(&report), status, runs_for: Duration::from_millis(2500) };
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    rt.block_on(tokio::task::LocalSet::new().run_until(async move {
        run(settings, fake).await;
        // let the last answers be counted
        tokio::time::sleep(Duration::from_millis(50)).await;
    }));
    let report = report.borrow().clone().expect("a report");
    let mut metrics = Vec::new();
    report.metrics(&mut metrics);
    let sent = sent.borrow().clone();
    (sent, report.view(), metrics)
}

#[test]
fn each_event_sends_the_request_with_its_keys_and_a_timeout_to_the_next() {
    let (sent, view, metrics) = run_for_a_while(
        "[[job]]\nname = \"tick\"\nschedule = \"* * * * * * *\"\ndest = \"/d/tick\"\nrequest = \"go\"\n\
         request_info = { mine = \"1\" }\npriority = -5",
        Status::Ok,
    );
    assert!((2..=3).contains(&sent.len()), "{sent:?}");
    for (k, s) in sent.iter().enumerate() {
        assert!(!s.mcast && s.name == "/d/tick" && s.body == b"go" && s.o.priority == -5, "{s:?}");
        assert_eq!(s.info["mine"], "1");
        assert_eq!(s.info["cron-job"], "tick");
        let unix: i64 = s.info["cron-unix"].parse().unwrap();
        assert_eq!(s.info["cron-time"], jiff::Timestamp::from_second(unix).unwrap().to_string());
        assert_eq!(s.info["cron-next"], jiff::Timestamp::from_second(unix + 1).unwrap().to_string());
        assert!((500..=1000).contains(&s.o.timeout_ms), "the time to the next event: {s:?}");
        assert!(!s.info.contains_key("idempotency-key"));
        if k > 0 {
            assert_eq!(unix, sent[k - 1].info["cron-unix"].parse::<i64>().unwrap() + 1, "one event a second");
        }
    }
    let job = &view["jobs"][0];
    assert_eq!(job["fired"], sent.len() as u64, "{view}");
    assert_eq!(job["ok"], sent.len() as u64, "{view}");
    assert_eq!(job["failed"], 0, "{view}");
    assert_eq!(view["timezone"], "utc");
    let fired = metrics.iter().find(|m| m.name == "cron_fired_total").unwrap();
    assert_eq!(fired.value, sent.len() as f64);
    assert_eq!(fired.labels, vec![("cron", "/cron/".to_string()), ("job", "tick".to_string())]);
}

#[test]
fn through_a_queue_the_name_and_the_idempotency_key_follow_the_job_and_event() {
    let (sent, _, _) = run_for_a_while(
        "via = \"/q/\"\n[[job]]\nname = \"tick\"\nschedule = \"* * * * * * *\"\ndest = \"/d/tick\"\ntimeout_ms = 777",
        Status::Ok,
    );
    assert!(!sent.is_empty());
    for s in &sent {
        assert_eq!(s.name, "/q/d/tick");
        assert_eq!(s.info["idempotency-key"], format!("/cron/tick:{}", s.info["cron-unix"]));
        assert_eq!(s.o.timeout_ms, 777);
    }
}

#[test]
fn a_multicast_counts_every_copys_answer_and_failures_are_counted() {
    let (sent, view, _) = run_for_a_while(
        "[[job]]\nname = \"all\"\nschedule = \"* * * * * * *\"\ndest = \"/d/all\"\nmcast = true",
        Status::ServiceError,
    );
    assert!(!sent.is_empty() && sent.iter().all(|s| s.mcast && s.name == "/d/all"), "{sent:?}");
    let job = &view["jobs"][0];
    assert_eq!(job["fired"], sent.len() as u64, "{view}");
    assert_eq!(job["failed"], 2 * sent.len() as u64, "two copies each: {view}");
    assert_eq!(job["ok"], 0, "{view}");
}

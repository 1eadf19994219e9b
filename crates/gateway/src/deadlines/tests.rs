use super::*;
use std::future::Future;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Polls `f` once.
async fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    poll_fn(|cx| Poll::Ready(Pin::new(&mut *f).poll(cx))).await
}

const HEAD: Duration = Duration::from_secs(5);
const ANSWER: Duration = Duration::from_secs(3);

fn deadlines() -> Arc<Deadlines> {
    Deadlines::new(Timeouts { head: HEAD, answer: ANSWER, park_after: Duration::ZERO })
}

/// How long until `next` sees the head expire, on the paused clock.
async fn time_to_expiry(d: &Arc<Deadlines>) -> Duration {
    let start = Instant::now();
    let sleep = d.timer();
    tokio::pin!(sleep);
    assert_eq!(d.next(sleep).await, Event::HeadExpired);
    start.elapsed()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_silent_connection_expires_at_the_head_timeout() {
    let d = deadlines();
    assert_eq!(time_to_expiry(&d).await, HEAD);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_idle_time_counts_from_the_end_of_the_last_request() {
    let d = deadlines();
    let watch = tokio::spawn({
        let d = d.clone();
        async move { time_to_expiry(&d).await }
    });
    tokio::time::sleep(Duration::from_secs(4)).await;
    drop(d.serving()); // a request served at 4 s
    assert_eq!(watch.await.unwrap(), Duration::from_secs(4) + HEAD);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_idle_connection_expires_on_time_when_the_timer_fired_during_its_last_request() {
    // A head timeout shorter than the answer time, as in a gateway with
    // header_timeout_ms = 1000 and a longer timeout_ms.
    let d = Deadlines::new(Timeouts {
        head: Duration::from_secs(1),
        answer: Duration::from_secs(3),
        park_after: Duration::ZERO,
    });
    let start = Instant::now();
    let sleep = d.timer();
    tokio::pin!(sleep);
    let mut next = Box::pin(d.next(sleep.as_mut()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let serving = d.serving();
    // The timer fires at 1 s while the request is served, and waits for
    // its answer deadline (3.5 s).
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(poll_once(&mut next).await.is_pending());
    drop(serving); // answered at 1.2 s: the next head is due at 2.2 s
    assert_eq!(next.await, Event::HeadExpired);
    assert_eq!(start.elapsed(), Duration::from_millis(2200));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_request_being_served_never_expires_the_connection() {
    let d = deadlines();
    let serving = d.serving();
    let expiry = tokio::spawn({
        let d = d.clone();
        async move { time_to_expiry(&d).await }
    });
    tokio::time::sleep(HEAD * 10).await;
    assert!(!expiry.is_finished());
    drop(serving);
    assert_eq!(expiry.await.unwrap(), HEAD * 11);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_request_past_its_answer_time_is_overdue_and_the_next_is_not() {
    let d = deadlines();
    let watch = tokio::spawn({
        let d = d.clone();
        async move { time_to_expiry(&d).await }
    });
    let start = Instant::now();
    let serving = d.serving();
    d.overdue().await;
    assert_eq!(start.elapsed(), ANSWER);
    drop(serving);
    let _next = d.serving();
    assert!(tokio::time::timeout(ANSWER / 2, d.overdue()).await.is_err(), "a new request starts on time");
    watch.abort();
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn writes_of_a_response_push_the_wait_for_the_next_head() {
    let d = deadlines();
    let (client, server) = tokio::io::duplex(64);
    let mut stamped = Stamped::new(server, d.clone());
    drop(d.serving());
    let expiry = tokio::spawn({
        let d = d.clone();
        async move { time_to_expiry(&d).await }
    });
    // A response still being written at 4 s and at 8 s (a slow reader).
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_secs(4)).await;
        stamped.write_all(b"more").await.unwrap();
    }
    assert_eq!(expiry.await.unwrap(), Duration::from_secs(8) + HEAD);
    drop(client);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn idle_once_a_request_was_served_and_its_response_written() {
    let d = deadlines(); // park_after zero: at once
    let idle = IdleConnections::default();
    let sleep = d.timer();
    tokio::pin!(sleep);
    let (mut client, server) = tokio::io::duplex(4);
    let mut stamped = Stamped::new(server, d.clone());
    let mut next = Box::pin(d.next_or_idle(sleep.as_mut(), &idle));
    assert!(poll_once(&mut next).await.is_pending(), "nothing served yet");
    let serving = d.serving();
    assert!(poll_once(&mut next).await.is_pending(), "serving");
    drop(serving);
    // A response larger than the socket takes: not idle while it waits.
    let mut write = std::pin::pin!(stamped.write_all(b"a response"));
    assert!(poll_once(&mut write).await.is_pending());
    assert!(poll_once(&mut next).await.is_pending(), "a write waits for the socket");
    let mut got = [0u8; 10];
    let (read, written) = tokio::join!(client.read_exact(&mut got), write);
    assert_eq!((read.unwrap(), written.unwrap(), &got), (10, (), b"a response"));
    assert_eq!(next.await, Event::Idle);
    let mut again = Box::pin(d.next_or_idle(sleep.as_mut(), &idle));
    assert!(poll_once(&mut again).await.is_pending(), "idle once per request");
}

//! A test service written against CloudI's own Rust API (crates.io
//! `cloudi`), run by the core with `protocol = "cloudi"`: the patterns of
//! CloudI's routing rules (test_cloudi.py says what each must answer), as in
//! `cloudi_service.py`. The state of each thread is its index.

use cloudi::{Priority, RequestType, Response, Source, Timeout, TransId, API};

type Api<'s> = API<'s, u32>;

macro_rules! handler {
    ($name:ident, |$request:ident, $me:ident, $api:ident| $body:expr) => {
        #[allow(clippy::too_many_arguments, reason = "the signature of CloudI's request callback")]
        fn $name(
            _: &RequestType,
            _: &str,
            _: &str,
            _: &[u8],
            $request: &[u8],
            _: Timeout,
            _: Priority,
            _: &TransId,
            _: &Source,
            $me: &mut u32,
            $api: &mut Api<'_>,
        ) -> Response {
            let _ = (&$request, &$me, &$api);
            $body
        }
    };
}

handler!(whoami, |request, me, api| Response::Response(me.to_string().into_bytes()));
handler!(star, |request, me, api| Response::Response(format!("star-{me}").into_bytes()));
handler!(delay, |request, me, api| {
    let ms: u64 = String::from_utf8_lossy(request).parse().unwrap_or(0);
    std::thread::sleep(std::time::Duration::from_millis(ms));
    Response::Response(format!("delay-{ms}").into_bytes())
});

// `count` send_sync to whoami, which every thread subscribes:
// `me:answers from others:answers from me:timeouts`.
handler!(self_send, |request, me, api| {
    let count: u32 = String::from_utf8_lossy(request).parse().unwrap_or(0);
    let (mut others, mut mine, mut timeouts) = (0, 0, 0);
    let name = api.prefix() + "whoami";
    for _ in 0..count {
        let (_, response, tid) = cloudi::unwrap!(api.send_sync(&name, &Vec::new(), Some(2000), None, None));
        if tid.is_timeout() {
            timeouts += 1;
        } else if response == me.to_string().into_bytes() {
            mine += 1;
        } else {
            others += 1;
        }
    }
    Response::Response(format!("{me}:{others}:{mine}:{timeouts}").into_bytes())
});

// mcast_async to the name in the request, every answer collected:
// `me:copies:sorted answers`.
handler!(mcast_to, |request, me, api| {
    let name = api.prefix() + &String::from_utf8_lossy(request);
    let tids = cloudi::unwrap!(api.mcast_async(&name, &Vec::new(), Some(1500), None, None));
    let mut answers = Vec::new();
    for _ in &tids {
        let (_, response, got) = cloudi::unwrap!(api.recv_async(Some(3000), None, None));
        let known = tids.contains(&got);
        answers.push(if known { String::from_utf8_lossy(&response).into_owned() } else { "timeout".into() });
    }
    answers.sort();
    Response::Response(format!("{me}:{}:{}", tids.len(), answers.join(",")).into_bytes())
});

// send_async(slow), send_async(fast), both answered, then recv_async twice
// with no trans_id: the oldest request's answer first.
handler!(oldest, |request, me, api| {
    let name = api.prefix() + "delay";
    cloudi::unwrap!(api.send_async(&name, &b"400".to_vec(), Some(5000), None, None));
    cloudi::unwrap!(api.send_async(&name, &b"0".to_vec(), Some(5000), None, None));
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let (_, first, _) = cloudi::unwrap!(api.recv_async(Some(1000), None, None));
    let (_, second, _) = cloudi::unwrap!(api.recv_async(Some(1000), None, None));
    Response::Response([first, b",".to_vec(), second].concat())
});

fn thread(index: u32) -> cloudi::Result<()> {
    let mut state = index;
    let mut api = API::new(index, &mut state)?;
    api.subscribe("whoami", whoami)?;
    api.subscribe("delay", delay)?;
    api.subscribe("self_send", self_send)?;
    api.subscribe("mcast_to", mcast_to)?;
    api.subscribe("oldest", oldest)?;
    for _ in 0..3 {
        api.subscribe("triple", whoami)?;
    }
    api.subscribe("best/*", star)?;
    if index == 0 {
        api.subscribe("best/x", whoami)?;
    }
    api.poll(-1)?; // returns when the core says to terminate
    println!("thread {index}: terminated");
    Ok(())
}

fn main() {
    let count = cloudi::thread_count().expect("started by a CloudI-protocol core");
    let threads: Vec<_> = (0..count).map(|i| std::thread::spawn(move || thread(i))).collect();
    let mut failed = false;
    for t in threads {
        if !matches!(t.join(), Ok(Ok(()))) {
            failed = true;
        }
    }
    std::process::exit(i32::from(failed));
}

//! send_sync: a request reaches a service process and its answer comes back.

use cumulo_e2e::*;

#[test]
fn echo_through_a_service_process() {
    let core = Core::start(Config::new().service(ts!("/echo/").set("count_thread", 1)));
    let mut api = core.client();
    let r = api.send_sync("/echo/hello", b"", b"payload", opts(5000)).unwrap();
    assert_eq!(r.body, b"payload");
    assert_eq!(field(&r, "tag"), "/echo/");
    assert_eq!(field(&r, "name"), "/echo/hello");
    assert_eq!(field(&r, "pattern"), "/echo/*");
    assert_eq!(field(&r, "sync"), "1", "REQUEST.flags must say it was sent with send_sync");
    let source = ((api.node_id as u64) << 32) | api.instance_id as u64;
    assert_eq!(field(&r, "source"), source.to_string(), "REQUEST.source names the sender");
    let left: u32 = field(&r, "timeout").parse().unwrap();
    assert!(left > 0 && left <= 5000, "the service sees the time left, got {left}");
}

#[test]
fn request_info_and_large_bodies_round_trip() {
    let core = Core::start(Config::new().service(Service::internal("/echo/", "echo").probe("/echo/x")));
    let mut api = core.client();
    let info_in = cumulo::info::encode(&[("k1", "v1"), ("k2", ""), ("k1", "again")]);
    let body: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let r = api.send_sync("/echo/big", &info_in, &body, opts(10_000)).unwrap();
    assert_eq!(r.info, info_in);
    assert!(r.body == body, "a 3 MB body came back altered ({} bytes)", r.body.len());
}

#[test]
fn the_http_req_example_answers() {
    let http_req = cumulo_bin().with_file_name("http_req");
    assert!(http_req.is_file(), "build it: cargo build --release --workspace");
    let svc = Service::program("/tests/http_req/", http_req.to_str().unwrap()).probe("/tests/http_req/rust.xml/get");
    let core = Core::start(Config::new().service(svc));
    let mut api = core.client();
    let req = cumulo::info::encode(&[("value", "+007")]);
    let r = api.send_sync("/tests/http_req/rust.xml/get", b"", &req, opts(5000)).unwrap();
    assert_eq!(r.body, b"<http_test><value>7</value></http_test>");
    assert_eq!(info(&r.info)["content-type"], "text/xml; charset=utf-8");
    let r = api.send_sync("/tests/http_req/rust.xml/get", b"", b"", opts(5000)).unwrap();
    assert_eq!(r.body, b"<http_test><error>no value specified</error></http_test>");
}

#[test]
fn many_requests_in_a_row_on_one_connection() {
    let core = Core::start(Config::new().service(ts!("/echo/")));
    let mut api = core.client();
    for i in 0..200 {
        let body = format!("n{i}");
        let r = api.send_sync("/echo/x", b"", body.as_bytes(), opts(5000)).unwrap();
        assert_eq!(r.body, body.as_bytes());
        assert_eq!(field(&r, "seq"), (i + 1).to_string());
    }
}

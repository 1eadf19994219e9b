//! Who may connect, claim a name and send (docs/SECURITY.md): a stranger on
//! the TCP listener cannot take a service's requests; named clients are
//! admitted by token to the prefixes they are given; every call kind is
//! held to the sender's dest_list_allow / dest_list_deny.

use cumulo_e2e::*;
use std::path::Path;
use std::time::Duration;

const TOOLS_TOKEN: &str = "tools-0123456789abcdef";
const APP_TOKEN: &str = "app-0123456789abcdef";
const FWD_TOKEN: &str = "fwd-0123456789abcdef";

fn refused(r: Result<Api, Error>) -> String {
    match r {
        Ok(_) => panic!("admitted"),
        Err(e) => {
            assert_eq!(e.status(), Some(Status::Unauthorized), "{e}");
            e.to_string()
        }
    }
}

fn over(socket: &str, token: &str, prefix: &str) -> Result<Api, Error> {
    Api::connect(Options { token: token.into(), ..Options::unmanaged(socket, prefix) })
}

fn status_of(r: Result<Response, Error>) -> Status {
    match r {
        Ok(_) => Status::Ok,
        Err(e) => e.status().unwrap_or_else(|| panic!("no status: {e}")),
    }
}

/// The requests a victim sends to the real service all reach it.
fn all_answered_by_the_service(core: &Core) {
    let mut victim = core.client_with_prefix("/victim/");
    for i in 0..20 {
        let body = format!("transfer {i}");
        let r = victim.send_sync("/bank/transfer", b"", body.as_bytes(), opts(5000)).expect("answered");
        assert_eq!(r.body, body.as_bytes(), "echoed by the bank service");
    }
}

fn prometheus_counter(port: u16, name: &str) -> u64 {
    let text = admin_get(port, "/metrics");
    let line = text.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name} in {text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn a_stranger_on_the_tcp_listener_cannot_claim_a_services_prefix() {
    let (tcp, admin) = (free_port(), free_port());
    let tcp_url = format!("tcp://127.0.0.1:{tcp}");
    let core = Core::start(
        Config::new()
            .core("tcp", q(&format!("127.0.0.1:{tcp}")))
            .admin("port", admin)
            .service(Service::internal("/bank/", "echo").probe("/bank/transfer"))
            .table(&format!("[[client]]\nname = \"tools\"\ntoken = {}\nprefixes = [\"/tools/\"]", q(TOOLS_TOKEN))),
    );
    // Without a token: refused (core.tcp_anonymous = "refuse" by default).
    let why = refused(over(&tcp_url, "", "/bank/"));
    assert!(why.contains("core.tcp_anonymous"), "{why}");
    let why = refused(over(&tcp_url, "", "/tools/"));
    assert!(why.contains("[[client]] token"), "{why}");
    // A wrong token, and a named client claiming what it was not given.
    let why = refused(over(&tcp_url, "tools-0123456789abcdeX", "/tools/"));
    assert!(why.contains("unknown token"), "{why}");
    let why = refused(over(&tcp_url, TOOLS_TOKEN, "/bank/"));
    assert!(why.contains("client 'tools' may not claim the prefix '/bank/'"), "{why}");
    assert_eq!(prometheus_counter(admin, "cumulo_unauthorized_total"), 4);
    assert!(!core.lines_with(&["refused", "127.0.0.1:"]).is_empty(), "the refusals are logged with the peer");

    // The named client is admitted over TCP to its own prefix, and serves.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let stop = core.dir.0.join("stop");
    let (url, stop2) = (tcp_url.clone(), stop.clone());
    let server = std::thread::spawn(move || {
        let mut api = over(&url, TOOLS_TOKEN, "/tools/").expect("the client is admitted");
        api.subscribe("x", |_, _| Ok(cumulo::Answer::body("from tools"))).unwrap();
        ready_tx.send(()).unwrap();
        while !stop2.exists() {
            api.poll(Some(ms(50))).unwrap();
        }
    });
    ready_rx.recv().unwrap();
    let mut c = core.client();
    assert_eq!(c.send_sync("/tools/x", b"", b"", opts(5000)).unwrap().body, b"from tools");
    all_answered_by_the_service(&core);
    std::fs::write(&stop, "").unwrap();
    server.join().unwrap();
}

#[test]
fn outside_services_keeps_tokenless_instances_off_the_services_names() {
    let core = Core::start(
        Config::new()
            .core("unix_anonymous", q("outside_services"))
            .service(Service::internal("/bank/", "echo").probe("/bank/transfer")),
    );
    for (prefix, pattern) in [("/bank/", "*"), ("/", "*"), ("/", "bank/transfer"), ("/ba", "nk/*")] {
        let mut thief = core.client_with_prefix(prefix);
        let e = thief.subscribe(pattern, |_, _| Ok(cumulo::Answer::body("stolen"))).unwrap_err();
        assert_eq!(e.status(), Some(Status::Unauthorized), "{prefix}{pattern}: {e}");
        assert!(e.to_string().contains("the service at '/bank/'"), "{e}");
    }
    // Anywhere else, such an instance serves as before.
    let mut tool = core.client_with_prefix("/tools/");
    tool.subscribe("x", |_, _| Ok(cumulo::Answer::body("tool"))).unwrap();
    all_answered_by_the_service(&core);
}

#[test]
fn a_token_file_must_be_private_to_its_owner() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new();
    let token = dir.0.join("tools.token");
    std::fs::write(&token, format!("{TOOLS_TOKEN}\n")).unwrap();
    let config = dir.0.join("cumulo.toml");
    std::fs::write(&config, "[[client]]\nname = \"tools\"\ntoken_file = \"tools.token\"\nprefixes = [\"/tools/\"]\n")
        .unwrap();
    let check = |cfg: &Path| cumulo_cmd().arg("check").arg("--config").arg(cfg).output().unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = check(&config);
    let err = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("client[0] (tools).token_file") && err.contains("chmod 600"), "{err}");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = check(&config);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A core with echo services, an `app` client held to an allow list with a
/// group and a deny list, and a `fwd` client that forwards requests to the
/// name in their body, allowed `/public/*` only.
fn acl_core() -> Core {
    let mut cfg = Config::new();
    for prefix in ["/db/", "/cache/", "/public/", "/secret/"] {
        cfg = cfg.service(Service::internal(prefix, "echo").probe(&format!("{prefix}probe")));
    }
    let tables = format!(
        "[acl]\nstores = [\"/db/*\", \"cache_group\"]\ncache_group = [\"/cache/*\"]\n\n\
         [[client]]\nname = \"app\"\ntoken = {}\nprefixes = [\"/app/\"]\n\
         dest_list_allow = [\"stores\", \"/public/*\", \"/fwd/*\"]\ndest_list_deny = [\"/db/admin/*\"]\n\n\
         [[client]]\nname = \"fwd\"\ntoken = {}\nprefixes = [\"/fwd/\"]\ndest_list_allow = [\"/public/*\"]\n",
        q(APP_TOKEN),
        q(FWD_TOKEN)
    );
    Core::start(cfg.table(&tables))
}

#[test]
fn every_call_kind_is_held_to_the_senders_acl() {
    let core = acl_core();
    let socket = core.socket_str();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let stop = core.dir.0.join("stop");
    let (s2, stop2) = (socket.clone(), stop.clone());
    let forwarder = std::thread::spawn(move || {
        let mut api = over(&s2, FWD_TOKEN, "/fwd/").unwrap();
        api.subscribe("go", |_, req| {
            let to = String::from_utf8_lossy(req.request).to_string();
            Ok(cumulo::Answer::forward(to, b"".to_vec(), b"forwarded".to_vec()))
        })
        .unwrap();
        ready_tx.send(()).unwrap();
        while !stop2.exists() {
            api.poll(Some(ms(50))).unwrap();
        }
    });
    ready_rx.recv().unwrap();
    let mut app = over(&socket, APP_TOKEN, "/app/").unwrap();

    // send_sync: a group, a group inside a group, a pattern; the deny list
    // wins over the group; a name outside the list is refused whether or
    // not anything serves it (the answer does not say which).
    for (name, want) in [
        ("/db/users", Status::Ok),
        ("/cache/k", Status::Ok),
        ("/public/page", Status::Ok),
        ("/db/admin/drop", Status::Unauthorized),
        ("/secret/x", Status::Unauthorized),
        ("/nothing/here", Status::Unauthorized),
    ] {
        assert_eq!(status_of(app.send_sync(name, b"", b"", opts(5000))), want, "send_sync {name}");
    }
    let e = app.send_sync("/secret/x", b"", b"", opts(5000)).unwrap_err().to_string();
    let e2 = app.send_sync("/nothing/here", b"", b"", opts(5000)).unwrap_err().to_string();
    assert_eq!(e.replace("/secret/x", "N"), e2.replace("/nothing/here", "N"), "the same refusal either way");

    // send_async / recv_async.
    for (name, want) in [("/public/a", Status::Ok), ("/secret/a", Status::Unauthorized)] {
        let tid = app.send_async(name, b"", b"", opts(5000));
        let (_, r) = app.recv_async(Some(tid), Duration::from_secs(5)).unwrap().expect("an answer");
        assert_eq!(status_of(r), want, "send_async {name}");
    }

    // mcast_async: the copies of an allowed name go out; a refused one is
    // one copy answered UNAUTHORIZED.
    let ids = app.mcast_async("/public/m", b"", b"", opts(5000)).unwrap();
    assert!(!ids.is_empty());
    for id in ids {
        let (_, r) = app.recv_async(Some(id), Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!(status_of(r), Status::Ok);
    }
    let ids = app.mcast_async("/secret/m", b"", b"", opts(5000)).unwrap();
    assert_eq!(ids.len(), 1);
    let (_, r) = app.recv_async(Some(ids[0]), Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!(status_of(r), Status::Unauthorized, "mcast to a refused name");

    // forward: held to the forwarding instance's rules, answered to the
    // original sender. `app` may send to /fwd/go, `fwd` may forward only
    // to /public/*.
    let r = app.send_sync("/fwd/go", b"", b"/public/f", opts(5000)).unwrap();
    assert_eq!(r.body, b"forwarded");
    let r = app.send_sync("/fwd/go", b"", b"/db/users", opts(5000));
    assert_eq!(status_of(r), Status::Unauthorized, "fwd may not forward to /db/");

    // Instances without rules (the test's own client) send anywhere.
    let mut plain = core.client();
    assert_eq!(status_of(plain.send_sync("/secret/x", b"", b"", opts(5000))), Status::Ok);
    std::fs::write(&stop, "").unwrap();
    forwarder.join().unwrap();
}

#[test]
fn the_gateway_is_held_to_its_own_acl() {
    let port = free_port();
    let _core = Core::start(
        Config::new()
            .service(Service::internal("/public/", "echo").probe("/public/probe"))
            .service(Service::internal("/secret/", "echo").probe("/secret/probe"))
            .service(
                Service::internal("/web/", "http")
                    .set("settings", format!("{{ port = {port} }}"))
                    .set("dest_list_allow", "[\"/public/*\"]"),
            ),
    );
    let get = |path: &str| -> (u16, String) {
        use std::io::{Read, Write};
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut s = loop {
            match std::net::TcpStream::connect(("127.0.0.1", port)) {
                Ok(s) => break s,
                Err(e) if std::time::Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(ms(50));
                }
                Err(e) => panic!("gateway: {e}"),
            }
        };
        write!(s, "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let code = text.split(' ').nth(1).unwrap().parse().unwrap();
        (code, text)
    };
    let (code, text) = get("/public/page");
    assert_eq!(code, 200, "{text}");
    let (code, text) = get("/secret/page");
    assert_eq!(code, 403, "{text}");
    assert!(text.contains("forbidden: this gateway may not call '/secret/page/get'"), "{text}");
}

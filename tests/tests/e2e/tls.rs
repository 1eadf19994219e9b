//! TLS on the TCP listener for instances (docs/SECURITY.md): managed
//! instances and clients over TLS, handed to other shards whole; client
//! certificates where the core requires them; plaintext and strangers'
//! certificates refused and counted; certificates replaced at SIGHUP with
//! open sessions kept. Certificates from tests/tls/make_certs.sh (openssl).

use cumulo::TlsFiles;
use cumulo_e2e::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A fresh CA with its server and client certificates, in `dir`.
fn make_certs(dir: &Path) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tls/make_certs.sh");
    let out = std::process::Command::new("bash").arg(&script).arg(dir).output().expect("run make_certs.sh");
    assert!(out.status.success(), "make_certs.sh: {}", String::from_utf8_lossy(&out.stderr));
    dir.to_path_buf()
}

fn trusting(ca: &Path) -> TlsFiles {
    TlsFiles { ca: Some(ca.to_path_buf()), cert: None, key: None }
}

fn with_certificate(certs: &Path) -> TlsFiles {
    TlsFiles {
        ca: Some(certs.join("ca.pem")),
        cert: Some(certs.join("client.pem")),
        key: Some(certs.join("client.key")),
    }
}

fn connect(port: u16, prefix: &str, tls: TlsFiles) -> Result<Api, Error> {
    Api::connect(Options { tls, ..Options::unmanaged(format!("tcp://127.0.0.1:{port}"), prefix) })
}

fn tls_config(certs: &Path, port: u16, admin: u16) -> Config {
    Config::new()
        .core("tcp", q(&format!("127.0.0.1:{port}")))
        .core("tcp_tls_cert", q(&certs.join("server.pem").display().to_string()))
        .core("tcp_tls_key", q(&certs.join("server.key").display().to_string()))
        .core("tcp_anonymous", q("outside_services"))
        .admin("port", admin)
}

fn handshake_failures(admin: u16) -> u64 {
    let text = admin_get(admin, "/metrics");
    let line = text.lines().find(|l| l.starts_with("cumulo_tcp_tls_handshake_failures_total ")).expect("the series");
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn managed_instances_and_clients_are_served_over_tls_on_every_shard() {
    let certs_dir = TempDir::new();
    let certs = make_certs(&certs_dir.0);
    let (port, admin) = (free_port(), free_port());
    // Four threads of one process, all over TLS: with core.threads = 2 they
    // are spread over both shards (each TLS session handed over whole).
    let service = ts!("/tls/")
        .set("count_thread", 4)
        .env("TS_SOCKET", format!("tcp://127.0.0.1:{port}"))
        .env("CUMULO_TLS_CA", certs.join("ca.pem").display());
    // Round robin over every instance, on every shard.
    let core =
        Core::start(tls_config(&certs, port, admin).unmanaged("dest_refresh", q("round_robin")).service(service));

    let mut over_tls = connect(port, "/client/", trusting(&certs.join("ca.pem"))).expect("a TLS client");
    let mut local = core.client();
    let mut instances = std::collections::HashSet::new();
    for i in 0..60 {
        let body = format!("request {i}");
        let client = if i % 2 == 0 { &mut over_tls } else { &mut local };
        let r = client.send_sync("/tls/x", b"", body.as_bytes(), opts(10_000)).expect("answered over TLS");
        assert_eq!(r.body, body.as_bytes());
        instances.insert(field(&r, "instance"));
    }
    assert_eq!(instances.len(), 4, "every TLS instance answered: {instances:?}");
    // Where they were served: every shard, when there is more than one.
    let service: serde_json::Value = serde_json::from_str(&admin_get(admin, "/v1/services/1")).unwrap();
    let mut shards: Vec<u64> = service["processes"][0]["shards"]
        .as_array()
        .unwrap_or_else(|| panic!("shards in {service}"))
        .iter()
        .filter_map(|s| s.as_u64())
        .collect();
    shards.sort_unstable();
    shards.dedup();
    assert_eq!(
        shards.len() as u32,
        cumulo_e2e::config::test_threads().min(4),
        "the shards serving TLS instances: {shards:?}"
    );
    assert_eq!(handshake_failures(admin), 0);
    assert!(!core.lines_with(&["listening for instances (TLS over tcp)"]).is_empty(), "{}", core.log());
}

#[test]
fn plaintext_unknown_certificates_and_stalled_handshakes_are_refused_and_counted() {
    let certs_dir = TempDir::new();
    let certs = make_certs(&certs_dir.0);
    let other = certs.join("other-ca.pem");
    let (port, admin) = (free_port(), free_port());
    let core = Core::start(
        tls_config(&certs, port, admin)
            .core("tcp_tls_client_ca", q(&certs.join("ca.pem").display().to_string()))
            .core("hello_timeout", 300)
            .service(Service::internal("/echo/", "echo").probe("/echo/x")),
    );
    // Plaintext to the TLS port; a client trusting another CA; a client
    // without the certificate the core requires.
    let e = connect(port, "/c/", TlsFiles::default()).err().expect("plaintext refused");
    assert!(e.status().is_none(), "no protocol answer over a TLS port: {e}");
    let e = connect(port, "/c/", TlsFiles { ca: Some(other), ..with_certificate(&certs) }).err().expect("refused");
    assert!(e.to_string().contains("UnknownIssuer") || e.to_string().contains("issuer"), "{e}");
    let e = connect(port, "/c/", trusting(&certs.join("ca.pem"))).err().expect("no client certificate: refused");
    assert!(e.status().is_none(), "{e}");
    // A peer that never starts its handshake is closed after
    // core.hello_timeout.
    let mut silent = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    silent.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let t0 = Instant::now();
    let n = std::io::Read::read(&mut silent, &mut [0u8; 16]).unwrap_or(0);
    assert_eq!(n, 0, "closed without a word");
    assert!(t0.elapsed() < Duration::from_secs(5), "closed after {:?}", t0.elapsed());
    let deadline = Instant::now() + Duration::from_secs(5);
    while handshake_failures(admin) < 4 && Instant::now() < deadline {
        std::thread::sleep(ms(50));
    }
    assert_eq!(handshake_failures(admin), 4);
    assert!(!core.lines_with(&["TLS handshake", "127.0.0.1:"]).is_empty(), "logged with the peer");

    // With the certificate: served.
    let mut ok = connect(port, "/c/", with_certificate(&certs)).expect("a client with a certificate");
    assert_eq!(ok.send_sync("/echo/x", b"", b"hi", opts(5000)).unwrap().body, b"hi");
}

#[test]
fn sighup_replaces_the_certificate_and_open_sessions_go_on() {
    let (first_dir, second_dir, files) = (TempDir::new(), TempDir::new(), TempDir::new());
    let (first, second) = (make_certs(&first_dir.0), make_certs(&second_dir.0));
    let install = |from: &Path| {
        for f in ["server.pem", "server.key"] {
            // Renamed into place, as certificate tools do.
            let tmp = files.0.join(format!("{f}.new"));
            std::fs::copy(from.join(f), &tmp).unwrap();
            std::fs::rename(&tmp, files.0.join(f)).unwrap();
        }
    };
    install(&first);
    let (port, admin) = (free_port(), free_port());
    let core =
        Core::start(tls_config(&files.0, port, admin).service(Service::internal("/echo/", "echo").probe("/echo/x")));
    let mut open = connect(port, "/open/", trusting(&first.join("ca.pem"))).expect("trusting the first CA");
    assert_eq!(open.send_sync("/echo/x", b"", b"1", opts(5000)).unwrap().body, b"1");

    install(&second);
    core.signal(libc::SIGHUP);
    core.wait_lines(&["SIGHUP: reloading"], 1, Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut fresh = loop {
        match connect(port, "/fresh/", trusting(&second.join("ca.pem"))) {
            Ok(api) => break api,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(ms(100));
            }
            Err(e) => panic!("the second certificate was not served within 10 s: {e}\n{}", core.log()),
        }
    };
    assert_eq!(fresh.send_sync("/echo/x", b"", b"2", opts(5000)).unwrap().body, b"2");
    // The session opened under the first certificate is still served; a
    // new one trusting only the first CA is refused.
    assert_eq!(open.send_sync("/echo/x", b"", b"3", opts(5000)).unwrap().body, b"3");
    assert!(connect(port, "/late/", trusting(&first.join("ca.pem"))).is_err());
    assert!(!core.lines_with(&["TLS certificate of core.tcp_tls_cert reloaded"]).is_empty(), "{}", core.log());
}

#[test]
fn a_tls_setting_that_cannot_work_is_refused_by_check() {
    let dir = TempDir::new();
    make_certs(&dir.0); // server.pem, client.key, ca.pem: named relative to the config below
    let check = |toml: &str| {
        let path = dir.0.join("c.toml");
        std::fs::write(&path, toml).unwrap();
        let out = cumulo_cmd().arg("check").arg("--config").arg(&path).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    let (ok, err) = check("[core]\ntcp = \"127.0.0.1:0\"\ntcp_tls_cert = \"server.pem\"\n");
    assert!(!ok && err.contains("core.tcp_tls_cert and core.tcp_tls_key go together"), "{err}");
    let (ok, err) = check("[core]\ntcp_tls_cert = \"server.pem\"\ntcp_tls_key = \"server.key\"\n");
    assert!(!ok && err.contains("core.tcp is not"), "{err}");
    // A key that does not go with the certificate (relative paths: the
    // config file's folder).
    let (ok, err) =
        check("[core]\ntcp = \"127.0.0.1:0\"\ntcp_tls_cert = \"server.pem\"\ntcp_tls_key = \"client.key\"\n");
    assert!(!ok && err.contains("core.tcp_tls_key") && err.contains("does not go with"), "{err}");
    let (ok, err) = check(
        "[core]\ntcp = \"127.0.0.1:0\"\ntcp_tls_cert = \"server.pem\"\ntcp_tls_key = \"server.key\"\ntcp_tls_client_ca = \"nope.pem\"\n",
    );
    assert!(!ok && err.contains("core.tcp_tls_client_ca") && err.contains("nope.pem"), "{err}");
    let (ok, err) = check("[core]\ntcp = \"127.0.0.1:0\"\ntcp_tls_cert = \"server.pem\"\ntcp_tls_key = \"server.key\"\ntcp_tls_client_ca = \"ca.pem\"\n");
    assert!(ok, "{err}");
}

#[test]
fn an_expired_certificate_and_tls_to_a_plaintext_port_fail_to_connect() {
    let certs_dir = TempDir::new();
    let certs = make_certs(&certs_dir.0);
    std::thread::sleep(ms(1100)); // expired.pem's one second is over
    let (port, admin) = (free_port(), free_port());
    let _core = Core::start(
        Config::new()
            .core("tcp", q(&format!("127.0.0.1:{port}")))
            .core("tcp_tls_cert", q(&certs.join("expired.pem").display().to_string()))
            .core("tcp_tls_key", q(&certs.join("expired.key").display().to_string()))
            .core("tcp_anonymous", q("any"))
            .admin("port", admin),
    );
    let e = connect(port, "/c/", trusting(&certs.join("ca.pem"))).err().expect("an expired certificate is refused");
    assert!(e.to_string().contains("certificate expired"), "{e}");
    // TLS to a core whose TCP listener speaks plaintext: no session.
    let plain = free_port();
    // (A ClientHello is no frame: the core closes it by core.hello_timeout.)
    let _plain_core = Core::start(
        Config::new()
            .core("tcp", q(&format!("127.0.0.1:{plain}")))
            .core("tcp_anonymous", q("any"))
            .core("hello_timeout", 300),
    );
    let e = connect(plain, "/c/", trusting(&certs.join("ca.pem"))).err().expect("no TLS session with a plaintext port");
    assert!(e.to_string().contains("TLS handshake"), "{e}");
}

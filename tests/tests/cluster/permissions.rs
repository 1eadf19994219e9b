//! NATS permissions keep a cloud's subjects to the cloud's own user: the
//! nats-server configuration of docs/CLUSTER.md ("Who may publish into a
//! cloud"), with a stranger's user beside the cloud's, on a real server.

use crate::common::*;
use crate::tagged;
use cumulo_e2e::*;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The users block of docs/CLUSTER.md for the cloud `prod`: its nodes may
/// use `cumulo.prod.>` (and JetStream's API and the reply inboxes), the
/// stranger nothing under `cumulo.>`.
const USERS: &str = r#"
authorization {
  users = [
    { user: cloud_prod, password: "prod-s3cret",
      permissions: {
        publish:   { allow: ["cumulo.prod.>", "$JS.API.>", "$JS.ACK.>"] },
        subscribe: { allow: ["cumulo.prod.>", "_INBOX.>"] }
      } },
    { user: stranger, password: "stranger-s3cret",
      permissions: {
        publish:   { deny: ["cumulo.>", "$JS.>"] },
        subscribe: { deny: ["cumulo.>", "_INBOX.>", "$JS.>"] }
      } }
  ]
}
"#;

/// A raw NATS client (the text protocol): connects as `user`, sends
/// `commands` then a PING, and returns what the server said up to its PONG.
fn as_user(port: u16, user: &str, password: &str, commands: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut lines = BufReader::new(s.try_clone().unwrap());
    let mut info = String::new();
    lines.read_line(&mut info).unwrap();
    assert!(info.starts_with("INFO "), "{info}");
    let connect = serde_json::json!({ "user": user, "pass": password, "verbose": false, "pedantic": false });
    write!(s, "CONNECT {connect}\r\n{commands}PING\r\n").unwrap();
    let mut said = String::new();
    loop {
        let mut line = String::new();
        if lines.read_line(&mut line).unwrap_or(0) == 0 {
            return said; // closed by the server
        }
        said.push_str(&line);
        if line.starts_with("PONG") {
            return said;
        }
    }
}

#[test]
fn a_stranger_cannot_publish_into_the_cloud_and_the_nodes_keep_serving() {
    let nats = NatsServer::start_with_conf(USERS);
    let urls = [nats.url()];
    let as_cloud = |c: Config| c.cluster("user", "\"cloud_prod\"").cluster("password", "\"prod-s3cret\"");
    let _b = Core::start(as_cloud(node_in("prod", &urls, "b", 2)).service(tagged!("/b/", "b")));
    let a = Core::start(as_cloud(node_in("prod", &urls, "a", 1)));
    let mut api = a.client();
    // the cloud's own user has every right its nodes need
    assert_eq!(field(&wait_reachable(&mut api, "/b/x", ms(10_000)), "tag"), "b");

    // a stranger publishing a goodbye on the control subject, or frames to a
    // node, is refused by NATS; so is reading the cloud's subjects
    let forged = r#"{"bye":{"node":"b"}}"#;
    for subject in ["cumulo.prod.ctl", "cumulo.prod.node.b", "cumulo.prod.queue.CUMULO_prod_q"] {
        let said = as_user(
            nats.port,
            "stranger",
            "stranger-s3cret",
            &format!("PUB {subject} {}\r\n{forged}\r\n", forged.len()),
        );
        assert!(
            said.contains(&format!("-ERR 'Permissions Violation for Publish to \"{subject}\"'")),
            "{subject}: {said}"
        );
    }
    let said = as_user(nats.port, "stranger", "stranger-s3cret", "SUB cumulo.prod.> 1\r\n");
    assert!(said.contains("Permissions Violation for Subscription to \"cumulo.prod.>\""), "{said}");
    // ... while it may use subjects of its own
    let said = as_user(nats.port, "stranger", "stranger-s3cret", "PUB elsewhere.x 2\r\nhi\r\n");
    assert!(!said.contains("-ERR"), "{said}");
    // and a wrong password is no way in
    let said = as_user(nats.port, "cloud_prod", "guess", "");
    assert!(said.contains("-ERR 'Authorization Violation'"), "{said}");

    // the nodes keep serving each other, and nobody left the cloud
    for i in 0..20 {
        let r = api.send_sync("/b/after", b"", format!("n{i}").as_bytes(), opts(5000)).unwrap();
        assert_eq!(field(&r, "tag"), "b");
    }
    let log = a.log();
    assert!(!log.contains("node b left"), "{log}");
}

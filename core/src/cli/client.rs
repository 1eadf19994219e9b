//! A small HTTP/1.1 client for the admin API (hyper's connection API over a
//! tokio TCP stream): one request per connection, JSON in and out.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{header, Method, Request};
use std::time::Duration;

/// Time to connect; a core that is up answers at once.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time for one call: removing a service waits for its processes to stop.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

pub struct AdminClient {
    /// "http://127.0.0.1:7311", for messages.
    pub url: String,
    host_port: String,
    token: Option<String>,
}

impl std::fmt::Debug for AdminClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token itself: debug output ends up in logs.
        f.debug_struct("AdminClient")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

/// An answer: HTTP status and body (JSON when the API sent JSON).
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Result<serde_json::Value, String> {
        serde_json::from_slice(&self.body).map_err(|e| format!("the admin API sent something that is not JSON ({e})"))
    }
}

impl AdminClient {
    /// `url` is `http://HOST:PORT` (a trailing `/` is fine) or `HOST:PORT`.
    pub fn new(url: &str, token: Option<String>) -> Result<AdminClient, String> {
        let rest = match url.split_once("://") {
            Some(("http", rest)) => rest,
            Some((scheme, _)) => {
                return Err(format!("admin URL {url}: only http:// is supported (reach a remote core through an SSH tunnel or a TLS proxy), not {scheme}://"))
            }
            None => url,
        };
        let host_port = rest.trim_end_matches('/');
        if host_port.contains('/') || host_port.is_empty() {
            return Err(format!("admin URL {url}: expected http://HOST:PORT, e.g. http://127.0.0.1:7311"));
        }
        let host_port =
            if host_port.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) && !host_port.ends_with(']') {
                host_port.to_string()
            } else {
                format!("{host_port}:80")
            };
        Ok(AdminClient { url: format!("http://{host_port}"), host_port, token })
    }

    /// Makes one call; Err only when the core could not be reached or the
    /// exchange broke (an HTTP error status is a `Reply`).
    pub fn call(&self, method: Method, path: &str, body: Option<&serde_json::Value>) -> Result<Reply, String> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
        rt.block_on(async {
            match tokio::time::timeout(CALL_TIMEOUT, self.exchange(method, path, body)).await {
                Ok(r) => r,
                Err(_) => Err(format!("no answer from the admin API at {} within {CALL_TIMEOUT:?}", self.url)),
            }
        })
    }

    async fn exchange(&self, method: Method, path: &str, body: Option<&serde_json::Value>) -> Result<Reply, String> {
        let unreachable = |e: &dyn std::fmt::Display| {
            format!(
                "cannot reach the cumulo admin API at {}: {e}\n  is the core running, with [admin] enabled on that address? \
                 (choose it with --admin URL, CUMULO_ADMIN, or --config FILE)",
                self.url
            )
        };
        let stream = match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(&self.host_port)).await
        {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(unreachable(&e)),
            Err(_) => return Err(unreachable(&format!("no connection within {CONNECT_TIMEOUT:?}"))),
        };
        let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| unreachable(&e))?;
        let driver = tokio::spawn(conn);
        let bytes = body.map(|b| serde_json::to_vec(b).unwrap_or_default()).unwrap_or_default();
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, &self.host_port)
            .header(header::ACCEPT, "application/json");
        if body.is_some() {
            req = req.header(header::CONTENT_TYPE, "application/json");
        }
        if let Some(t) = &self.token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let req = req.body(Full::new(Bytes::from(bytes))).map_err(|e| e.to_string())?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| format!("the admin API at {} broke off the call: {e}", self.url))?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("reading the answer of {}: {e}", self.url))?
            .to_bytes();
        driver.abort();
        Ok(Reply { status, body: body.to_vec() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(AdminClient::new("http://127.0.0.1:7311", None).unwrap().host_port, "127.0.0.1:7311");
        assert_eq!(AdminClient::new("http://localhost:9/", None).unwrap().url, "http://localhost:9");
        assert_eq!(AdminClient::new("127.0.0.1:7311", None).unwrap().host_port, "127.0.0.1:7311");
        assert_eq!(AdminClient::new("http://[::1]:7311", None).unwrap().host_port, "[::1]:7311");
        assert_eq!(AdminClient::new("http://admin.local", None).unwrap().host_port, "admin.local:80");
        assert!(AdminClient::new("https://x:1", None).unwrap_err().contains("only http://"));
        assert!(AdminClient::new("http://x:1/v1", None).unwrap_err().contains("expected http://HOST:PORT"));
    }

    #[test]
    fn a_core_that_is_not_there_is_a_clear_error() {
        // A port just freed: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let c = AdminClient::new(&format!("http://127.0.0.1:{port}"), None).unwrap();
        let e = c.call(Method::GET, "/v1/status", None).err().unwrap();
        assert!(e.contains("cannot reach the cumulo admin API") && e.contains("is the core running"), "{e}");
    }
}

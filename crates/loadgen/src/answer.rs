//! What counts as a good answer, for every kind of sender.

use super::recorder::Outcome;
use cumulo_proto::Status;

/// The request to send: a name, its request_info and body, and what the
/// answer must contain.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    pub name: String,
    pub request_info: Vec<u8>,
    pub request: Vec<u8>,
    /// Request timeout, ms (0: the sender's default).
    pub timeout_ms: u32,
    /// A substring the response body must contain.
    pub check: Option<Vec<u8>>,
}

/// Judges a service answer: its status, then the check.
pub fn judge(status: Status, body: &[u8], check: Option<&[u8]>) -> Outcome {
    match status {
        Status::Ok => match check {
            Some(c) if !contains(body, c) => Outcome::error(
                "check",
                format!("answer does not contain '{}': '{}'", String::from_utf8_lossy(c), excerpt(body)),
            ),
            _ => Outcome::Ok,
        },
        Status::Timeout => Outcome::Timeout,
        other => Outcome::error(other.name(), format!("{}: {}", other.name(), excerpt(body))),
    }
}

pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// The start of a body, for error messages.
pub fn excerpt(body: &[u8]) -> String {
    let s = String::from_utf8_lossy(&body[..body.len().min(120)]).into_owned();
    if body.len() > 120 {
        format!("{s}...")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_then_check() {
        let check = Some(&b"<value>42</value>"[..]);
        assert_eq!(judge(Status::Ok, b"<http_test><value>42</value></http_test>", check), Outcome::Ok);
        assert!(
            matches!(judge(Status::Ok, b"<error/>", check), Outcome::Error { kind, why } if kind == "check" && why.contains("does not contain"))
        );
        assert_eq!(judge(Status::Timeout, b"", check), Outcome::Timeout);
        assert!(
            matches!(judge(Status::NoService, b"nobody", None), Outcome::Error { kind, why } if kind == "NO_SERVICE" && why == "NO_SERVICE: nobody")
        );
    }
}

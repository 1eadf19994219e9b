//! A finished span, as plain data: what the event loop builds, cheaply, and
//! hands to the exporter's thread, which turns it into OpenTelemetry's
//! types there.

use std::borrow::Cow;
use std::time::SystemTime;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// A request a client made of the gateway, or that came from another
    /// node.
    Server,
    /// A request routed by the core to a service.
    Client,
    /// Work with no remote side (a cron firing).
    Internal,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpanStatus {
    Unset,
    Ok,
    Error(String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Str(Cow<'static, str>),
    Int(i64),
    Bool(bool),
}

pub type Attr = (&'static str, AttrValue);

#[derive(Debug, Clone)]
pub struct Span {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    /// All zeros: a root.
    pub parent_id: [u8; 8],
    /// The parent is another process's (a client, a service, a node).
    pub parent_remote: bool,
    pub flags: u8,
    pub kind: SpanKind,
    pub name: String,
    pub start: SystemTime,
    pub end: SystemTime,
    pub status: SpanStatus,
    pub attrs: Vec<Attr>,
    /// Spans of other traces this one follows from (trace id, span id).
    pub links: Vec<([u8; 16], [u8; 8])>,
}

impl Span {
    /// What it holds in memory, roughly: the bound on queued spans counts
    /// bytes with it.
    pub fn weight(&self) -> usize {
        let attrs: usize = self
            .attrs
            .iter()
            .map(|(_, v)| match v {
                AttrValue::Str(s) => 48 + s.len(),
                _ => 48,
            })
            .sum();
        std::mem::size_of::<Span>() + self.name.len() + attrs + 24 * self.links.len()
    }
}

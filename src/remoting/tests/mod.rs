//! Known frames byte for byte (built by hand from the Java layout), real clients' quirks,
//! errors that name their place ([`wire`], [`content`]), properties over arbitrary input
//! ([`props`]) and hostile headers ([`limits`]).

mod batch;
mod content;
mod limits;
mod props;
mod wire;

use super::*;

pub(super) fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A whole frame built by hand: length, meta word, header, body.
pub(super) fn frame_bytes(st: u8, header: &[u8], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&((4 + header.len() + body.len()) as u32).to_be_bytes());
    out.push(st);
    out.extend_from_slice(&(header.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(header);
    out.extend_from_slice(body);
    out
}

pub(super) const ROUTE_REQUEST_JSON: &str = r#"{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}"#;

pub(super) fn route_request() -> RemotingCommand {
    let mut cmd = RemotingCommand::request(codes::GET_ROUTEINFO_BY_TOPIC, 7);
    cmd.ext_fields.insert("topic", "TopicTest");
    cmd
}

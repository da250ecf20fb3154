//! `dledger-<id>/checkpoint` and `dledger-<id>/currterm`: `java.util.Properties` text written by
//! DLedger's `IOUtils.string2File` (`.tmp`, the old content to `.bak`, rename). Keys come in any
//! order; lines starting with `#` or `!` are comments. Only `key=value` lines are read (DLedger
//! writes no escapes); an unknown key is kept aside, a value that is not a number is an error
//! naming its byte offset.

use std::path::Path;

use serde::Serialize;

use crate::format::entry::read_bounded;
use crate::format::error::{ErrorKind, ParseError, Result};

/// Larger than anything DLedger writes in these files: not read.
pub const MAX_PROPS_LEN: u64 = 64 * 1024;

/// `checkpoint`: how far the log was written and committed when it was last persisted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DledgerCheckpoint {
    /// `endIndex`: the ledger end index then.
    pub end_index: Option<i64>,
    /// `committedIndex`: the last entry a quorum had (the broker serves up to it after a start).
    pub committed_index: Option<i64>,
}

/// `currterm`: the member's term and whom it voted for in it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TermFile {
    /// `currTerm`.
    pub curr_term: Option<i64>,
    /// `voteLeader`: a self id, or none (empty).
    pub vote_leader: Option<String>,
}

/// `key=value` pairs of a properties text, with the byte offset of each value.
fn pairs(text: &str) -> Vec<(&str, &str, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let start = at;
        at += line.len();
        let body = line.trim_end_matches(['\n', '\r']);
        let trimmed = body.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
            continue;
        }
        let lead = body.len() - trimmed.len();
        let (key, value, vat) = match trimmed.find(['=', ':']) {
            Some(i) => (&trimmed[..i], &trimmed[i + 1..], start + lead + i + 1),
            None => (trimmed, "", start + body.len()),
        };
        out.push((key.trim(), value.trim(), vat));
    }
    out
}

fn number(key: &'static str, value: &str, at: usize) -> Result<i64, ParseError> {
    value.parse().map_err(|_| {
        ParseError::new(
            at as u64,
            ErrorKind::Invalid {
                what: key,
                detail: format!("{value:?} is not a number"),
            },
        )
    })
}

fn utf8(b: &[u8]) -> Result<&str, ParseError> {
    std::str::from_utf8(b).map_err(|e| {
        ParseError::new(
            e.valid_up_to() as u64,
            ErrorKind::Invalid {
                what: "properties text",
                detail: "not UTF-8".into(),
            },
        )
    })
}

impl DledgerCheckpoint {
    pub fn from_bytes(b: &[u8]) -> Result<Self, ParseError> {
        let mut cp = DledgerCheckpoint::default();
        for (k, v, at) in pairs(utf8(b)?) {
            match k {
                "endIndex" => cp.end_index = Some(number("endIndex", v, at)?),
                "committedIndex" => cp.committed_index = Some(number("committedIndex", v, at)?),
                _ => {}
            }
        }
        Ok(cp)
    }

    /// `Ok(None)` when the file does not exist.
    pub fn read(path: &Path) -> Result<Option<Self>> {
        read_props(path, Self::from_bytes)
    }

    pub fn to_text(&self) -> String {
        let mut s = String::new();
        if let Some(v) = self.committed_index {
            s.push_str(&format!("committedIndex={v}\n"));
        }
        if let Some(v) = self.end_index {
            s.push_str(&format!("endIndex={v}\n"));
        }
        s
    }
}

impl TermFile {
    pub fn from_bytes(b: &[u8]) -> Result<Self, ParseError> {
        let mut t = TermFile::default();
        for (k, v, at) in pairs(utf8(b)?) {
            match k {
                "currTerm" => t.curr_term = Some(number("currTerm", v, at)?),
                "voteLeader" => t.vote_leader = (!v.is_empty()).then(|| v.to_string()),
                _ => {}
            }
        }
        Ok(t)
    }

    /// `Ok(None)` when the file does not exist.
    pub fn read(path: &Path) -> Result<Option<Self>> {
        read_props(path, Self::from_bytes)
    }

    pub fn to_text(&self) -> String {
        format!(
            "voteLeader={}\ncurrTerm={}\n",
            self.vote_leader.as_deref().unwrap_or(""),
            self.curr_term.unwrap_or(0)
        )
    }
}

fn read_props<T>(path: &Path, parse: fn(&[u8]) -> Result<T, ParseError>) -> Result<Option<T>> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(None);
    }
    let b = read_bounded(path, MAX_PROPS_LEN)?;
    parse(&b).map(Some).map_err(|e| e.in_file(path, 0))
}

//! Plain-ACL request signatures (RocketMQ 4.9 `AclClientRPCHook`, `AclUtils`,
//! `PlainAccessValidator`).
//!
//! The client puts `AccessKey` (and `SecurityToken`, if it has one) into `extFields`, flattens
//! the custom header there, and signs: the values of all `extFields` sorted by key (a Java
//! `TreeMap`, so UTF-16 code-unit order), `Signature` left out, concatenated without separators,
//! UTF-8, then the body bytes; HmacSHA1 keyed with the secret key; standard Base64 with padding.
//! The result goes into ext `Signature`.
//!
//! The 4.9.8 broker recomputes it over the received fields without `Signature` and without
//! `_UNIQUE_KEY_QUERY`, while 4.9.8 clients sign that key on QUERY_MESSAGE (an upstream bug that
//! breaks key queries against a real broker with ACL on). [`verify`] accepts either.
//! ali-ons signs `AccessKey`, `OnsChannel` and the header fields with a JS sort; since it sends
//! every signed value, the same rule over the received fields checks it.

use std::cmp::Ordering;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha1::Sha1;

use super::command::ExtFields;

/// `SessionCredentials.ACCESS_KEY`.
pub const ACCESS_KEY: &str = "AccessKey";
/// `SessionCredentials.SECRET_KEY` (never sent).
pub const SECRET_KEY: &str = "SecretKey";
/// `SessionCredentials.SIGNATURE`.
pub const SIGNATURE: &str = "Signature";
/// `SessionCredentials.SECURITY_TOKEN`.
pub const SECURITY_TOKEN: &str = "SecurityToken";
/// `MixAll.UNIQUE_MSG_QUERY_FLAG`: left out of the broker's signature content.
pub const UNIQUE_MSG_QUERY_FLAG: &str = "_UNIQUE_KEY_QUERY";

/// Why a request's signature is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    /// No `AccessKey` in `extFields` (Java: "No accessKey is configured").
    #[error("No accessKey is configured")]
    MissingAccessKey,
    /// No `Signature` in `extFields`.
    #[error("No signature for accessKey={access_key}")]
    MissingSignature { access_key: String },
    /// The signature does not match the content.
    #[error("Check signature failed for accessKey={access_key}")]
    BadSignature { access_key: String },
}

/// Java `String.compareTo`: lexicographic over UTF-16 code units.
fn java_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// The `extFields` values in signing order: sorted by key, without `Signature` and `skip`.
fn signed_values<'a>(ext: &'a ExtFields, skip: &[&str]) -> Vec<&'a str> {
    let mut entries: Vec<(&str, &str)> = ext
        .iter()
        .filter(|(k, _)| *k != SIGNATURE && !skip.contains(k))
        .collect();
    entries.sort_by(|a, b| java_cmp(a.0, b.0));
    entries.into_iter().map(|(_, v)| v).collect()
}

/// The bytes that are signed: values sorted by key, skipping `Signature` and the keys in
/// `skip`, then the body.
pub fn signing_content(ext: &ExtFields, body: &[u8], skip: &[&str]) -> Vec<u8> {
    let values = signed_values(ext, skip);
    let mut out = Vec::with_capacity(values.iter().map(|v| v.len()).sum::<usize>() + body.len());
    for v in values {
        out.extend_from_slice(v.as_bytes());
    }
    out.extend_from_slice(body);
    out
}

fn new_mac(secret_key: &str) -> Hmac<Sha1> {
    <Hmac<Sha1> as Mac>::new_from_slice(secret_key.as_bytes())
        .expect("HMAC takes keys of every length")
}

fn mac(secret_key: &str, content: &[u8]) -> Hmac<Sha1> {
    let mut mac = new_mac(secret_key);
    mac.update(content);
    mac
}

/// The MAC of [`signing_content`], fed piece by piece so a large body is not copied.
fn mac_of_request(secret_key: &str, ext: &ExtFields, body: &[u8], skip: &[&str]) -> Hmac<Sha1> {
    let mut mac = new_mac(secret_key);
    for v in signed_values(ext, skip) {
        mac.update(v.as_bytes());
    }
    mac.update(body);
    mac
}

/// `AclUtils.calSignature`: Base64 of HmacSHA1(secret, content).
pub fn signature(content: &[u8], secret_key: &str) -> String {
    let tag = mac(secret_key, content).finalize().into_bytes();
    base64::engine::general_purpose::STANDARD.encode(tag)
}

/// Signs a request as `AclClientRPCHook` does: sets `AccessKey`, `SecurityToken` (if given) and
/// then `Signature` over all `extFields` and `body`. Write the custom header into `ext` first.
pub fn sign(
    ext: &mut ExtFields,
    body: &[u8],
    access_key: &str,
    secret_key: &str,
    security_token: Option<&str>,
) {
    ext.insert(ACCESS_KEY, access_key);
    if let Some(token) = security_token {
        ext.insert(SECURITY_TOKEN, token);
    }
    let tag = mac_of_request(secret_key, ext, body, &[])
        .finalize()
        .into_bytes();
    ext.insert(
        SIGNATURE,
        base64::engine::general_purpose::STANDARD.encode(tag),
    );
}

/// The access key a request names, if any.
pub fn access_key(ext: &ExtFields) -> Option<&str> {
    ext.get(ACCESS_KEY)
}

/// Checks a request's signature against `secret_key` (looked up by the caller from
/// [`access_key`]). Accepts content with and without `_UNIQUE_KEY_QUERY` (see the module docs).
/// The comparison is constant-time.
pub fn verify(ext: &ExtFields, body: &[u8], secret_key: &str) -> Result<(), AclError> {
    let access_key = ext.get(ACCESS_KEY).ok_or(AclError::MissingAccessKey)?;
    let given = ext
        .get(SIGNATURE)
        .ok_or_else(|| AclError::MissingSignature {
            access_key: access_key.to_string(),
        })?;
    let Ok(given) = base64::engine::general_purpose::STANDARD.decode(given) else {
        return Err(AclError::BadSignature {
            access_key: access_key.to_string(),
        });
    };
    let matches = |skip: &[&str]| {
        mac_of_request(secret_key, ext, body, skip)
            .verify_slice(&given)
            .is_ok()
    };
    if matches(&[UNIQUE_MSG_QUERY_FLAG])
        || (ext.contains_key(UNIQUE_MSG_QUERY_FLAG) && matches(&[]))
    {
        Ok(())
    } else {
        Err(AclError::BadSignature {
            access_key: access_key.to_string(),
        })
    }
}

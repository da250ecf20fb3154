//! Message ids: the broker's offset message id and the client's UNIQ_KEY (FORMAT.md 5).

use std::net::IpAddr;

use chrono::{Datelike, LocalResult, NaiveDate, TimeZone};
use serde::Serialize;

use super::commitlog::Host;

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Uppercase hex as `UtilAll.bytes2string`.
pub fn to_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

/// Hex to bytes (either case); `None` on an odd length or a non-hex character.
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    b.chunks_exact(2)
        .map(|p| {
            let hi = (p[0] as char).to_digit(16)?;
            let lo = (p[1] as char).to_digit(16)?;
            Some((hi * 16 + lo) as u8)
        })
        .collect()
}

/// `MessageDecoder.createMessageId`: store host address, port (i32) and commitlog offset (i64).
pub fn offset_msg_id(store_host: &Host, offset: i64) -> String {
    let mut b = store_host.addr_bytes();
    b.extend_from_slice(&store_host.port.to_be_bytes());
    b.extend_from_slice(&offset.to_be_bytes());
    to_hex(&b)
}

/// `MessageDecoder.decodeMessageId`: 32 hex characters mean an IPv4 store host, 56 an IPv6 one.
pub fn decode_offset_msg_id(id: &str) -> Option<(Host, i64)> {
    let b = from_hex(id)?;
    let (host, rest) = match b.len() {
        16 => {
            let a: [u8; 4] = b.get(..4)?.try_into().ok()?;
            (IpAddr::from(a), b.get(4..)?)
        }
        28 => {
            let a: [u8; 16] = b.get(..16)?.try_into().ok()?;
            (IpAddr::from(a), b.get(16..)?)
        }
        _ => return None,
    };
    let port = i32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
    let off = i64::from_be_bytes(rest.get(4..12)?.try_into().ok()?);
    Some((Host::new(host, port), off))
}

/// The parts of a client message id (`MessageClientIDSetter.createUniqID`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UniqKey {
    pub ip: IpAddr,
    /// Low 16 bits of the producer's process id.
    pub pid: u16,
    pub class_loader_hash: i32,
    /// Milliseconds since the start of the month (client local time) when the id was made.
    pub millis_in_month: u32,
    pub counter: u16,
}

/// Decode a UNIQ_KEY: 32 hex characters (IPv4 client) or 56 (IPv6). `None` for other shapes
/// (system messages such as POP checkpoints use their own keys).
pub fn decode_uniq_key(id: &str) -> Option<UniqKey> {
    let b = from_hex(id)?;
    let ip_len = match b.len() {
        16 => 4,
        28 => 16,
        _ => return None,
    };
    let ip = if ip_len == 4 {
        IpAddr::from(<[u8; 4]>::try_from(b.get(..4)?).ok()?)
    } else {
        IpAddr::from(<[u8; 16]>::try_from(b.get(..16)?).ok()?)
    };
    let r = b.get(ip_len..)?;
    Some(UniqKey {
        ip,
        pid: u16::from_be_bytes(r.get(0..2)?.try_into().ok()?),
        class_loader_hash: i32::from_be_bytes(r.get(2..6)?.try_into().ok()?),
        millis_in_month: u32::from_be_bytes(r.get(6..10)?.try_into().ok()?),
        counter: u16::from_be_bytes(r.get(10..12)?.try_into().ok()?),
    })
}

impl UniqKey {
    /// `MessageClientIDSetter.getNearlyTimeFromID`: the month start of `now` (in `tz`) plus the
    /// id's time field, stepped back one month if that is not before `now`.
    pub fn nearly_time<Tz: TimeZone>(&self, now_ms: i64, tz: &Tz) -> Option<i64> {
        let now = tz.timestamp_millis_opt(now_ms).single()?;
        let month_start = |y: i32, m: u32| -> Option<i64> {
            let d = NaiveDate::from_ymd_opt(y, m, 1)?.and_hms_opt(0, 0, 0)?;
            match tz.from_local_datetime(&d) {
                LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Some(t.timestamp_millis()),
                LocalResult::None => None,
            }
        };
        let (y, m) = (now.year(), now.month());
        let t = month_start(y, m)? + self.millis_in_month as i64;
        if t < now_ms {
            return Some(t);
        }
        let (py, pm) = if m == 1 { (y - 1, 12) } else { (y, m - 1) };
        Some(month_start(py, pm)? + self.millis_in_month as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_msg_id_round_trip() {
        let h = Host::v4([192, 168, 0, 20], 10911);
        assert_eq!(offset_msg_id(&h, 0), "C0A8001400002A9F0000000000000000");
        assert_eq!(
            decode_offset_msg_id("C0A8001400002A9F00000000000002F1"),
            Some((h, 753))
        );
        let v6 = Host::new("fd00::21".parse().unwrap(), 10911);
        let id = offset_msg_id(&v6, 1 << 40);
        assert_eq!(id.len(), 56);
        assert_eq!(decode_offset_msg_id(&id), Some((v6, 1 << 40)));
        assert_eq!(decode_offset_msg_id("zz"), None);
        assert_eq!(decode_offset_msg_id("C0A8"), None);
    }

    #[test]
    fn uniq_key_decode() {
        // From the 4.9 oracle: an IPv6 client (fd00::2).
        let k =
            decode_uniq_key("FD00000000000000000000000000000232055FFD2B2799E3F3CB0000").unwrap();
        assert_eq!(k.ip, "fd00::2".parse::<IpAddr>().unwrap());
        assert_eq!(k.pid, 0x3205);
        assert_eq!(k.counter, 0);
        assert_eq!(k.class_loader_hash, 0x5FFD2B27);
        assert_eq!(k.millis_in_month, 0x99E3F3CB);
        let now = 1796073053181i64; // store time of that message
        let t = k.nearly_time(now, &chrono::Utc).unwrap();
        assert!(t <= now && now - t < 60_000, "{t} vs {now}");
        assert_eq!(decode_uniq_key("0123"), None);
    }
}

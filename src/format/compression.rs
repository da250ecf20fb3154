//! Compressed bodies (FORMAT.md 3.2): zlib streams, LZ4 frames, zstd frames, by the sysflag type.

use std::io::{Read, Write};

use super::commitlog::sysflag;

/// Compression type from the sysflag (`COMPRESSION_TYPE_COMPARATOR`): 0 and 3 zlib, 1 lz4, 2 zstd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    Zlib,
    Lz4,
    Zstd,
}

impl Compression {
    /// The type a COMPRESSED record's sysflag names; `None` for an unknown value (4 to 7).
    pub fn of(sys_flag: i32) -> Option<Self> {
        match (sys_flag & sysflag::COMPRESSION_TYPE_MASK) >> 8 {
            0 | 3 => Some(Compression::Zlib),
            1 => Some(Compression::Lz4),
            2 => Some(Compression::Zstd),
            _ => None,
        }
    }

    /// The sysflag bits a 4.9.4+ client sets for this type (COMPRESSED included).
    pub fn sys_flag_bits(self) -> i32 {
        let t = match self {
            Compression::Lz4 => 1,
            Compression::Zstd => 2,
            Compression::Zlib => 3,
        };
        sysflag::COMPRESSED | (t << 8)
    }
}

/// Largest body we inflate (the broker's maxMessageSize is 4 MiB; clients compress larger).
const MAX_INFLATED: u64 = 256 << 20;

/// Why a COMPRESSED body was not decompressed.
#[derive(Debug, thiserror::Error)]
pub enum DecompressError {
    /// The sysflag's compression type is none of the three (4 to 7).
    #[error("unknown compression type {found}")]
    UnknownType { found: i32 },
    /// The body is not a valid stream or frame of `kind`.
    #[error("{kind:?} body does not decompress: {source}")]
    Corrupt {
        kind: Compression,
        #[source]
        source: std::io::Error,
    },
}

/// Decompress a COMPRESSED body by the sysflag's compression type.
pub fn decompress(sys_flag: i32, body: &[u8]) -> Result<Vec<u8>, DecompressError> {
    let kind = Compression::of(sys_flag).ok_or(DecompressError::UnknownType {
        found: (sys_flag & sysflag::COMPRESSION_TYPE_MASK) >> 8,
    })?;
    let mut out = Vec::new();
    let res = match kind {
        // `bufread`: the body is read in place, not copied through a buffer first
        Compression::Zlib => flate2::bufread::ZlibDecoder::new(body)
            .take(MAX_INFLATED)
            .read_to_end(&mut out),
        Compression::Lz4 => lz4_flex::frame::FrameDecoder::new(body)
            .take(MAX_INFLATED)
            .read_to_end(&mut out),
        Compression::Zstd => unzstd(body, &mut out),
    };
    res.map(|_| out)
        .map_err(|source| DecompressError::Corrupt { kind, source })
}

thread_local! {
    /// The zstd decompression context of this thread, made once: making one per body costs
    /// more than decompressing a small body.
    static ZSTD_CONTEXT: std::cell::RefCell<Option<zstd::zstd_safe::DCtx<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Every zstd frame of `body` into `out` (as `zstd::stream::read::Decoder` reads them), through
/// this thread's context.
fn unzstd(body: &[u8], out: &mut Vec<u8>) -> std::io::Result<usize> {
    ZSTD_CONTEXT.with_borrow_mut(|slot| {
        let context = match slot {
            Some(c) => {
                c.reset(zstd::zstd_safe::ResetDirective::SessionOnly)
                    .map_err(|code| std::io::Error::other(zstd::zstd_safe::get_error_name(code)))?;
                c
            }
            None => slot.insert(zstd::zstd_safe::DCtx::create()),
        };
        zstd::stream::read::Decoder::with_context(body, context)
            .take(MAX_INFLATED)
            .read_to_end(out)
    })
}

/// Compress a body as a client would (zlib level 5 as `ZlibCompressor`, an LZ4 frame, zstd).
pub fn compress(kind: Compression, body: &[u8]) -> std::io::Result<Vec<u8>> {
    match kind {
        Compression::Zlib => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(5));
            e.write_all(body)?;
            e.finish()
        }
        Compression::Lz4 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(body)?;
            e.finish().map_err(std::io::Error::other)
        }
        Compression::Zstd => zstd::bulk::compress(body, 5),
    }
}

/// Compressors that keep their state between bodies (a fresh zlib or zstd context per body
/// costs more than compressing a small one).
pub struct Compressor {
    zlib: flate2::Compress,
    zstd: Option<zstd::bulk::Compressor<'static>>,
}

impl Default for Compressor {
    fn default() -> Self {
        Compressor {
            zlib: flate2::Compress::new(flate2::Compression::new(5), true),
            zstd: zstd::bulk::Compressor::new(5).ok(),
        }
    }
}

impl Compressor {
    /// Same output as [`compress`].
    pub fn compress(&mut self, kind: Compression, body: &[u8]) -> std::io::Result<Vec<u8>> {
        match kind {
            Compression::Zlib => {
                self.zlib.reset();
                let mut out = Vec::with_capacity(body.len() / 2 + 64);
                loop {
                    let done = self.zlib.total_in() as usize;
                    let rest = body.get(done..).unwrap_or_default();
                    let status = self
                        .zlib
                        .compress_vec(rest, &mut out, flate2::FlushCompress::Finish)
                        .map_err(std::io::Error::other)?;
                    if status == flate2::Status::StreamEnd {
                        return Ok(out);
                    }
                    out.reserve(out.capacity().max(64));
                }
            }
            Compression::Zstd => match self.zstd.as_mut() {
                Some(z) => z.compress(body),
                None => compress(kind, body),
            },
            Compression::Lz4 => compress(kind, body),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_types() {
        let body = b"hello hello hello hello compressed world".repeat(20);
        let mut reused = Compressor::default();
        for kind in [Compression::Zlib, Compression::Lz4, Compression::Zstd] {
            let c = compress(kind, &body).unwrap();
            for _ in 0..2 {
                assert_eq!(reused.compress(kind, &body).unwrap(), c, "{kind:?}");
            }
            assert_eq!(decompress(kind.sys_flag_bits(), &c).unwrap(), body);
            assert_eq!(Compression::of(kind.sys_flag_bits()), Some(kind));
        }
        // Clients before 4.9.4 set only the COMPRESSED bit: zlib.
        let z = compress(Compression::Zlib, &body).unwrap();
        assert_eq!(decompress(sysflag::COMPRESSED, &z).unwrap(), body);
        assert!(matches!(
            decompress(sysflag::COMPRESSED | 0x400, &z),
            Err(DecompressError::UnknownType { found: 4 })
        ));
        let e = decompress(Compression::Lz4.sys_flag_bits(), b"garbage").unwrap_err();
        assert!(
            matches!(
                e,
                DecompressError::Corrupt {
                    kind: Compression::Lz4,
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string().starts_with("Lz4 body does not decompress: "),
            "{e}"
        );
    }

    /// The thread's reused zstd context against a fresh decoder per body, with broken and
    /// truncated bodies between good ones (an error must not leave the context half-way).
    #[test]
    fn the_reused_zstd_context_reads_as_a_fresh_decoder() {
        let flag = Compression::Zstd.sys_flag_bits();
        let fresh = |b: &[u8]| -> Result<Vec<u8>, String> {
            let mut out = Vec::new();
            zstd::stream::read::Decoder::new(b)
                .and_then(|d| d.take(MAX_INFLATED).read_to_end(&mut out))
                .map(|_| out)
                .map_err(|e| format!("Zstd body does not decompress: {e}"))
        };
        let a = compress(Compression::Zstd, &b"first body ".repeat(300)).unwrap();
        let b = compress(Compression::Zstd, b"second").unwrap();
        let two_frames = [a.clone(), b.clone()].concat();
        let bodies: Vec<Vec<u8>> = vec![
            a.clone(),
            a[..a.len() / 2].to_vec(),
            b.clone(),
            b"not zstd at all".to_vec(),
            two_frames,
            [b.clone(), b"trailing".to_vec()].concat(),
            a,
            Vec::new(),
            b,
        ];
        for body in &bodies {
            assert_eq!(
                decompress(flag, body).map_err(|e| e.to_string()),
                fresh(body),
                "{body:?}"
            );
        }
    }
}

//! Checked big-endian readers over byte slices: `None` instead of a panic when out of bounds.
//! Every integer in every RocketMQ store file is big-endian and signed (Java `ByteBuffer`).

use super::error::{ErrorKind, ParseError};

#[inline]
pub fn array_at<const N: usize>(buf: &[u8], pos: usize) -> Option<[u8; N]> {
    let end = pos.checked_add(N)?;
    buf.get(pos..end)?.try_into().ok()
}

#[inline]
pub fn i16_at(buf: &[u8], pos: usize) -> Option<i16> {
    array_at(buf, pos).map(i16::from_be_bytes)
}

#[inline]
pub fn i32_at(buf: &[u8], pos: usize) -> Option<i32> {
    array_at(buf, pos).map(i32::from_be_bytes)
}

#[inline]
pub fn i64_at(buf: &[u8], pos: usize) -> Option<i64> {
    array_at(buf, pos).map(i64::from_be_bytes)
}

/// A cursor over a record that reports truncation as a [`ParseError`] at the cursor's offset.
/// `base` is the offset of `buf[0]` that error offsets are reported against.
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8], base: u64) -> Self {
        Cursor { buf, pos: 0, base }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    fn truncated(&self, what: &'static str, needed: usize) -> ParseError {
        ParseError::new(
            self.base + self.pos as u64,
            ErrorKind::Truncated {
                what,
                needed: needed as u64,
                left: self.remaining() as u64,
            },
        )
    }

    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ParseError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| self.truncated(what, n))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], ParseError> {
        let b = self.bytes(N, what)?;
        b.try_into().map_err(|_| self.truncated(what, N))
    }

    pub fn i8(&mut self, what: &'static str) -> Result<i8, ParseError> {
        Ok(i8::from_be_bytes(self.array(what)?))
    }
    pub fn i16(&mut self, what: &'static str) -> Result<i16, ParseError> {
        Ok(i16::from_be_bytes(self.array(what)?))
    }
    pub fn i32(&mut self, what: &'static str) -> Result<i32, ParseError> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }
    pub fn i64(&mut self, what: &'static str) -> Result<i64, ParseError> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_do_not_panic_out_of_bounds() {
        let b = [0u8, 0, 0, 7];
        assert_eq!(i32_at(&b, 0), Some(7));
        assert_eq!(i32_at(&b, 1), None);
        assert_eq!(i64_at(&b, 0), None);
        assert_eq!(i16_at(&b, usize::MAX), None);
        let mut c = Cursor::new(&b, 100);
        assert_eq!(c.i16("x").unwrap(), 0);
        let e = c.i32("field").unwrap_err();
        assert_eq!(e.offset, 102);
    }
}

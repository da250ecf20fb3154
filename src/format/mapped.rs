//! Read-only access to a whole file: a memory map, or the bytes read into memory.
//!
//! This module holds the crate's only `unsafe` blocks: mapping a file, releasing a range of a
//! map and the prefetch hint of [`prefetch`]. The contract mapping accepts: the file is not truncated while mapped. A live
//! broker never truncates a commitlog file it is writing, but a broker restarting into recovery
//! can; stop the broker (or work on a copy) before running commands that read a whole store, or a
//! SIGBUS can end the process.

use std::ops::Deref;
use std::path::{Path, PathBuf};

use super::error::{Error, Result};

enum Bytes {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

/// A file's bytes, mapped read-only (or read whole when mapping is not possible).
pub struct Mapped {
    path: PathBuf,
    bytes: Bytes,
}

impl Mapped {
    /// Map `path` read-only. Empty files and files that cannot be mapped are read instead.
    /// Anything but a regular file (a FIFO, a device, a directory) is refused without blocking.
    pub fn open(path: &Path) -> Result<Self> {
        let file = super::entry::open_regular(path)?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        if len == 0 {
            return Ok(Mapped {
                path: path.to_path_buf(),
                bytes: Bytes::Owned(Vec::new()),
            });
        }
        #[allow(unsafe_code)]
        // SAFETY: the map is read-only and private to this process. The file must not shrink
        // while mapped (module doc); everything reading the map checks bounds against its length.
        let map = unsafe { memmap2::MmapOptions::new().map(&file) };
        match map {
            Ok(map) => Ok(Mapped {
                path: path.to_path_buf(),
                bytes: Bytes::Map(map),
            }),
            Err(_) => Self::read(path),
        }
    }

    /// Read `path` whole into memory (for small files, and where mapping is not wanted).
    pub fn read(path: &Path) -> Result<Self> {
        use std::io::Read;
        let mut v = Vec::new();
        super::entry::open_regular(path)?
            .read_to_end(&mut v)
            .map_err(|e| Error::io(path, e))?;
        Ok(Mapped {
            path: path.to_path_buf(),
            bytes: Bytes::Owned(v),
        })
    }

    /// Bytes that did not come from a file (tests, fuzzing); `path` is only used in errors.
    pub fn from_vec(path: impl Into<PathBuf>, v: Vec<u8>) -> Self {
        Mapped {
            path: path.into(),
            bytes: Bytes::Owned(v),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Drop this process's page table entries for the pages inside `from..to` (the file and the
    /// page cache are untouched: a later read maps the same pages again). A walk releases what
    /// it has read, so that unmapping the whole file at the end, which holds up every other
    /// thread's page faults while it runs, has little left to do.
    pub fn release(&self, from: usize, to: usize) {
        #[cfg(unix)]
        if let Bytes::Map(m) = &self.bytes {
            const PAGE: usize = 4096;
            let start = from.next_multiple_of(PAGE);
            let end = to.min(m.len()) / PAGE * PAGE;
            if end > start {
                #[allow(unsafe_code)]
                // SAFETY: the map is a shared read-only map of a file, so MADV_DONTNEED only
                // drops page table entries; reading the range again maps the same page cache
                // pages (it does not zero them, as it would in a private map). Every slice of the
                // map stays valid.
                let _ = unsafe {
                    m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
                };
            }
        }
        #[cfg(not(unix))]
        let _ = (from, to);
    }

    /// Tell the kernel the map will be read here and there (no read-ahead).
    pub fn advise_random(&self) {
        #[cfg(unix)]
        if let Bytes::Map(m) = &self.bytes {
            let _ = m.advise(memmap2::Advice::Random);
        }
    }

    /// Tell the kernel the map will be read front to back.
    pub fn advise_sequential(&self) {
        #[cfg(unix)]
        if let Bytes::Map(m) = &self.bytes {
            let _ = m.advise(memmap2::Advice::Sequential);
        }
    }
}

impl Deref for Mapped {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

/// Ask the processor to start loading the cache line of `items[at]` (nothing happens when `at` is
/// out of bounds). A hint only: it never faults and changes no data. Walks over mapped files use
/// it ahead of the records they parse, lookups in big tables ahead of the keys they check.
#[inline]
pub fn prefetch<T>(items: &[T], at: usize) {
    if let Some(b) = items.get(at) {
        prefetch_line(std::ptr::from_ref(b).cast::<u8>());
    }
}

/// [`prefetch`] for an address already known to be inside a slice.
#[inline(always)]
fn prefetch_line(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 processor has; a prefetch does not
    // read into the program and never faults, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(at.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Read the byte `buf[at]` (nothing when out of bounds), so that its page is mapped now.
#[inline]
fn read_byte(buf: &[u8], at: usize) {
    if let Some(b) = buf.get(at) {
        // black_box keeps the compiler from dropping a read whose value is not used
        std::hint::black_box(*b);
    }
}

/// Prefetches every cache line a few KiB ahead of a walk. Parsing a record reads its header and
/// then, past the body, its topic and properties, before the body CRC streams through the body:
/// without this, that jump waits for memory on every record (and the processor's own prefetchers
/// stop at page boundaries). A prefetch into a page that is not mapped yet is dropped, so the
/// first byte of each block the kernel maps at once is read instead: the block is mapped a few
/// KiB before the walk gets there, and the prefetches into it count.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadAhead {
    next: usize,
}

impl ReadAhead {
    const DISTANCE: usize = 8 << 10;
    const LINE: usize = 64;
    /// Linux maps the pages of a file mapping this many bytes at a time around a page fault
    /// (`fault_around_bytes`, 64 KiB by default).
    const MAP_BLOCK: usize = 64 << 10;

    /// Prefetch `buf` up to a few KiB past `pos`, the position about to be read.
    #[inline]
    pub fn touch(&mut self, buf: &[u8], pos: usize) {
        let until = pos.saturating_add(Self::DISTANCE).min(buf.len());
        let from = self.next.max(pos & !(Self::LINE - 1));
        if from >= until {
            return;
        }
        let mut block = from.next_multiple_of(Self::MAP_BLOCK);
        while block < until {
            read_byte(buf, block);
            block += Self::MAP_BLOCK;
        }
        let mut at = from;
        while at < until {
            prefetch_line(buf.as_ptr().wrapping_add(at));
            at += Self::LINE;
        }
        self.next = at;
    }
}

/// Return the free memory of the allocator's arenas to the system (glibc `malloc_trim`; a no-op
/// elsewhere). The allocator keeps what a finished phase freed; when the next phase allocates in
/// other sizes (the commitlog pass of `verify` makes many small per-queue records, the plan of
/// `repair` others), the process would hold both at once: on a store of 50,000 queues that puts
/// `repair --dry-run` at 209 MB instead of 187 MB (README, "Measured"). Kept here with the maps,
/// so that this module holds every `unsafe` of the crate.
pub fn give_back_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::os::raw::c_int;
        }
        #[allow(unsafe_code)]
        // SAFETY: malloc_trim only returns pages that hold no live allocation to the system; it
        // takes the arenas' own locks and changes no memory the program uses.
        unsafe {
            malloc_trim(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_pages_read_the_same_bytes_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..5 * 4096 + 123).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let map = Mapped::open(&path).unwrap();
        assert_eq!(&map[..], &bytes[..]);
        // Unaligned ends (only the whole pages inside are released), the whole map, nothing.
        map.release(100, 3 * 4096 + 5);
        map.release(0, map.len());
        map.release(4096, 4096);
        assert_eq!(&map[..], &bytes[..], "the same bytes, not zeros");
        // The walk's read-ahead over the whole map, from every position near a block edge.
        let mut ahead = ReadAhead::default();
        for pos in (0..map.len()).step_by(977) {
            ahead.touch(&map, pos);
        }
        assert_eq!(&map[..], &bytes[..]);
    }
}

//! `timerwheel` (`TimerWheel`, `Slot`): `2 * 7 * 86400` slots of 32 bytes, 38,707,200 bytes
//! whatever the precision. Slot `i` holds the second `timeMs / precision` whose index modulo the
//! slot count is `i`, the first and last timer log positions of its chain and a count. The file
//! is written sparse: most slots are zero. Slots of seconds already delivered are not cleared.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::log::TimerUnit;

use crate::format::bytes::{i32_at, i64_at};
use crate::format::error::{Error, ErrorKind, Result};
use crate::format::mapped::Mapped;

/// `Slot.SIZE`.
pub const SLOT_SIZE: usize = 32;
/// `TimerMessageStore.TIMER_WHEEL_TTL_DAY * DAY_SECS`: `slotsTotal`.
pub const SLOTS_TOTAL: u64 = 7 * 86_400;
/// The wheel holds twice `slotsTotal` slots.
pub const WHEEL_SLOTS: u64 = 2 * SLOTS_TOTAL;
/// The file's size; any other size is refused by the broker.
pub const WHEEL_FILE_SIZE: u64 = WHEEL_SLOTS * SLOT_SIZE as u64;

/// One slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Slot {
    /// `timeMs / precision` of the second this slot holds.
    pub time_div_precision: i64,
    /// Timer log position of the first unit of the chain.
    pub first_pos: i64,
    /// Timer log position of the last unit: chains are walked from here through `prev_pos`.
    pub last_pos: i64,
    /// Units linked (+1 per unit, -1 per delete marker).
    pub num: i32,
    /// Unused, 0.
    pub magic: i32,
}

impl Slot {
    /// The empty slot `getSlot` answers for a second the slot does not hold.
    pub const EMPTY: Slot = Slot {
        time_div_precision: -1,
        first_pos: -1,
        last_pos: -1,
        num: 0,
        magic: 0,
    };

    /// Decode a slot; `None` when fewer than 32 bytes are given.
    pub fn from_bytes(b: &[u8]) -> Option<Slot> {
        Some(Slot {
            time_div_precision: i64_at(b, 0)?,
            first_pos: i64_at(b, 8)?,
            last_pos: i64_at(b, 16)?,
            num: i32_at(b, 24)?,
            magic: i32_at(b, 28)?,
        })
    }

    /// The slot's 32 bytes.
    pub fn to_bytes(&self) -> [u8; SLOT_SIZE] {
        let mut b = [0u8; SLOT_SIZE];
        b[0..8].copy_from_slice(&self.time_div_precision.to_be_bytes());
        b[8..16].copy_from_slice(&self.first_pos.to_be_bytes());
        b[16..24].copy_from_slice(&self.last_pos.to_be_bytes());
        b[24..28].copy_from_slice(&self.num.to_be_bytes());
        b[28..32].copy_from_slice(&self.magic.to_be_bytes());
        b
    }

    /// The slot's time in ms.
    pub fn time_ms(&self, precision_ms: i64) -> i64 {
        self.time_div_precision.saturating_mul(precision_ms)
    }
}

/// The slot index of a time (`TimerWheel.getSlotIndex`).
pub fn slot_index(time_ms: i64, precision_ms: i64) -> u64 {
    (time_ms / precision_ms.max(1)).rem_euclid(WHEEL_SLOTS as i64) as u64
}

/// The wheel file, mapped.
pub struct TimerWheel {
    map: Mapped,
}

impl TimerWheel {
    /// Open and map `path`, refusing a size other than [`WHEEL_FILE_SIZE`] as the broker does.
    pub fn open(path: &Path) -> Result<TimerWheel> {
        let map = Mapped::open(path)?;
        if map.len() as u64 != WHEEL_FILE_SIZE {
            return Err(Error::data(
                path,
                0,
                ErrorKind::Unexpected {
                    what: "timer wheel size",
                    expected: format!("{WHEEL_FILE_SIZE} bytes ({WHEEL_SLOTS} slots of 32)"),
                    found: format!("{} bytes", map.len()),
                },
            ));
        }
        Ok(TimerWheel { map })
    }

    pub fn path(&self) -> &Path {
        self.map.path()
    }

    /// The slot at `index` as stored.
    pub fn slot(&self, index: u64) -> Slot {
        let at = (index % WHEEL_SLOTS) as usize * SLOT_SIZE;
        self.map
            .get(at..)
            .and_then(Slot::from_bytes)
            .unwrap_or_default()
    }

    /// `TimerWheel.getSlot`: the slot for the second of `time_ms`, or [`Slot::EMPTY`] when the
    /// stored slot holds another second.
    pub fn get_slot(&self, time_ms: i64, precision_ms: i64) -> Slot {
        let s = self.slot(slot_index(time_ms, precision_ms));
        if s.time_div_precision == time_ms / precision_ms.max(1) {
            s
        } else {
            Slot::EMPTY
        }
    }

    /// Every slot with a non-zero byte, by index. Zero pages are skipped a page at a time.
    pub fn non_empty(&self) -> impl Iterator<Item = (u64, Slot)> + '_ {
        const PAGE: usize = 4096;
        let bytes: &[u8] = &self.map;
        bytes
            .chunks(PAGE)
            .enumerate()
            .filter(|(_, page)| page.iter().any(|&b| b != 0))
            .flat_map(move |(p, page)| {
                page.chunks_exact(SLOT_SIZE)
                    .enumerate()
                    .filter(|(_, s)| s.iter().any(|&b| b != 0))
                    .filter_map(move |(i, s)| {
                        let index = (p * PAGE / SLOT_SIZE + i) as u64;
                        Slot::from_bytes(s).map(|slot| (index, slot))
                    })
            })
    }
}

/// The wheel as the broker's enqueue builds it (`TimerMessageStore.doEnqueue` then
/// `TimerWheel.putSlot`), from timer log units given in log order: each unit becomes the last
/// of the slot holding its second (a slot holding another second is started afresh, as
/// `getSlot` answers it empty), the first when the slot was empty, and counts +1 (-1 for a
/// delete marker). One entry per slot in use: at most [`WHEEL_SLOTS`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RebuiltWheel {
    precision_ms: i64,
    slots: BTreeMap<u64, Slot>,
}

impl RebuiltWheel {
    pub fn new(precision_ms: i64) -> RebuiltWheel {
        RebuiltWheel {
            precision_ms: precision_ms.max(1),
            slots: BTreeMap::new(),
        }
    }

    /// `getSlot(time_ms)` on the wheel built so far.
    pub fn get_slot(&self, time_ms: i64) -> Slot {
        match self.slots.get(&slot_index(time_ms, self.precision_ms)) {
            Some(s) if s.time_div_precision == time_ms / self.precision_ms => *s,
            _ => Slot::EMPTY,
        }
    }

    /// Link the unit at timer log position `pos` into its slot. The unit's `prev_pos` is not
    /// read: the broker wrote `get_slot(..).last_pos` there (see [`RebuiltWheel::get_slot`]).
    pub fn put(&mut self, pos: u64, u: &TimerUnit) {
        let t = u.slot_time_ms();
        let s = self.get_slot(t);
        let slot = Slot {
            time_div_precision: t / self.precision_ms,
            first_pos: if s.first_pos == -1 {
                pos as i64
            } else {
                s.first_pos
            },
            last_pos: pos as i64,
            num: if u.is_delete() { s.num - 1 } else { s.num + 1 },
            magic: s.magic,
        };
        self.slots.insert(slot_index(t, self.precision_ms), slot);
    }

    /// The slots in use, by index.
    pub fn slots(&self) -> impl Iterator<Item = (u64, &Slot)> {
        self.slots.iter().map(|(i, s)| (*i, s))
    }

    /// Whether `wheel` holds exactly these slots and zeros elsewhere.
    pub fn same_as(&self, wheel: &TimerWheel) -> bool {
        let mut mine = self.slots.iter();
        wheel
            .non_empty()
            .all(|(i, s)| mine.next() == Some((&i, &s)))
            && mine.next().is_none()
    }

    /// Write the whole wheel into `file` (new and empty, at `path`): its full size, zero
    /// (sparse) but for the slots in use. The caller syncs it.
    pub fn write_to(&self, file: &std::fs::File, path: &Path) -> Result<()> {
        use std::os::unix::fs::FileExt;
        file.set_len(WHEEL_FILE_SIZE)
            .map_err(|e| Error::io(path, e))?;
        for (i, s) in &self.slots {
            file.write_all_at(&s.to_bytes(), i * SLOT_SIZE as u64)
                .map_err(|e| Error::io(path, e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_round_trip_and_index() {
        let s = Slot {
            time_div_precision: 1_796_074_385,
            first_pos: 0,
            last_pos: 936,
            num: 4,
            magic: 0,
        };
        assert_eq!(Slot::from_bytes(&s.to_bytes()), Some(s));
        assert_eq!(slot_index(1_796_074_385_000, 1000), 1_027_985);
        assert_eq!(WHEEL_FILE_SIZE, 38_707_200);
    }

    fn unit(slot_second: i64, magic: i32) -> TimerUnit {
        TimerUnit {
            size: 52,
            prev_pos: -1,
            magic,
            write_time_ms: 1_796_074_380_000,
            delay_delta_ms: ((slot_second - 1_796_074_380) * 1000) as i32,
            commitlog_offset: 0,
            record_size: 1,
            real_topic_hash: 0,
            reserved: 0,
        }
    }

    #[test]
    fn rebuilt_slots_follow_the_enqueue() {
        let mut w = RebuiltWheel::new(1000);
        w.put(0, &unit(1_796_074_385, 1));
        w.put(52, &unit(1_796_074_386, 1));
        w.put(104, &unit(1_796_074_385, 1));
        // a delete marker counts down; the slot 14 days later takes the index over
        w.put(156, &unit(1_796_074_385, 5));
        let s = w.get_slot(1_796_074_385_500);
        assert_eq!((s.first_pos, s.last_pos, s.num), (0, 156, 1));
        assert_eq!(w.get_slot(1_796_074_387_000), Slot::EMPTY);
        w.put(208, &unit(1_796_074_385 + WHEEL_SLOTS as i64, 1));
        assert_eq!(w.get_slot(1_796_074_385_000), Slot::EMPTY);
        assert_eq!(w.slots().count(), 2);
    }
}

//! `dump index`: index file headers and entries.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::json;

use crate::commands::output::{self, format_time};
use crate::commands::ExitStatus;
use crate::engine::store::StorePath;
use crate::engine::Store;
use crate::format::geometry::resolve;
use crate::format::indexfile::{
    infer_geometry, slot_of, IndexFile, IndexGeometry, IndexHeader, InferResult,
};
use crate::format::mapped::Mapped;

use super::IndexArgs;

#[derive(Serialize)]
struct EntryJson<'a> {
    file: &'a str,
    entry: u32,
    slot: u32,
    key_hash: i32,
    commitlog_offset: i64,
    time_diff: i32,
    /// `beginTimestamp + time_diff * 1000`, as the lookup computes it.
    store_timestamp: i64,
    prev: i32,
}

pub(super) fn index(a: &IndexArgs, out: &mut dyn Write) -> anyhow::Result<ExitStatus> {
    let inputs = a.geometry.inputs()?;
    let (files, store_geometry): (Vec<PathBuf>, Option<IndexGeometry>) =
        match StorePath::classify(&a.path)? {
            StorePath::Root(root) => {
                let s = Store::open(&root, &inputs)?;
                let g = IndexGeometry::new(
                    s.geometry.index_slots.value,
                    s.geometry.index_entries.value,
                );
                (s.index_files.clone(), Some(g))
            }
            StorePath::IndexFile(p) => (vec![p], None),
            _ => anyhow::bail!(
                "{}: give a store root or an index file (index/<yyyyMMddHHmmssSSS>)",
                a.path.display()
            ),
        };
    let flags = resolve(&inputs);
    let mut status = ExitStatus::Success;
    let mut entries_total = 0u64;
    for p in &files {
        let name = p.display().to_string();
        let map = Mapped::open(p)?;
        let header = IndexHeader::from_bytes(&map).map_err(|e| e.in_file(p, 0))?;
        let geometry = match store_geometry {
            Some(g) => Some(g),
            None => file_geometry(&map, &inputs, &flags),
        };
        if a.json {
            output::typed_line(
                out,
                "index_header",
                &json!({
                    "file": name, "size": map.len(), "header": header,
                    "entries": (header.index_count as i64 - 1).max(0),
                    "geometry": geometry,
                }),
            )?;
        } else {
            writeln!(out, "{name}")?;
            writeln!(
                out,
                "  begin {} ({})  end {} ({})",
                header.begin_timestamp,
                format_time(header.begin_timestamp),
                header.end_timestamp,
                format_time(header.end_timestamp)
            )?;
            writeln!(
                out,
                "  phy offsets {}..{}  hash slots taken {}  index count {} ({} entries)  geometry {}",
                header.begin_phy_offset,
                header.end_phy_offset,
                header.hash_slot_count,
                header.index_count,
                (header.index_count as i64 - 1).max(0),
                geometry.map(|g| g.to_string()).unwrap_or_else(|| "unknown".into())
            )?;
        }
        if a.header_only {
            continue;
        }
        let Some(g) = geometry else {
            output::say(&format!("{name}: slot and entry counts unknown (pass --index-slots and --index-entries); entries not shown"
            ));
            status = ExitStatus::Findings;
            continue;
        };
        let file = match IndexFile::new(map, g) {
            Ok(f) => f,
            Err(e) => {
                output::say(&e.in_file(p, 0).to_string());
                status = ExitStatus::Findings;
                continue;
            }
        };
        if !a.json {
            writeln!(
                out,
                "  {:>9} {:>8} {:>11} {:>14} {:>9} {:<29} {:>9}",
                "ENTRY", "SLOT", "HASH", "PHY_OFFSET", "DIFF_S", "TIME", "PREV"
            )?;
        }
        for e in file.entries() {
            let (n, e) = match e {
                Ok(x) => x,
                Err(err) => {
                    output::say(&err.in_file(p, 0).to_string());
                    status = ExitStatus::Findings;
                    break;
                }
            };
            entries_total += 1;
            let time = header
                .begin_timestamp
                .wrapping_add(i64::from(e.time_diff).wrapping_mul(1000));
            let slot = slot_of(e.key_hash, g.slots);
            if a.json {
                output::typed_line(
                    out,
                    "index_entry",
                    &EntryJson {
                        file: &name,
                        entry: n,
                        slot,
                        key_hash: e.key_hash,
                        commitlog_offset: e.phy_offset,
                        time_diff: e.time_diff,
                        store_timestamp: time,
                        prev: e.prev,
                    },
                )?;
            } else {
                writeln!(
                    out,
                    "  {:>9} {:>8} {:>11} {:>14} {:>9} {:<29} {:>9}",
                    n,
                    slot,
                    e.key_hash,
                    e.phy_offset,
                    e.time_diff,
                    format_time(time),
                    e.prev
                )?;
            }
        }
    }
    if a.json {
        output::summary_line(
            out,
            "dump index",
            &json!({ "files": files.len(), "entries": entries_total }),
        )?;
    }
    Ok(status)
}

/// The geometry of a lone index file: the flags (or broker config), else inference, else the
/// broker's default when the size fits it.
fn file_geometry(
    map: &[u8],
    inputs: &crate::format::geometry::GeometryInputs,
    resolved: &crate::format::geometry::Geometry,
) -> Option<IndexGeometry> {
    let given = |o: &crate::format::geometry::GeometryOverrides| {
        o.index_slots
            .zip(o.index_entries)
            .map(|(s, e)| IndexGeometry::new(s, e))
    };
    if let Some(g) = given(&inputs.flags).or_else(|| given(&inputs.broker_conf)) {
        return Some(g);
    }
    match infer_geometry(map).result {
        InferResult::Unique(g) => Some(g),
        _ => {
            let d = IndexGeometry::new(resolved.index_slots.value, resolved.index_entries.value);
            (d.file_size() == map.len() as u64).then_some(d)
        }
    }
}

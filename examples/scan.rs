//! Read every record of a store's commitlog (CRC checked) in parallel and report the throughput.
//! Used by `scripts/bench.sh`: `cargo run --release --example scan -- <STORE>`.

use std::time::Instant;

use rmqstore::engine::store::scan::scan_segments;
use rmqstore::engine::Store;
use rmqstore::format::geometry::GeometryInputs;

fn main() -> anyhow::Result<()> {
    let root = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: scan <STORE>"))?;
    let store = Store::open(root.as_ref(), &GeometryInputs::default())?;
    let t = Instant::now();
    let scans = scan_segments(&store, true, || 0u64, |n, m| *n += m.body.len() as u64)?;
    let secs = t.elapsed().as_secs_f64();
    let records: u64 = scans.iter().map(|s| s.records).sum();
    let bytes: u64 = scans.iter().map(|s| s.bytes).sum();
    let errors = scans.iter().filter(|s| s.error.is_some()).count();
    println!(
        "{records} records, {bytes} bytes in {} files, {errors} with errors: {secs:.2}s, {:.0} MB/s",
        scans.len(),
        bytes as f64 / 1e6 / secs.max(1e-9)
    );
    Ok(())
}

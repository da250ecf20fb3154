//! Ctrl-C (SIGINT) and SIGTERM as a flag for a long run to stop at its next step: the first sets
//! the flag (and says what happens now), the second exits at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use nix::sys::signal::{SigSet, Signal};

/// Block SIGINT and SIGTERM in this process (threads started later and child processes inherit
/// a clean state from it: children get the default mask back on exec) and turn them into a flag
/// on a thread of their own. `first` is said on stderr when the first one arrives. Call it before
/// any other thread is started, so that none of them gets the signals.
pub fn stop_flag(first: &'static str) -> anyhow::Result<Arc<AtomicBool>> {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.thread_block()?;
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    std::thread::Builder::new()
        .name("rmqstore-signals".into())
        .spawn(move || loop {
            match set.wait() {
                Ok(_) if !f.swap(true, Ordering::SeqCst) => eprintln!("rmqstore: {first}"),
                Ok(_) => std::process::exit(130),
                Err(_) => return,
            }
        })?;
    Ok(flag)
}

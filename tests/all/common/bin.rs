//! The real binary: `rmqstore` with a pinned environment, the fixture stores, generated stores,
//! and a running `serve`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// The real binary with a pinned environment and a time limit: a hang fails the test.
pub fn bin() -> assert_cmd::Command {
    let mut c = assert_cmd::Command::cargo_bin("rmqstore").unwrap();
    c.env_clear()
        .env("TZ", "UTC")
        .timeout(std::time::Duration::from_secs(120));
    c
}

/// `rmqstore` with `PATH` set, for commands that run others (`replay --exec`).
pub fn bin_with_path() -> assert_cmd::Command {
    let mut c = bin();
    c.env("PATH", "/usr/bin:/bin");
    c
}

/// `fixtures/<name>`, a store committed to the repository.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// The small geometry of the fixtures (`gen` arguments): 256 KiB commitlog files, consume
/// queue files of 100 units, index files of 64 slots and 256 entries.
pub const SMALL_GEOMETRY: [&str; 8] = [
    "--commitlog-file-size",
    "262144",
    "--cq-file-units",
    "100",
    "--index-slots",
    "64",
    "--index-entries",
    "256",
];

/// Arguments of the traced store the trace tests share, beside [`SMALL_GEOMETRY`]: 1,200
/// operations with the clients' message traces.
pub const TRACED_GEN_ARGS: [&str; 3] = ["--messages", "1200", "--traces"];

/// Write the traced store (`gen` with [`TRACED_GEN_ARGS`] and [`SMALL_GEOMETRY`]) into `dir`.
pub fn gen_traced_store(dir: &Path) {
    bin()
        .arg("gen")
        .arg(dir)
        .args(TRACED_GEN_ARGS)
        .args(SMALL_GEOMETRY)
        .assert()
        .success();
}

/// A running `rmqstore serve` on a free loopback port, killed when dropped.
pub struct Server {
    pub child: std::process::Child,
    /// The address it printed.
    pub addr: String,
}

impl Server {
    /// `serve STORE --listen 127.0.0.1:0 ARGS...`, once it prints its address.
    pub fn start(store: &Path, args: &[&str]) -> Server {
        Self::start_with(store, args, std::process::Stdio::inherit())
    }

    /// [`Server::start`] with its stderr going to `stderr` (piped, to read what it said).
    pub fn start_with(store: &Path, args: &[&str], stderr: std::process::Stdio) -> Server {
        use std::process::{Command, Stdio};
        let mut child = Command::new(env!("CARGO_BIN_EXE_rmqstore"))
            .arg("serve")
            .arg(store)
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("serve printed {line:?}"))
            .to_string();
        Server { child, addr }
    }

    /// SIGTERM, and the exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "serve did not stop on SIGTERM"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run the binary with `args`, paused at failpoint `pause` (`RMQSTORE_PAUSEPOINT`), send it
/// SIGINT there, and return its exit code and all it said on stderr.
pub fn interrupted_at(pause: &str, args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    use std::io::Read;
    let exe = assert_cmd::cargo::cargo_bin("rmqstore");
    let mut child = std::process::Command::new(exe)
        .args(args)
        .env("RMQSTORE_PAUSEPOINT", format!("{pause}:2000"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    while !said.contains(&format!("paused at {pause}")) {
        if err.read_line(&mut said).unwrap() == 0 {
            break;
        }
    }
    assert!(said.contains("paused at"), "{args:?}: {said}");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    err.read_to_string(&mut said).unwrap();
    (child.wait().unwrap().code(), said)
}

/// What stderr says for people: `--json` runs write their notes and errors as JSON lines
/// (`note`, `error`), read here as their message; other lines as they are.
pub fn said(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .filter(|v| v["type"] == "note" || v["type"] == "error")
                .and_then(|v| v["message"].as_str().map(str::to_string))
                .unwrap_or_else(|| l.to_string())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

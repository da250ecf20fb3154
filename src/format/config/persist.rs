//! Loading and writing config files the way the broker does (FORMAT.md 9.1).
//!
//! [`load`] follows `ConfigManager.load`: read `<file>`; if it is missing, empty or unparsable,
//! read `<file>.bak`; if that is missing or empty too, start from the empty state. Unlike the
//! broker, the result says which of these happened. [`persist`] follows 4.9's `MixAll.string2File`
//! (`.tmp`, then `.bak`, then rename), adding fsyncs.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::files::ConfigFile;
use crate::format::error::{ConfigLoadError, Error, Unusable};
use crate::format::failpoint::failpoint;

/// Where a loaded config came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// The main file.
    Main,
    /// The `.bak` file, because the main file was `reason`: `missing`, `empty`,
    /// `unreadable: <io error>` or `unparsable: at byte N: <what was expected>`.
    Backup { reason: String },
    /// Neither file exists: the empty state, as the broker starts.
    Missing,
    /// No usable content: the main file is empty, unparsable or missing, and the `.bak` is
    /// missing or empty. The broker starts from the empty state here too. `reason` says both.
    Empty { reason: String },
}

/// A config value with its origin; `path` is the file read (the main path if none was).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded<T> {
    pub value: T,
    pub source: ConfigSource,
    pub path: PathBuf,
}

/// `<path><suffix>`, e.g. `topics.json.bak`.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

/// Largest config file read. The broker reads a config file whole into one Java string; ours
/// are kilobytes to a few megabytes. A larger file is not read: it counts as unusable, and the
/// `.bak` is tried, as the broker does when loading fails.
pub const MAX_CONFIG_BYTES: u64 = 64 << 20;

/// The bytes of a config file: `Ok(None)` when it does not exist; a file that is not regular or
/// is over [`MAX_CONFIG_BYTES`] is an error and is not read.
pub fn read_config_bytes(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    match crate::format::entry::read_bounded(path, MAX_CONFIG_BYTES) {
        Ok(b) => Ok(Some(b)),
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// One file read and parsed as `T`, or why its contents are not used.
fn attempt<T: ConfigFile>(path: &Path) -> Result<T, Unusable> {
    let bytes = match read_config_bytes(path) {
        Ok(Some(b)) => b,
        Ok(None) => return Err(Unusable::Missing),
        Err(e) => return Err(Unusable::Unreadable(Box::new(e))),
    };
    // The broker treats a zero-length file as empty. A file of only whitespace (or a BOM) makes
    // the broker keep an empty state without trying the .bak; we count it as empty and use the
    // .bak, which still holds the previous generation.
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    if body
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    {
        return Err(Unusable::Empty);
    }
    T::from_bytes(&bytes).map_err(Unusable::Unparsable)
}

/// Loads `config_dir/T::FILE_NAME` with the broker's `.bak` fallback.
pub fn load<T: ConfigFile>(config_dir: &Path) -> Result<Loaded<T>, Error> {
    load_file(&config_dir.join(T::FILE_NAME))
}

/// Loads `main` (falling back to `main.bak`) as `T`. An unreadable or unparsable `.bak` after an
/// unusable main file is an error naming both files (the broker refuses to start then).
pub fn load_file<T: ConfigFile>(main: &Path) -> Result<Loaded<T>, Error> {
    let main_state = match attempt::<T>(main) {
        Ok(value) => {
            return Ok(Loaded {
                value,
                source: ConfigSource::Main,
                path: main.to_path_buf(),
            })
        }
        Err(state) => state,
    };
    let bak = with_suffix(main, ".bak");
    let empty = |main_state: Unusable, bak_state: Unusable| {
        let source = match (&main_state, &bak_state) {
            (Unusable::Missing, Unusable::Missing) => ConfigSource::Missing,
            _ => ConfigSource::Empty {
                reason: format!(
                    "{}: {main_state}; {}: {bak_state}",
                    main.display(),
                    bak.display()
                ),
            },
        };
        Ok(Loaded {
            value: T::empty(),
            source,
            path: main.to_path_buf(),
        })
    };
    match attempt::<T>(&bak) {
        Ok(value) => Ok(Loaded {
            value,
            source: ConfigSource::Backup {
                reason: main_state.to_string(),
            },
            path: bak,
        }),
        Err(bak_state @ (Unusable::Missing | Unusable::Empty)) => empty(main_state, bak_state),
        Err(Unusable::Unreadable(e)) => Err(ConfigLoadError::BackupUnusable {
            path: main.to_path_buf(),
            main: main_state,
            backup: e,
        }
        .into()),
        Err(Unusable::Unparsable(e)) => Err(ConfigLoadError::BackupUnusable {
            path: main.to_path_buf(),
            main: main_state,
            backup: Box::new(e.in_file(&bak, 0)),
        }
        .into()),
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let mut f = File::create(path).map_err(|e| Error::io(path, e))?;
    f.write_all(bytes).map_err(|e| Error::io(path, e))?;
    f.sync_all().map_err(|e| Error::io(path, e))
}

/// Writes `text` to `path` as 4.9's `MixAll.string2File` does, made durable: write `<file>.tmp` and
/// fsync it; copy the current `<file>` (if any) to `<file>.bak` and fsync that; rename `.tmp` over
/// `<file>`; fsync the directory.
pub fn persist(path: &Path, text: &str) -> Result<(), Error> {
    persist_bytes(path, text.as_bytes())
}

/// [`persist`] for any bytes (the timer checkpoint is binary).
pub fn persist_bytes(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let tmp = with_suffix(path, ".tmp");
    let bak = with_suffix(path, ".bak");
    write_synced(&tmp, bytes)?;
    failpoint("config-tmp-written");
    if let Some(old) = read_config_bytes(path)? {
        write_synced(&bak, &old)?;
    }
    failpoint("config-bak-written");
    fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
    failpoint("config-renamed");
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

/// Copy `main` (when it is a file) to `<main>.before-<what>-<stamp>` and fsync the copy; the
/// copy is created new, so it never writes through whatever might already be at that name.
/// Returns the copy's path, `None` when there was no file.
pub fn dated_copy(main: &Path, what: &str, stamp: &str) -> Result<Option<PathBuf>, Error> {
    if !crate::format::entry::probe(main).kind.is_file() {
        return Ok(None);
    }
    let b = with_suffix(main, &format!(".before-{what}-{stamp}"));
    let mut from = crate::format::entry::open_regular(main)?;
    let mut to = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&b)
        .map_err(|e| Error::io(&b, e))?;
    std::io::copy(&mut from, &mut to).map_err(|e| Error::io(&b, e))?;
    to.sync_all().map_err(|e| Error::io(&b, e))?;
    Ok(Some(b))
}

/// Writes `value` to `config_dir/T::FILE_NAME` with [`persist`]; returns the path.
pub fn save<T: ConfigFile>(config_dir: &Path, value: &T) -> Result<PathBuf, Error> {
    let path = config_dir.join(T::FILE_NAME);
    persist(&path, &value.to_pretty())?;
    Ok(path)
}

//! The CLI's file I/O guards: inputs are read only when they are regular files under the size
//! limit (a FIFO would block, `/dev/zero` would fill memory), and outputs are written under a
//! temporary name in the same directory and renamed when complete, so an interrupted or failed
//! run (SIGINT, SIGTERM, a full disk) leaves no file under the final name. SIGINT and SIGTERM
//! only raise a flag, which a sweep polls between chunks of points.

// This module is where the CLI touches the file system for these files.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Read `path` if it is a regular file of at most [`tessera::spec::MAX_FILE_BYTES`]: the kind and
/// size are checked before the file is opened, and the read stops past the limit (a file that
/// grows meanwhile). `Err` is the reason, without the path.
pub fn read_input(path: &str) -> Result<Vec<u8>, String> {
    let io = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        _ => e.to_string(),
    };
    let m = std::fs::metadata(path).map_err(io)?;
    tessera::spec::admit(m.is_file(), m.is_dir(), m.len())?;
    let f = std::fs::File::open(path).map_err(io)?;
    let limit = tessera::spec::MAX_FILE_BYTES;
    let mut bytes = Vec::with_capacity(m.len() as usize);
    f.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(tessera::spec::admit(true, false, bytes.len() as u64)
            .err()
            .unwrap_or_default());
    }
    Ok(bytes)
}

/// [`read_input`] as UTF-8 text.
pub fn read_text(path: &str) -> Result<String, String> {
    String::from_utf8(read_input(path)?).map_err(|e| {
        format!(
            "not UTF-8 text (byte {} is invalid)",
            e.utf8_error().valid_up_to()
        )
    })
}

/// An output being written under a temporary name (`.NAME.tmp-PID` beside it). [`commit`]
/// renames it to its final name; dropped without that (an error, an interrupt), the temporary
/// file is removed. An existing destination that is not a regular file (`/dev/stdout`, a FIFO)
/// is written directly, and a symbolic link is followed to the file it names.
///
/// [`commit`]: Pending::commit
pub struct Pending {
    /// The temporary file and the final name; `None` when writing the destination directly.
    names: Option<(PathBuf, PathBuf)>,
}

impl Pending {
    /// Create the temporary file for `dest`.
    pub fn create(dest: &Path) -> std::io::Result<(Pending, std::fs::File)> {
        if let Ok(m) = std::fs::metadata(dest) {
            if !m.is_file() && !m.is_dir() {
                let f = std::fs::OpenOptions::new().write(true).open(dest)?;
                return Ok((Pending { names: None }, f));
            }
        }
        let dest = std::fs::canonicalize(dest).unwrap_or_else(|_| dest.to_path_buf());
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "out".into());
        let tmp = dest.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
        let f = std::fs::File::create(&tmp)?;
        Ok((
            Pending {
                names: Some((tmp, dest)),
            },
            f,
        ))
    }

    /// The file is complete: give it its final name.
    pub fn commit(mut self) -> std::io::Result<()> {
        if let Some((tmp, dest)) = &self.names {
            std::fs::rename(tmp, dest)?;
        }
        self.names = None;
        Ok(())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some((tmp, _)) = &self.names {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Write `bytes` to `dest` completely or not at all (a temporary file, synced, then renamed).
pub fn write_atomic(dest: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let (p, mut f) = Pending::create(dest)?;
    f.write_all(bytes)?;
    if p.names.is_some() {
        f.sync_all()?;
    }
    drop(f);
    p.commit()
}

/// SIGINT and SIGTERM as a flag the work polls (Unix; elsewhere they end the process as usual,
/// and an output's temporary file may stay behind, never a file under its final name).
pub mod interrupt {
    use std::sync::atomic::{AtomicI32, Ordering};

    /// The signal received, 0 for none.
    static RAISED: AtomicI32 = AtomicI32::new(0);

    #[cfg(unix)]
    extern "C" fn on_signal(sig: libc::c_int) {
        RAISED.store(sig, Ordering::SeqCst);
        // A second one ends the process at once. Both calls are async-signal-safe.
        // SAFETY: `signal` with SIG_DFL is async-signal-safe (POSIX).
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
        }
    }

    /// Catch SIGINT and SIGTERM from now on; ignore SIGXFSZ, so that a file-size limit fails
    /// the write (and the output is removed) as a full disk does, rather than killing the process.
    pub fn install() {
        #[cfg(unix)]
        for sig in [libc::SIGINT, libc::SIGTERM] {
            let handler: extern "C" fn(libc::c_int) = on_signal;
            // SAFETY: the handler only stores to an atomic and resets its own disposition.
            unsafe {
                libc::signal(sig, handler as libc::sighandler_t);
            }
        }
        // SAFETY: ignoring a signal installs no code.
        #[cfg(unix)]
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        }
    }

    /// The signal received since [`install`], if any.
    pub fn raised() -> Option<i32> {
        match RAISED.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }
}

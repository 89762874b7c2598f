//! What the integration tests share: the shipped files read from the crate root, whatever the
//! working directory (`mod common;` in a test file).

#![allow(clippy::disallowed_methods, clippy::disallowed_types, dead_code)] // a test helper: may use the disk

use tessera::spec::Fs;

/// The crate's files, by path relative to its root.
pub struct CrateFs;

impl Fs for CrateFs {
    fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
            .map_err(|e| e.to_string())
    }
}

//! Feed arbitrary bytes to `tessera::check::check_file` as a file, plus a second file that
//! `Use("...")` references may name, on an in-memory file system. Nothing may panic, and every
//! diagnostic must render.
//!
//! Input layout: `MAIN [SEP WHICH OTHER]`: the bytes up to the first `SEP` are the checked file;
//! after it, one byte picks the name the second file is stored under and the rest is its content.
//! Seeds: `fuzz/seed.sh` writes the shipped and bad files in this layout.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;
use tessera::model::system::MemFs;

const SEP: &[u8] = b"\0--\0";
const MAIN: &str = "arch/system.ron";
/// Names the second file may have: the part the shipped system refers to, another part, the
/// checked file itself (so it is replaced), and a sibling.
const NAMES: [&str; 4] = [
    "arch/parts/b200-gb200.ron",
    "arch/parts/part.ron",
    "arch/system.ron",
    "arch/other.ron",
];

fn split(data: &[u8]) -> (&[u8], Option<(usize, &[u8])>) {
    match data.windows(SEP.len()).position(|w| w == SEP) {
        Some(i) => {
            let rest = &data[i + SEP.len()..];
            let which = rest.first().copied().unwrap_or(0) as usize % NAMES.len();
            (&data[..i], Some((which, rest.get(1..).unwrap_or(&[]))))
        }
        None => (data, None),
    }
}

fuzz_target!(|data: &[u8]| {
    let (main, other) = split(data);
    let mut files = BTreeMap::new();
    if let Some((which, bytes)) = other {
        files.insert(NAMES[which].to_string(), bytes.to_vec());
    }
    files.insert(MAIN.to_string(), main.to_vec());
    let fs = MemFs(files);
    let (loaded, diags) = tessera::check::check_file(MAIN, &fs);
    for d in &diags {
        assert!(!d.message.is_empty(), "empty message: {d:?}");
        let _ = d.render(loaded.text_of(&d.file));
    }
});

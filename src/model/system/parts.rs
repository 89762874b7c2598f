//! Reading parts on their own: checking a `Device`, `Die` or `Node` file without a system, and the
//! in-memory file map and source lookup that tests and diagnostics use.

use super::device::{lower_device, lower_die};
use super::lower::lower_node;
use super::types::unset_energy_warnings;
use crate::diag::{Diagnostic, Path};
use crate::model::Ctx;
use crate::spec::arch::*;
use crate::spec::{Files, Fs, Resolver};

/// A file map for tests and in-memory use.
#[derive(Default)]
pub struct MemFs(pub std::collections::BTreeMap<String, Vec<u8>>);

impl Fs for MemFs {
    fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        self.0
            .get(path)
            .cloned()
            .ok_or_else(|| "no such file".to_string())
    }
}

/// Files of a system, for rendering diagnostics.
pub fn source_of<'a>(files: &'a Files, name: &str) -> Option<&'a str> {
    files.text_of(name)
}

/// Check a part file (`Device`, `Die` or `Node`) on its own.
pub fn check_part(name: &str, kind: &str, fs: &dyn Fs) -> (Files, Vec<Diagnostic>) {
    let (files, diags, _) = check_part_fitted(name, kind, fs);
    (files, diags)
}

/// [`check_part`], with a device's name and its fitted figures' sources (for the copied-fit
/// warning of `tessera check`).
#[allow(clippy::type_complexity)]
pub fn check_part_fitted(
    name: &str,
    kind: &str,
    fs: &dyn Fs,
) -> (
    Files,
    Vec<Diagnostic>,
    Option<(String, Vec<crate::model::FittedSource>)>,
) {
    let mut r = Resolver::new(fs);
    let mut diags = Vec::new();
    let mut fitted = None;
    match kind {
        "Device" => {
            if let Some((d, id)) = r.load_file::<DeviceRef>(name) {
                if let Some(dev) = r.resolve(d, id, Path::root()) {
                    let die = r.resolve(dev.spec.die.clone(), dev.file, dev.path.field("die"));
                    diags.append(&mut r.diagnostics);
                    if let Some(die) = die {
                        let mut cx = Ctx::new(&r.files, id);
                        let lowered = lower_device(&mut cx, &dev, &die);
                        diags.extend(cx.diags);
                        // energy figures left unset, where the device itself is sound
                        let failed = diags
                            .iter()
                            .any(|d| d.severity == crate::diag::Severity::Error);
                        if let (Some(l), false) = (lowered, failed) {
                            diags.extend(unset_energy_warnings(&r.files, &l.unset_energy));
                        }
                        fitted = Some((dev.spec.name.clone(), cx.fitted_sources));
                    }
                }
            }
        }
        "Die" => {
            if let Some((d, id)) = r.load_file::<DieRef>(name) {
                if let Some(die) = r.resolve(d, id, Path::root()) {
                    diags.append(&mut r.diagnostics);
                    let mut cx = Ctx::new(&r.files, id);
                    lower_die(&mut cx, &die);
                    diags.extend(cx.diags);
                }
            }
        }
        _ => {
            if let Some((d, id)) = r.load_file::<NodeRef>(name) {
                if let Some(n) = r.resolve(d, id, Path::root()) {
                    diags.append(&mut r.diagnostics);
                    let mut cx = Ctx::new(&r.files, id);
                    lower_node(&mut cx, &n);
                    diags.extend(cx.diags);
                }
            }
        }
    }
    diags.append(&mut r.diagnostics);
    (r.files, diags, fitted)
}

/// A part file's lowered figures, for the catalogue (`tessera list`).
pub enum Part {
    Device(Box<super::types::Device>),
    Node(Box<super::types::Node>),
}

/// Lower a `Device` or `Node` part file on its own (`None` for a die, another kind, or a part
/// with errors: `tessera check` says why).
pub fn load_part(name: &str, kind: &str, fs: &dyn Fs) -> Option<Part> {
    let mut r = Resolver::new(fs);
    let part = match kind {
        "Device" => {
            let (d, id) = r.load_file::<DeviceRef>(name)?;
            let dev = r.resolve(d, id, Path::root())?;
            let die = r.resolve(dev.spec.die.clone(), dev.file, dev.path.field("die"))?;
            let mut cx = Ctx::new(&r.files, id);
            let lowered = lower_device(&mut cx, &dev, &die);
            (!has_error(&cx.diags))
                .then_some(())
                .and(lowered)
                .map(|d| Part::Device(Box::new(d)))
        }
        "Node" => {
            let (n, id) = r.load_file::<NodeRef>(name)?;
            let n = r.resolve(n, id, Path::root())?;
            let mut cx = Ctx::new(&r.files, id);
            let lowered = lower_node(&mut cx, &n);
            (!has_error(&cx.diags))
                .then_some(())
                .and(lowered)
                .map(|n| Part::Node(Box::new(n)))
        }
        _ => None,
    };
    if has_error(&r.diagnostics) {
        return None;
    }
    part
}

fn has_error(diags: &[Diagnostic]) -> bool {
    diags
        .iter()
        .any(|d| d.severity == crate::diag::Severity::Error)
}

//! `--set PATH=VALUE`: one-off overrides of a single run by the sweep's paths (`tessera sweep
//! --list-paths`): a figure of the architecture as its file writes it (`device.tdp=400 W`), the
//! workload (`workload.global_batch=1024`), the mapping (`mapping.tp=8`) and the device count
//! (`devices=64`, `nodes=512`), and the system's economics (`cost.energy_price=0.12 $/kWh`,
//! priced after the estimate: `model::system::cost`). One path vocabulary with the sweep (`paths::classify`); the CLI
//! (estimate, compare, scale, roofline) and the Python package apply overrides through here.

use super::values;
use crate::diag::Diagnostic;
use crate::engine::paths::{self, PathKind};
use crate::engine::MappingChoice;
use crate::model::system::System;
use crate::model::workload::Workload;

/// The overrides as written: each `PATH=VALUE` split (`None` for one that is not).
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    items: Vec<(String, Option<(String, String)>)>,
}

fn set_error(arg: &str, msg: String, hint: Option<String>) -> Diagnostic {
    Diagnostic::error(&format!("--set {arg}"), None, msg).with_hint(hint)
}

/// `mapping.<field>=VALUE`: parsed, held to the bound a mapping file holds the field to
/// (`values::mapping`), and set on the given mapping.
fn set_mapping_field(
    field: &'static str,
    p: &str,
    v: &str,
    choice: &mut MappingChoice,
) -> Result<(), (String, Option<String>)> {
    let val = paths::mapping_value(field, v).map_err(|(m, h)| (format!("`{p}`: {m}"), h))?;
    values::mapping(field, &val)?;
    match choice {
        MappingChoice::Auto(_) => Err((
            "`mapping.*` sets a given mapping; `--mapping auto` tries every mapping".into(),
            Some("drop `--mapping auto` to set the workload's published mapping, or name a mapping file".into()),
        )),
        MappingChoice::Given(plan) => {
            paths::set_mapping(plan, field, &val);
            Ok(())
        }
    }
}

impl Overrides {
    /// Split each `PATH=VALUE` (a malformed one is reported when applied, with the others).
    pub fn parse(args: &[String]) -> Overrides {
        let items = args
            .iter()
            .map(|s| {
                let pv = s
                    .split_once('=')
                    .map(|(p, v)| (p.trim().to_string(), v.trim().to_string()))
                    .filter(|(p, v)| !p.is_empty() && !v.is_empty());
                (s.clone(), pv)
            })
            .collect();
        Overrides { items }
    }

    /// Overrides from (path, value) pairs, as a keyword-argument front end gives them.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Overrides {
        Overrides::parse(
            &pairs
                .into_iter()
                .map(|(p, v)| format!("{p}={v}"))
                .collect::<Vec<_>>(),
        )
    }

    /// Apply to one run; every error at once, each naming its `--set` with a hint (empty when
    /// all applied). What did apply stays applied: callers stop on any error.
    pub fn apply(
        &self,
        sys: &mut System,
        w: &mut Workload,
        choice: &mut MappingChoice,
        devices: &mut Option<u64>,
    ) -> Vec<Diagnostic> {
        let mut diags = Vec::new();
        let base = sys.clone();
        let mut rederive = false;
        let mut mapped: Vec<&'static str> = Vec::new();
        let mut full_set: Option<&String> = None;
        for (arg, pv) in &self.items {
            let Some((p, v)) = pv else {
                diags.push(set_error(
                    arg,
                    format!("`{arg}` is not `PATH=VALUE`"),
                    Some("write e.g. `--set workload.global_batch=1024` or `--set \"device.tdp=400 W\"`".into()),
                ));
                continue;
            };
            let (p, v) = (p.as_str(), v.as_str());
            // the system's economics: priced after the estimate, never a machine figure
            if let Some(field) = p.strip_prefix("cost.") {
                if let Err((m, h)) =
                    crate::model::system::cost::set_field(&mut sys.economics, field, v)
                {
                    diags.push(set_error(arg, m, h));
                }
                continue;
            }
            let kind = match paths::classify(p, &base) {
                Ok(k) => k,
                Err((m, h)) => {
                    diags.push(set_error(arg, m, h));
                    continue;
                }
            };
            match kind {
                PathKind::Devices { per } => match v.parse::<u64>() {
                    Ok(n) => match values::devices(p, n) {
                        Ok(n) => *devices = Some(n.saturating_mul(per)),
                        Err((m, h)) => diags.push(set_error(arg, m, h)),
                    },
                    _ => diags.push(set_error(
                        arg,
                        format!("`{p}` takes a whole number of at least 1, not `{v}`"),
                        None,
                    )),
                },
                PathKind::Mapping(field) => match set_mapping_field(field, p, v, choice) {
                    Ok(()) => mapped.push(field),
                    Err((m, h)) => diags.push(set_error(arg, m, h)),
                },
                PathKind::Workload(field) => {
                    if let Err((m, h)) = paths::set_workload(w, field, v) {
                        diags.push(set_error(arg, m, h));
                    }
                }
                PathKind::Machine(knob) => {
                    let val = match crate::units::parse(v, knob.dimension) {
                        Ok(q) => q.value,
                        Err(e) => {
                            diags.push(set_error(arg, format!("`{p}`: {}", e.message), e.hint));
                            continue;
                        }
                    };
                    // the bound the architecture file holds this figure to
                    let val = match values::machine(p, &knob, v, val) {
                        Ok(x) => x,
                        Err((m, h)) => {
                            diags.push(set_error(arg, m, h));
                            continue;
                        }
                    };
                    if paths::edit_system(sys, p, val).is_none() {
                        diags.push(set_error(
                            arg,
                            format!("`{p}` names the machine vector, not a figure of the architecture file"),
                            Some("`--set` edits the architecture as its file writes it: `device.memory.<level>.bandwidth`, `device.peak.<precision>`, `device.tdp`, `scale_up.bandwidth`, …".into()),
                        ));
                        continue;
                    }
                    rederive |= knob.derive && knob.device_energy.is_none();
                    if p == "device.full_clock_power" {
                        full_set = Some(arg);
                    }
                }
            }
        }
        // held to what the file holds it to: the silicon draws at least its static power
        if let Some(arg) = full_set {
            let d = &sys.device;
            if d.rated_tdp < d.idle_power {
                diags.push(set_error(
                    arg,
                    format!(
                        "`device.full_clock_power` ({}) is below the device's idle power ({})",
                        crate::units::fmt_si(d.rated_tdp, "W"),
                        crate::units::fmt_si(d.idle_power, "W")
                    ),
                    Some("it is what the silicon draws running flat out at full clock: its static power and the dynamic power of the work".into()),
                ));
            }
        }
        if rederive {
            // energy per FLOP the loader derived from TDP moves with what it derives from
            let r = crate::engine::machine::energy_rules(&base);
            paths::derive_energy(sys, r.rederive);
        }
        if let MappingChoice::Given(plan) = choice {
            paths::free_dp(plan, &mapped);
        }
        diags
    }
}

//! Goodput at scale: what failures, checkpoints and stragglers make of a training run's
//! failure-free time to train. A job of `n` devices on `n / node` nodes is interrupted at the sum
//! of its components' rates (`model::reliability`); it checkpoints its state (weights and
//! optimizer state, from the workload) to the system's storage every `τ` of training, and after
//! each interruption restarts and reads the last checkpoint back, losing the work since.
//!
//! With failures a Poisson process of mean time between failures `M`, a checkpoint taking `δ`
//! and a restart `R` (the fixed restart plus the read), the expected wall time to do `T` of
//! training (Daly, "A higher order estimate of the optimum checkpoint interval for restart
//! dumps", FGCS 22 (2006), eq. 13; interruptions may strike during restarts and checkpoints):
//!
//! ```text
//! W(τ) = M · e^(R/M) · (e^((τ+δ)/M) − 1) · T / τ
//! ```
//!
//! Goodput is `T₀ / W`, `T₀` the failure-free time to train and `T = T₀ (1 + s)` with a stated
//! straggler slowdown `s`. The interval `auto` is the exact minimiser of `W` (the root of
//! `(1 − u)·e^(u + δ/M) = 1`, `u = τ/M`); Young's first-order interval `√(2δM)` is reported
//! beside it and comes within a fraction of a percent of it where `δ ≪ M`.

use crate::model::reliability::{GoodputOptions, Interval};
use crate::model::system::System;
use crate::model::workload::{Model, Task, Workload};
use crate::spec::reliability::Per;
use serde::Serialize;

/// A training estimate's goodput (SI; `--format json` contract keys).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Goodput {
    /// Useful (failure-free) training time over expected wall time, in (0, 1].
    pub fraction: f64,
    /// Expected wall time to the training target with failures, checkpoints and stragglers
    /// (null without a target).
    pub expected_time_to_train_s: Option<f64>,
    /// The estimate's throughput × `fraction`.
    pub effective_throughput_per_s: f64,
    /// Training time between checkpoints (null: no checkpoints, failures left out).
    pub checkpoint_interval_s: Option<f64>,
    /// The interval is the one that minimises the expected time (`auto`).
    pub checkpoint_interval_auto: bool,
    /// Young's first-order optimum √(2 δ M) (null without failures).
    pub young_daly_interval_s: Option<f64>,
    /// The job's mean time between interruptions (null: failures left out).
    pub mtbf_s: Option<f64>,
    /// Interruptions expected over the run (null without a target or without failures).
    pub expected_interruptions: Option<f64>,
    /// Bytes of one checkpoint: the weights and the optimizer state of the whole model.
    pub checkpoint_bytes: f64,
    pub checkpoint_write_s: f64,
    pub checkpoint_read_s: f64,
    /// Fixed restart time after an interruption, before the checkpoint is read.
    pub restart_s: f64,
    pub straggler_slowdown: f64,
    pub failures_included: bool,
    /// The reliability figures used (their file's name).
    pub reliability: String,
    /// The job's interruption rate by component class.
    pub failure_classes: Vec<ClassRate>,
}

/// One component class's share of the job's interruptions.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClassRate {
    pub class: String,
    pub per: Per,
    /// Components of that kind the job runs on.
    pub components: f64,
    /// Interruptions per second over the job.
    pub rate_per_s: f64,
}

/// The figures one goodput needs, in SI: everything `assess` reads off the system, workload and
/// estimate, so the law can be checked apart from them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Inputs {
    /// Interruptions per second over the job (0: none).
    pub rate_per_s: f64,
    pub write_s: f64,
    /// Restart and checkpoint read together.
    pub restart_s: f64,
    pub straggler: f64,
    pub interval: Interval,
}

/// Expected wall time per second of failure-free training at checkpoint interval `tau` (the
/// factor `W / T₀`). `tau` = ∞ (no checkpoints) is only finite without failures.
pub fn wall_factor(i: &Inputs, tau: f64) -> f64 {
    let slow = 1.0 + i.straggler;
    if i.rate_per_s <= 0.0 {
        let ckpt = if tau.is_finite() {
            i.write_s / tau
        } else {
            0.0
        };
        return slow * (1.0 + ckpt);
    }
    let m = 1.0 / i.rate_per_s;
    slow * m * (i.restart_s / m).exp() * ((tau + i.write_s) / m).exp_m1() / tau
}

/// The interval that minimises [`wall_factor`] (∞ without failures, where no checkpoint pays).
pub fn optimal_interval(rate_per_s: f64, write_s: f64) -> f64 {
    if rate_per_s <= 0.0 {
        return f64::INFINITY;
    }
    let m = 1.0 / rate_per_s;
    let d = write_s / m;
    // h(u) = (1 − u) e^(u + d) − 1 falls from e^d − 1 ≥ 0 at u = 0 to −1 at u = 1.
    let h = |u: f64| (1.0 - u) * (u + d).exp() - 1.0;
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if h(mid) > 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    // a zero-time checkpoint: checkpoint continuously (the smallest positive interval)
    (0.5 * (lo + hi) * m).max(f64::MIN_POSITIVE)
}

/// The interval in effect and whether it is the optimum.
pub fn interval_of(i: &Inputs) -> (f64, bool) {
    match i.interval {
        Interval::Auto => (optimal_interval(i.rate_per_s, i.write_s), true),
        Interval::Every(t) => (t, false),
    }
}

/// Bytes of a checkpoint of `w`'s training state: every weight at its stored precision and the
/// optimizer state of every trained parameter (the adapters alone under LoRA), as the training
/// lowering counts them per device (`engine::lower::training::memory`), for the whole model.
/// `None` for serving and for op graphs (whose parameters the file does not give).
pub fn checkpoint_bytes(w: &Workload) -> Option<f64> {
    let Task::Training(tr) = &w.task else {
        return None;
    };
    let (params, trained) = match &w.model {
        Model::Transformer(t) => {
            let p = t.params();
            let trained = match tr.lora {
                Some(l) => (t.layers * l.adapted_per_layer * 2 * l.rank * t.hidden) as f64,
                None => p,
            };
            (p, trained)
        }
        Model::Cnn(c) => {
            let p: f64 = c.layers.iter().map(|l| l.params()).sum();
            (p, p)
        }
        Model::Graph(_) => return None,
    };
    Some(params * tr.weights.bytes() + trained * tr.optimizer_bytes)
}

/// The goodput of a feasible training estimate of `w` on `devices` of `sys`: `None` where the
/// system states no reliability or storage, or the task is not training.
pub fn assess(
    sys: &System,
    w: &Workload,
    devices: u64,
    time_to_train_s: Option<f64>,
    throughput_per_s: f64,
) -> Option<Goodput> {
    let rel = sys.reliability.as_ref()?;
    let store = sys.storage.as_ref()?;
    let bytes = checkpoint_bytes(w)?;
    let opts: GoodputOptions = sys.goodput;
    let nodes = (devices as f64 / sys.node.devices.max(1) as f64).ceil();
    let classes: Vec<ClassRate> = rel
        .classes
        .iter()
        .map(|c| {
            let components = match c.per {
                Per::Device => devices as f64,
                Per::Node => nodes,
            };
            ClassRate {
                class: c.class.clone(),
                per: c.per,
                components,
                rate_per_s: c.rate_per_s * components,
            }
        })
        .collect();
    let rate: f64 = if opts.no_failures {
        0.0
    } else {
        classes.iter().map(|c| c.rate_per_s).sum()
    };
    let (write_s, read_s) = (bytes / store.write_bandwidth, bytes / store.read_bandwidth);
    let i = Inputs {
        rate_per_s: rate,
        write_s,
        restart_s: rel.restart_s + read_s,
        straggler: opts.straggler,
        interval: opts.interval,
    };
    let (tau, auto) = interval_of(&i);
    let factor = wall_factor(&i, tau);
    let failures = rate > 0.0;
    let wall = time_to_train_s.map(|t| t * factor);
    Some(Goodput {
        fraction: 1.0 / factor,
        expected_time_to_train_s: wall,
        effective_throughput_per_s: throughput_per_s / factor,
        checkpoint_interval_s: tau.is_finite().then_some(tau),
        checkpoint_interval_auto: auto,
        young_daly_interval_s: failures.then(|| (2.0 * write_s / rate).sqrt()),
        mtbf_s: failures.then(|| 1.0 / rate),
        expected_interruptions: wall.filter(|_| failures).map(|w| w * rate),
        checkpoint_bytes: bytes,
        checkpoint_write_s: write_s,
        checkpoint_read_s: read_s,
        restart_s: rel.restart_s,
        straggler_slowdown: opts.straggler,
        failures_included: !opts.no_failures,
        reliability: rel.name.clone(),
        failure_classes: classes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(rate: f64, write: f64, restart: f64) -> Inputs {
        Inputs {
            rate_per_s: rate,
            write_s: write,
            restart_s: restart,
            straggler: 0.0,
            interval: Interval::Auto,
        }
    }

    /// Hand-checked: M = 3 h, δ = 60 s, R = 600 s, τ = 1800 s. W/T = M e^(R/M) (e^((τ+δ)/M) − 1)/τ
    /// = 10800 · e^(0.055556) · (e^(0.172222) − 1) / 1800 = 6 · 1.057123 · 0.187935
    /// = 1.19207.
    #[test]
    fn wall_factor_by_hand() {
        let i = inputs(1.0 / 10800.0, 60.0, 600.0);
        let f = wall_factor(&i, 1800.0);
        assert!((f - 1.19207).abs() < 2e-5, "{f}");
    }

    /// Without failures a checkpoint every τ costs δ/τ, and `auto` takes none.
    #[test]
    fn no_failures_costs_only_checkpoints() {
        let i = inputs(0.0, 60.0, 600.0);
        assert_eq!(wall_factor(&i, 600.0), 1.1);
        assert_eq!(optimal_interval(0.0, 60.0), f64::INFINITY);
        assert_eq!(wall_factor(&i, f64::INFINITY), 1.0);
    }

    /// The optimum is below Young's √(2δM) and close to it when δ ≪ M (Daly 2006, eq. 37:
    /// √(2δM)·[1 + ⅓√(δ/2M) + δ/18M] − δ).
    #[test]
    fn optimum_against_daly_series() {
        let (m, d) = (36_000.0, 30.0);
        let t = optimal_interval(1.0 / m, d);
        let young = (2.0 * d * m).sqrt();
        let daly = young * (1.0 + (d / (2.0 * m)).sqrt() / 3.0 + d / (18.0 * m)) - d;
        assert!((t - daly).abs() / daly < 1e-3, "{t} vs Daly {daly}");
        assert!((t - young).abs() / young < 0.05, "{t} vs Young {young}");
    }
}

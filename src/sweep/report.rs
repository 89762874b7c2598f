//! What a sweep reports: the summary (counts, the best K points, the Pareto front), which is also
//! the shard format `tessera sweep merge` joins, and the per-point rows (CSV, JSON Lines).

use super::metric::Metric;
use super::outcome::Outcome;
use super::plan::{Constraints, Plan, Skipped};
use super::space::Sampling;
use crate::engine::reason::point as reason;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

pub const FORMAT: &str = "tessera-sweep-summary";

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AxisInfo {
    pub path: String,
    /// SI unit of its values.
    pub unit: String,
}

/// A slice of the sweep's points: indices `start..end`, shard `index` of `count`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Shard {
    pub start: u64,
    pub end: u64,
    pub index: u64,
    pub count: u64,
}

/// One reported point.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PointReport {
    pub index: u64,
    /// Index into the summary's `programs`.
    pub program: usize,
    /// Axis values, in the order of the summary's `axes` (SI).
    pub values: Vec<f64>,
    pub step_time_s: f64,
    pub throughput_per_s: f64,
    pub average_power_w: f64,
    pub energy_per_step_j: f64,
    pub energy_per_unit_j: f64,
    pub mfu: f64,
    pub memory_headroom_bytes: f64,
}

impl PointReport {
    pub fn new(plan: &Plan, o: &Outcome) -> Self {
        PointReport {
            index: o.index,
            program: plan.locate(o.index).0,
            values: plan.values(o.index),
            step_time_s: o.step_time,
            throughput_per_s: o.throughput,
            average_power_w: o.power,
            energy_per_step_j: o.energy_per_step,
            energy_per_unit_j: o.energy_per_unit,
            mfu: o.mfu,
            memory_headroom_bytes: o.headroom,
        }
    }
    pub fn outcome(&self) -> Outcome {
        Outcome {
            index: self.index,
            reason: reason::OK,
            step_time: self.step_time_s,
            energy_per_step: self.energy_per_step_j,
            power: self.average_power_w,
            throughput: self.throughput_per_s,
            mfu: self.mfu,
            headroom: self.memory_headroom_bytes,
            energy_per_unit: self.energy_per_unit_j,
        }
    }
}

/// The result of a sweep or of one shard of it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub format: String,
    pub version: u32,
    pub name: String,
    pub system: String,
    pub workload: String,
    /// Identifies the sweep; shards merge only with equal fingerprints.
    pub fingerprint: String,
    /// Unit of throughput (tokens, samples).
    pub unit: String,
    pub sampling: Sampling,
    pub points_per_program: u64,
    pub total_points: u64,
    pub axes: Vec<AxisInfo>,
    /// Program labels (device count and mapping), by program index.
    pub programs: Vec<String>,
    pub skipped_programs: Vec<Skipped>,
    pub constraints: Constraints,
    pub objective: Metric,
    pub pareto: [Metric; 2],
    pub top_k: usize,
    /// The slices evaluated (one for a single run or shard; all of them after a merge).
    pub shards: Vec<Shard>,
    /// How the points were evaluated; for the GPU, the adapter.
    pub backend: String,
    pub evaluated: u64,
    pub feasible: u64,
    /// Infeasible points by reason.
    pub infeasible: BTreeMap<String, u64>,
    /// The same counts by stable reason code (`memory`, `no_compute`, `power_budget`,
    /// `memory_floor`); summaries written before it existed read as empty.
    #[serde(default)]
    pub infeasible_by_code: BTreeMap<String, u64>,
    /// The best `top_k` feasible points by `objective`, best first.
    pub top: Vec<PointReport>,
    /// The Pareto front of the two `pareto` metrics, best in the first first.
    pub front: Vec<PointReport>,
    /// Feasible points at a fixed stride of the index (for a picture of the whole cloud), when
    /// asked for; the same stride in every shard.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sample: Vec<PointReport>,
    /// Whether `shards` cover every point of the sweep (false for one shard of several, and for
    /// a merge of an incomplete set under `--allow-partial`).
    #[serde(default)]
    pub complete: bool,
    /// The point ranges no shard covers, in order (empty when `complete`).
    #[serde(default)]
    pub missing: Vec<PointRange>,
    /// FNV-1a (64 bits, hex) of this summary's canonical JSON with `checksum` empty: `sweep merge`
    /// refuses a summary whose figures were edited after it was written. It detects changes, it
    /// does not authenticate (anyone can recompute it).
    #[serde(default)]
    pub checksum: String,
}

/// Point indices `start..end`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PointRange {
    pub start: u64,
    pub end: u64,
}

/// FNV-1a, 64 bits: the hash of sweep fingerprints and summary checksums.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Counts of points by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts(pub [u64; reason::COUNT]);

impl Counts {
    #[inline]
    pub fn add(&mut self, r: u8) {
        self.0[(r as usize).min(reason::COUNT - 1)] += 1;
    }
    pub fn merge(&mut self, o: &Counts) {
        for (a, b) in self.0.iter_mut().zip(o.0) {
            *a += b;
        }
    }
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

impl Summary {
    /// The summary of a run over `shard` of `plan`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        plan: &Plan,
        shard: Shard,
        backend: String,
        counts: &Counts,
        top: Vec<Outcome>,
        front: Vec<Outcome>,
        top_k: usize,
    ) -> Summary {
        let mut infeasible = BTreeMap::new();
        let mut infeasible_by_code = BTreeMap::new();
        for (r, &n) in counts.0.iter().enumerate().skip(1) {
            if n > 0 {
                infeasible.insert(reason::name(r as u8).to_string(), n);
                infeasible_by_code.insert(reason::code(r as u8).to_string(), n);
            }
        }
        Summary {
            format: FORMAT.into(),
            version: 1,
            name: plan.name.clone(),
            system: plan.system.clone(),
            workload: plan.workload.clone(),
            fingerprint: plan.fingerprint.clone(),
            unit: plan.unit.into(),
            sampling: plan.space.sampling,
            points_per_program: plan.space.points,
            total_points: plan.total(),
            axes: plan
                .space
                .axes
                .iter()
                .map(|a| AxisInfo {
                    path: a.path.clone(),
                    unit: a.dimension.si_symbol().into(),
                })
                .collect(),
            programs: plan.programs.iter().map(|p| p.label.clone()).collect(),
            skipped_programs: plan.skipped.clone(),
            constraints: plan.constraints,
            objective: plan.objective,
            pareto: [plan.pareto.0, plan.pareto.1],
            top_k,
            shards: vec![shard],
            backend,
            evaluated: counts.total(),
            feasible: counts.0[0],
            infeasible,
            infeasible_by_code,
            top: top.iter().map(|o| PointReport::new(plan, o)).collect(),
            front: front.iter().map(|o| PointReport::new(plan, o)).collect(),
            sample: Vec::new(),
            complete: false,
            missing: Vec::new(),
            checksum: String::new(),
        }
    }

    /// The point ranges of `0..total_points` that no shard covers, in order.
    pub fn gaps(&self) -> Vec<PointRange> {
        let mut s = self.shards.clone();
        s.sort();
        let mut out = Vec::new();
        let mut at = 0;
        for x in &s {
            if x.start > at {
                out.push(PointRange {
                    start: at,
                    end: x.start,
                });
            }
            at = at.max(x.end);
        }
        if at < self.total_points {
            out.push(PointRange {
                start: at,
                end: self.total_points,
            });
        }
        out
    }

    /// The checksum of this summary as it stands (its `checksum` field aside).
    pub fn compute_checksum(&self) -> String {
        let mut c = self.clone();
        c.checksum = String::new();
        let text = serde_json::to_string(&c).unwrap_or_default();
        format!("{:016x}", fnv1a(text.as_bytes()))
    }

    /// Settle the derived fields once the figures are final: `complete`, `missing` and the
    /// `checksum` over everything else.
    pub fn seal(&mut self) {
        self.missing = self.gaps();
        self.complete = self.missing.is_empty();
        self.checksum = self.compute_checksum();
    }
}

/// Per-point output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowFormat {
    Csv,
    Jsonl,
}

impl RowFormat {
    /// From a file name: `.csv` or `.jsonl` / `.ndjson`.
    pub fn from_path(p: &str) -> Option<RowFormat> {
        let l = p.to_ascii_lowercase();
        if l.ends_with(".csv") {
            Some(RowFormat::Csv)
        } else if l.ends_with(".jsonl") || l.ends_with(".ndjson") || l.ends_with(".json") {
            Some(RowFormat::Jsonl)
        } else {
            None
        }
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

const FIGURES: [&str; 7] = [
    "step_time_s",
    "throughput_per_s",
    "average_power_w",
    "energy_per_step_j",
    "energy_per_unit_j",
    "mfu",
    "memory_headroom_bytes",
];

/// The CSV header (JSON Lines has none).
pub fn header(plan: &Plan, f: RowFormat) -> String {
    if f == RowFormat::Jsonl {
        return String::new();
    }
    let mut h = vec!["index".to_string(), "devices".into(), "mapping".into()];
    for (i, a) in plan.space.axes.iter().enumerate() {
        let u = plan.axis_unit(i);
        h.push(csv_field(&if u.is_empty() {
            a.path.clone()
        } else {
            format!("{} ({u})", a.path)
        }));
    }
    h.push("feasible".into());
    h.push("reason".into());
    h.extend(FIGURES.iter().map(|s| s.to_string()));
    h.join(",") + "\n"
}

/// Append the row of `o` (whose axis values are `vals`) to `out`.
pub fn row(plan: &Plan, o: &Outcome, vals: &[f64], f: RowFormat, out: &mut String) {
    let prog = &plan.programs[plan.locate(o.index).0];
    let figs = [
        o.step_time,
        o.throughput,
        o.power,
        o.energy_per_step,
        o.energy_per_unit,
        o.mfu,
        o.headroom,
    ];
    let feasible = o.feasible();
    match f {
        RowFormat::Csv => {
            let _ = write!(
                out,
                "{},{},{}",
                o.index,
                prog.devices,
                csv_field(&prog.label)
            );
            for v in vals {
                let _ = write!(out, ",{v:e}");
            }
            let _ = write!(
                out,
                ",{},{}",
                feasible,
                if feasible { "" } else { reason::name(o.reason) }
            );
            for (i, v) in figs.iter().enumerate() {
                // Figures of an infeasible point mean nothing, except how far memory is short.
                if feasible || (i == 6 && v.is_finite()) {
                    let _ = write!(out, ",{v:e}");
                } else {
                    out.push(',');
                }
            }
            out.push('\n');
        }
        RowFormat::Jsonl => {
            let _ = write!(
                out,
                "{{\"index\":{},\"devices\":{},\"mapping\":{},\"values\":{{",
                o.index,
                prog.devices,
                serde_json::to_string(&prog.label).unwrap_or_default()
            );
            for (i, (a, v)) in plan.space.axes.iter().zip(vals).enumerate() {
                let _ = write!(
                    out,
                    "{}{}:{v:e}",
                    if i > 0 { "," } else { "" },
                    serde_json::to_string(&a.path).unwrap_or_default()
                );
            }
            let _ = write!(out, "}},\"feasible\":{feasible}");
            if feasible {
                out.push_str(",\"reason\":null");
            } else {
                let _ = write!(out, ",\"reason\":\"{}\"", reason::name(o.reason));
            }
            for (i, (n, v)) in FIGURES.iter().zip(figs).enumerate() {
                if (feasible || i == 6) && v.is_finite() {
                    let _ = write!(out, ",\"{n}\":{v:e}");
                } else {
                    let _ = write!(out, ",\"{n}\":null");
                }
            }
            out.push_str("}\n");
        }
    }
}

/// Points of one stretch of the sweep, column by column, in index order: what the Arrow and
/// Parquet writers (and the Python package) turn into record batches.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Columns {
    pub index: Vec<u64>,
    /// Index into the plan's programs (its device count and mapping label).
    pub program: Vec<u32>,
    /// One column per axis of the space, in the plan's order (SI).
    pub values: Vec<Vec<f64>>,
    /// The point code (`reason::OK` when feasible).
    pub reason: Vec<u8>,
    /// The figures in [`FIGURE_NAMES`] order; those of an infeasible point mean nothing except
    /// how far memory is short (`memory_headroom_bytes`).
    pub figures: [Vec<f64>; 7],
}

/// Names of the per-point figures, as in the CSV header and JSON Lines keys.
pub const FIGURE_NAMES: [&str; 7] = FIGURES;

impl Columns {
    pub fn new(axes: usize) -> Self {
        Columns {
            values: vec![Vec::new(); axes],
            ..Default::default()
        }
    }
    pub fn len(&self) -> usize {
        self.index.len()
    }
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
    /// Append the point `o`, whose axis values are `vals`.
    #[inline]
    pub fn push(&mut self, plan: &Plan, o: &Outcome, vals: &[f64]) {
        self.index.push(o.index);
        self.program.push(plan.locate(o.index).0 as u32);
        for (c, v) in self.values.iter_mut().zip(vals) {
            c.push(*v);
        }
        self.reason.push(o.reason);
        let figs = [
            o.step_time,
            o.throughput,
            o.power,
            o.energy_per_step,
            o.energy_per_unit,
            o.mfu,
            o.headroom,
        ];
        for (c, v) in self.figures.iter_mut().zip(figs) {
            c.push(v);
        }
    }
    /// Append `other`'s points after this one's.
    pub fn append(&mut self, mut other: Columns) {
        self.index.append(&mut other.index);
        self.program.append(&mut other.program);
        for (a, b) in self.values.iter_mut().zip(other.values.iter_mut()) {
            a.append(b);
        }
        self.reason.append(&mut other.reason);
        for (a, b) in self.figures.iter_mut().zip(other.figures.iter_mut()) {
            a.append(b);
        }
    }
}

/// Where a sweep's points go column by column (an Arrow IPC or Parquet writer, a table being
/// built in memory). Called with consecutive stretches of points, in index order.
pub trait ColumnSink {
    fn write(&mut self, cols: Columns) -> std::io::Result<()>;
}

/// Where a sweep's points go, if anywhere.
pub enum Rows<'a> {
    /// Text rows (CSV with its header, or JSON Lines).
    Text(&'a mut dyn std::io::Write, RowFormat),
    Columns(&'a mut dyn ColumnSink),
}

/// What kind of buffer each task fills (Copy, so tasks can share it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowKind {
    Text(RowFormat),
    Columns,
}

/// One task's share of the points, in the form its [`Rows`] takes.
pub(crate) enum RowBuf {
    None,
    Text(RowFormat, String),
    Columns(Box<Columns>),
}

impl RowBuf {
    pub(crate) fn new(kind: Option<RowKind>, axes: usize) -> RowBuf {
        match kind {
            None => RowBuf::None,
            Some(RowKind::Text(f)) => RowBuf::Text(f, String::new()),
            Some(RowKind::Columns) => RowBuf::Columns(Box::new(Columns::new(axes))),
        }
    }
    #[inline]
    pub(crate) fn push(&mut self, plan: &Plan, o: &Outcome, vals: &[f64]) {
        match self {
            RowBuf::None => {}
            RowBuf::Text(f, s) => row(plan, o, vals, *f, s),
            RowBuf::Columns(c) => c.push(plan, o, vals),
        }
    }
}

impl Rows<'_> {
    pub(crate) fn kind(&self) -> RowKind {
        match self {
            Rows::Text(_, f) => RowKind::Text(*f),
            Rows::Columns(_) => RowKind::Columns,
        }
    }
    /// The CSV header, where there is one.
    pub(crate) fn start(&mut self, plan: &Plan) -> std::io::Result<()> {
        match self {
            Rows::Text(w, f) => w.write_all(header(plan, *f).as_bytes()),
            Rows::Columns(_) => Ok(()),
        }
    }
    /// Write the tasks' buffers of one stretch, in order (columns as one stretch).
    pub(crate) fn write(&mut self, bufs: impl IntoIterator<Item = RowBuf>) -> std::io::Result<()> {
        let mut cols: Option<Columns> = None;
        for b in bufs {
            match (b, &mut *self) {
                (RowBuf::Text(_, s), Rows::Text(w, _)) => w.write_all(s.as_bytes())?,
                (RowBuf::Columns(c), Rows::Columns(_)) => match cols.as_mut() {
                    Some(all) => all.append(*c),
                    None => cols = Some(*c),
                },
                _ => {}
            }
        }
        match (cols, self) {
            (Some(c), Rows::Columns(sink)) if !c.is_empty() => sink.write(c),
            _ => Ok(()),
        }
    }
}

/// `--format csv`: the best points and the Pareto front as data, one row each (`set`: `top` or
/// `front`, `rank` from 1), the axes by their paths with the SI unit (as `--out x.csv` names
/// them), the figures by their JSON keys.
pub fn csv_points(s: &Summary) -> String {
    use serde_json::Value;
    let record = |set: &str, rank: usize, p: &PointReport| {
        let mut m = serde_json::Map::new();
        m.insert("set".into(), Value::from(set));
        m.insert("rank".into(), Value::from(rank as u64));
        m.insert("index".into(), Value::from(p.index));
        m.insert(
            "mapping".into(),
            Value::from(s.programs.get(p.program).cloned().unwrap_or_default()),
        );
        for (a, v) in s.axes.iter().zip(&p.values) {
            let name = if a.unit.is_empty() {
                a.path.clone()
            } else {
                format!("{} ({})", a.path, a.unit)
            };
            m.insert(name, Value::from(*v));
        }
        for (k, v) in [
            ("step_time_s", p.step_time_s),
            ("throughput_per_s", p.throughput_per_s),
            ("average_power_w", p.average_power_w),
            ("energy_per_step_j", p.energy_per_step_j),
            ("energy_per_unit_j", p.energy_per_unit_j),
            ("mfu", p.mfu),
            ("memory_headroom_bytes", p.memory_headroom_bytes),
        ] {
            m.insert(k.into(), Value::from(v));
        }
        Value::Object(m)
    };
    let records: Vec<Value> = (s
        .top
        .iter()
        .enumerate()
        .map(|(i, p)| record("top", i + 1, p)))
    .chain(
        s.front
            .iter()
            .enumerate()
            .map(|(i, p)| record("front", i + 1, p)),
    )
    .collect();
    crate::report::records::csv_of(&records)
}

//! `tessera sweep FILE | --arch A --workload W --vary PATH=VALUES...`: evaluate a design space on
//! all CPU cores or the GPU; print the best points and the Pareto front; optionally stream every
//! point to CSV or JSON Lines. `tessera sweep merge FILES...` joins shard summaries.

use super::output::{interrupt, read_text, write_atomic, Pending};
use super::sweep_print::print;
use super::{report, DiskFs, Exit, Format};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::sync::OnceLock;
use tessera::report::render::{Csv, Rendered};
use tessera::spec::Files;
use tessera::sweep::expr::split_cli;
use tessera::sweep::overrides::{parse_shard, Naming, Overrides};
use tessera::sweep::plan::{self, Inputs};
use tessera::sweep::report::{PointReport, RowFormat, Rows, Summary};
use tessera::sweep::run::{self, Backend, Options};
use tessera::units::fmt_si;

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// A sweep file (see architectures/sweeps/); options below override or extend it.
    pub file: Option<String>,
    /// Base architecture (without a sweep file).
    #[arg(long)]
    pub arch: Option<String>,
    /// Workload (without a sweep file).
    #[arg(long)]
    pub workload: Option<String>,
    /// `published` (default), `auto` (every legal mapping) or a mapping file.
    #[arg(long)]
    pub mapping: Option<String>,
    /// A parameter and its values, repeatable: `device.memory.HBM3e.bandwidth=2 TB/s..8 TB/s step
    /// 0.5 TB/s`, `scale_up.bandwidth=[0.9 TB/s, 1.8 TB/s]`, `devices=512,1024`, `mapping.tp=4,8`.
    #[arg(long = "vary", value_name = "PATH=VALUES", value_parser = vary_arg)]
    pub vary: Vec<String>,
    /// grid, random or lhs (Latin hypercube).
    #[arg(long)]
    pub sampling: Option<String>,
    /// Machine points per program for random and lhs sampling.
    #[arg(long)]
    pub points: Option<u64>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Largest facility power of the devices used, e.g. "5 MW".
    #[arg(long, value_name = "POWER")]
    pub power_budget: Option<String>,
    /// Memory each device must have free after placement, e.g. "10 GB".
    #[arg(long, value_name = "BYTES")]
    pub memory_floor: Option<String>,
    #[arg(long, value_parser = super::common::choice::<Backend>(), default_value = "auto")]
    pub backend: Backend,
    /// How many best points to report.
    #[arg(long)]
    pub top: Option<usize>,
    /// Metric the best points are ranked by: throughput, step_time, power, energy,
    /// perf_per_watt, mfu.
    #[arg(long)]
    pub objective: Option<String>,
    /// The two metrics of the Pareto front, e.g. `throughput,power`.
    #[arg(long, value_name = "A,B")]
    pub pareto: Option<String>,
    /// Stream every point to a `.csv`, `.jsonl`, `.arrow` (Arrow IPC) or `.parquet` file.
    #[arg(long, value_name = "FILE")]
    pub out: Option<String>,
    /// Evaluate shard I of N (a contiguous slice of the points), e.g. `--shard 0/4`.
    #[arg(long, value_name = "I/N", value_parser = shard_arg)]
    pub shard: Option<(u64, u64)>,
    /// Also write the JSON summary (what `sweep merge` joins) to this file.
    #[arg(long, value_name = "FILE")]
    pub summary: Option<String>,
    /// Also draw the sweep as an SVG picture: the two Pareto metrics, a sample of the points, the
    /// front and the best point.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
    /// Size of the picture in pixels.
    #[arg(long, value_name = "WIDTHxHEIGHT", default_value = "800x500")]
    pub plot_size: tessera::plot::Size,
    /// List every parameter path of the architecture and exit.
    #[arg(long)]
    pub list_paths: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Join the JSON summaries of shards (`--shard I/N --summary FILE`) into one result.
    Merge(MergeArgs),
}

#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// Shard summaries.
    #[arg(required = true)]
    pub files: Vec<String>,
    #[arg(long)]
    pub top: Option<usize>,
    #[arg(long, value_name = "FILE")]
    pub summary: Option<String>,
    /// Join a set of shards that does not cover the sweep; the result says `complete: false`
    /// and lists the `missing` point ranges (without it, a gap is refused).
    #[arg(long)]
    pub allow_partial: bool,
    /// Draw the merged sweep as an SVG picture (from the shards' samples, if they kept any).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
    #[arg(long, value_name = "WIDTHxHEIGHT", default_value = "800x500")]
    pub plot_size: tessera::plot::Size,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

fn err(msg: impl std::fmt::Display) -> Exit {
    let _ = writeln!(std::io::stderr(), "error: {msg}");
    Exit::Failed
}

/// Arguments that do not make a sweep: a usage error (exit 2), as clap reports its own.
fn usage(msg: impl std::fmt::Display) -> Exit {
    let _ = writeln!(
        std::io::stderr(),
        "error: {msg}\n\nFor more information, try 'tessera sweep --help'."
    );
    Exit::Usage
}

/// `--shard I/N` (clap: a malformed one is a usage error).
fn shard_arg(s: &str) -> Result<(u64, u64), String> {
    parse_shard(s).ok_or_else(|| "expected I/N with 0 ≤ I < N, e.g. `--shard 0/4`".into())
}

/// `--vary PATH=VALUES` (clap: one without `=` or a path is a usage error).
fn vary_arg(s: &str) -> Result<String, String> {
    match split_cli(s) {
        Some((path, _)) if !path.is_empty() => Ok(s.to_string()),
        _ => Err("expected PATH=VALUES, e.g. `device.tdp=1000 W..1400 W step 100 W`".into()),
    }
}

/// The progress bar on stderr (none when stderr is not a terminal, or for a quick sweep).
struct Bar {
    enabled: bool,
    bar: OnceLock<ProgressBar>,
}

impl run::Progress for Bar {
    fn start(&self, total: u64, backend: &str) {
        let show = self.enabled && total >= 200_000;
        let b = if show {
            let b = ProgressBar::new(total);
            if let Ok(s) = ProgressStyle::with_template(
                "{spinner} {msg} [{bar:30}] {human_pos}/{human_len} points, {per_sec}, eta {eta}",
            ) {
                b.set_style(s.progress_chars("=> "));
            }
            b.set_message(backend.to_string());
            b
        } else {
            ProgressBar::hidden()
        };
        let _ = self.bar.set(b);
    }
    fn advance(&self, n: u64) {
        if let Some(b) = self.bar.get() {
            b.inc(n);
        }
    }
    fn note(&self, m: &str) {
        let print = || {
            let _ = writeln!(std::io::stderr(), "note: {m}");
        };
        match self.bar.get() {
            Some(b) => b.suspend(print),
            None => print(),
        }
    }
    fn cancelled(&self) -> bool {
        interrupt::raised().is_some()
    }
}

fn inputs(a: &Args) -> Result<(Inputs, Files), Exit> {
    let (mut inp, files) = match &a.file {
        Some(f) => {
            let l = plan::read_file(f, &DiskFs);
            if report(&l.diagnostics, &l.files) {
                return Err(Exit::Failed);
            }
            match l.value {
                Some(v) => (v, l.files),
                None => return Err(Exit::Failed),
            }
        }
        None => (Inputs::default(), Files::default()),
    };
    let o = Overrides {
        arch: a.arch.clone(),
        workload: a.workload.clone(),
        mapping: a.mapping.clone(),
        vary: a.vary.clone(),
        sampling: a.sampling.clone(),
        points: a.points,
        seed: a.seed,
        power_budget: a.power_budget.clone(),
        memory_floor: a.memory_floor.clone(),
        objective: a.objective.clone(),
        pareto: a
            .pareto
            .as_ref()
            .map(|x| x.split(',').map(str::to_string).collect()),
        top: a.top,
    };
    o.apply(&mut inp, Naming::Cli).map_err(usage)?;
    Ok((inp, files))
}

// Streams every point to --out and writes the --summary file.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
/// Whether `path` (given as `flag`) can be written: its directory exists and it is not itself a
/// directory.
fn writable(flag: &str, path: &str) -> Result<(), String> {
    let p = std::path::Path::new(path);
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    if !dir.is_dir() {
        return Err(format!(
            "{flag} {path}: the directory {} does not exist\nhint: create it first, or name a file in an existing directory",
            dir.display()
        ));
    }
    if p.is_dir() {
        return Err(format!("{flag} {path}: is a directory, not a file"));
    }
    Ok(())
}

pub fn run(a: Args, out: &mut dyn Write) -> std::io::Result<Exit> {
    if let Some(Command::Merge(m)) = a.command {
        return merge(m, out);
    }
    let (inp, files) = match inputs(&a) {
        Ok(x) => x,
        Err(e) => return Ok(e),
    };
    if a.list_paths {
        let Some((arch, _)) = &inp.arch else {
            return Ok(usage("--list-paths needs `--arch FILE` or a sweep file"));
        };
        let l = tessera::model::system::load_system(arch, &DiskFs);
        if report(&l.diagnostics, &l.files) {
            return Ok(Exit::Failed);
        }
        let Some(sys) = l.value else {
            return Ok(Exit::Failed);
        };
        let listed = tessera::sweep::paths::listed(&sys);
        // JSON lists each path with its unit and value; the other formats a path a line
        let mut doc = Rendered::new(&listed, Csv::AsTable);
        for l in &listed {
            doc.text(l.path.clone());
        }
        doc.write(a.format.into(), out)?;
        return Ok(Exit::Ok);
    }
    if inp.axes.is_empty() && a.file.is_none() && inp.arch.is_none() {
        return Ok(usage(
            "nothing to sweep: give a sweep file, or `--arch FILE --workload FILE --vary PATH=VALUES`",
        ));
    }
    // every output path is checked before any work starts: a sweep that could not write its
    // result would otherwise run to the end and lose it
    for (flag, path) in [
        ("--summary", a.summary.as_deref()),
        ("--plot", a.plot.as_deref().and_then(|p| p.to_str())),
    ] {
        if let Some(p) = path {
            if let Err(e) = writable(flag, p) {
                return Ok(err(e));
            }
        }
    }
    let l = plan::build(&inp, &DiskFs, files, Vec::new());
    if report(&l.diagnostics, &l.files) {
        return Ok(Exit::Failed);
    }
    let Some(plan) = l.value else {
        return Ok(Exit::Failed);
    };
    let mut opts = Options::new(&plan);
    opts.backend = a.backend;
    if a.plot.is_some() {
        opts.sample = tessera::plot::sweep::MAX_POINTS as u64;
    }
    opts.shard = a.shard;
    // An interrupt stops the sweep between chunks and removes its unfinished outputs.
    if a.out.is_some() || a.summary.is_some() || a.plot.is_some() {
        interrupt::install();
    }
    let mut out_file = match &a.out {
        Some(p) => match OutFile::create(p, &plan) {
            Ok(f) => Some(f),
            Err(e) => return Ok(err(e)),
        },
        None => None,
    };
    let bar = Bar {
        enabled: !a.quiet && std::io::stderr().is_terminal(),
        bar: OnceLock::new(),
    };
    let started = std::time::Instant::now();
    let rows = out_file.as_mut().map(OutFile::rows);
    let summary = match run::run_with(&plan, &opts, rows, &bar) {
        Ok(s) => s,
        Err(e @ run::Error::Interrupted { .. }) => {
            drop(out_file);
            let _ = writeln!(
                std::io::stderr(),
                "error: {e}: no output written{}",
                a.out
                    .as_deref()
                    .map(|p| format!(" (`{p}` was not created)"))
                    .unwrap_or_default()
            );
            return Ok(Exit::Signal(interrupt::raised().unwrap_or(2)));
        }
        Err(run::Error::Io(e)) => {
            return Ok(err(format!(
                "cannot write `{}`: {e}; no output written",
                a.out.as_deref().unwrap_or_default()
            )))
        }
        Err(e) => return Ok(err(e)),
    };
    if let Some(b) = bar.bar.get() {
        b.finish_and_clear();
    }
    if let Some(f) = out_file {
        if let Err(e) = f.finish(&summary) {
            return Ok(err(format!(
                "cannot write `{}`: {e}",
                a.out.as_deref().unwrap_or_default()
            )));
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let _ = writeln!(
        std::io::stderr(),
        "note: {} points in {:.2} s ({}) on {}",
        summary.evaluated,
        secs,
        rate(summary.evaluated as f64 / secs.max(1e-9)),
        summary.backend
    );
    deliver(
        &summary,
        a.summary.as_deref(),
        a.plot.as_deref(),
        a.plot_size,
        a.format,
        out,
    )
}

/// A sweep's summary where it was asked for: the `--summary` JSON file, the `--plot` picture
/// (each written whole or not at all), and the report on `out`.
fn deliver(
    s: &Summary,
    summary: Option<&str>,
    picture: Option<&std::path::Path>,
    size: tessera::plot::Size,
    format: Format,
    out: &mut dyn Write,
) -> std::io::Result<Exit> {
    if let Some(p) = summary {
        let text = serde_json::to_string_pretty(s).expect("summary serialises");
        if let Err(e) = write_atomic(std::path::Path::new(p), (text + "\n").as_bytes()) {
            return Ok(err(format!("cannot write `{p}`: {e}")));
        }
    }
    if let Some(p) = picture {
        if let Err(e) = plot(s, p, size) {
            return Ok(err(format!("cannot write `{}`: {e}", p.display())));
        }
    }
    print(s, format, out)?;
    Ok(Exit::Ok)
}

// The --out file's writer.
#[allow(clippy::disallowed_types)]
type FileWriter = std::io::BufWriter<std::fs::File>;

/// The `--out` file, written under a temporary name until [`OutFile::finish`] renames it.
struct OutFile {
    rows: OutRows,
    pending: Pending,
}

/// Text rows, or (feature `arrow`) an Arrow IPC or Parquet file.
enum OutRows {
    Text(FileWriter, RowFormat),
    #[cfg(feature = "arrow")]
    Columns(tessera::sweep::arrow::FileSink<FileWriter>),
}

impl OutFile {
    fn create(p: &str, plan: &tessera::sweep::Plan) -> Result<OutFile, String> {
        let open = || {
            Pending::create(std::path::Path::new(p))
                .map(|(pending, f)| (pending, std::io::BufWriter::with_capacity(1 << 20, f)))
                .map_err(|e| format!("cannot create `{p}`: {e}"))
        };
        if let Some(fmt) = RowFormat::from_path(p) {
            let (pending, w) = open()?;
            return Ok(OutFile {
                rows: OutRows::Text(w, fmt),
                pending,
            });
        }
        #[cfg(feature = "arrow")]
        if let Some(fmt) = tessera::sweep::arrow::FileFormat::from_path(p) {
            let (pending, w) = open()?;
            return tessera::sweep::arrow::FileSink::new(plan, fmt, w)
                .map(|s| OutFile {
                    rows: OutRows::Columns(s),
                    pending,
                })
                .map_err(|e| format!("cannot write `{p}`: {e}"));
        }
        let _ = plan;
        Err(format!(
            "--out `{p}`: name a `.csv`, `.jsonl`{} file",
            if cfg!(feature = "arrow") {
                ", `.arrow` or `.parquet`"
            } else {
                " (this tessera was built without the `arrow` feature, so no `.arrow` or `.parquet`)"
            }
        ))
    }
    fn rows(&mut self) -> Rows<'_> {
        match &mut self.rows {
            OutRows::Text(w, f) => Rows::Text(w, *f),
            #[cfg(feature = "arrow")]
            OutRows::Columns(s) => Rows::Columns(s),
        }
    }
    /// Complete the file (the Arrow or Parquet footer with the summary), sync it and give it its
    /// final name; on an error the temporary file is removed.
    fn finish(self, summary: &Summary) -> std::io::Result<()> {
        let _ = summary;
        let w = match self.rows {
            OutRows::Text(w, _) => w,
            #[cfg(feature = "arrow")]
            OutRows::Columns(s) => s.finish(Some(summary))?,
        };
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        drop(f);
        self.pending.commit()
    }
}

fn metric_title(m: tessera::sweep::Metric, unit: &str) -> String {
    use tessera::sweep::Metric as M;
    let u = match m {
        M::Throughput => format!("{unit}/s"),
        M::StepTime => "s".into(),
        M::Power => "W".into(),
        M::Energy => format!("J/{}", unit.trim_end_matches('s')),
        M::PerfPerWatt => format!("{unit}/s/W"),
        M::Mfu => "fraction".into(),
    };
    format!("{} ({u})", m.name().replace('_', " "))
}

/// The sweep's picture: its sample, front and top on the two Pareto metrics.
fn plot(s: &Summary, path: &std::path::Path, size: tessera::plot::Size) -> std::io::Result<()> {
    use tessera::plot::sweep::{Dim, SweepPlot, SweepPoint};
    let [ma, mb] = s.pareto;
    let mut all: Vec<&PointReport> = s.sample.iter().chain(&s.front).chain(&s.top).collect();
    all.sort_by_key(|p| p.index);
    all.dedup_by_key(|p| p.index);
    let label = |p: &PointReport| {
        let mut parts: Vec<String> = s
            .axes
            .iter()
            .zip(&p.values)
            .map(|(a, v)| {
                // the last two segments name it well enough: `HBM3e.bandwidth`, `peak.fp8`
                let segs: Vec<&str> = a.path.rsplitn(3, '.').take(2).collect();
                let name: String = segs.into_iter().rev().collect::<Vec<_>>().join(".");
                if a.unit.is_empty() {
                    format!("{name} {v:.3}")
                } else {
                    format!("{name} {}", fmt_si(*v, &a.unit))
                }
            })
            .collect();
        if s.programs.len() > 1 {
            parts.push(s.programs.get(p.program).cloned().unwrap_or_default());
        }
        parts.join(", ")
    };
    let pos = |i: u64| all.iter().position(|p| p.index == i);
    let picture = SweepPlot {
        title: s.name.clone(),
        x: Dim {
            title: metric_title(ma, &s.unit),
            higher_is_better: ma.higher_is_better(),
            log: false,
        },
        y: Dim {
            title: metric_title(mb, &s.unit),
            higher_is_better: mb.higher_is_better(),
            log: false,
        },
        points: all
            .iter()
            .map(|p| SweepPoint {
                label: label(p),
                x: ma.value(&p.outcome()),
                y: mb.value(&p.outcome()),
            })
            .collect(),
        front: Some(s.front.iter().filter_map(|p| pos(p.index)).collect()),
        best: s
            .top
            .first()
            .and_then(|p| pos(p.index))
            .map(|i| (i, s.objective.name().to_string())),
    };
    let mut buf = Vec::new();
    tessera::plot::sweep::sweep(&picture, size, &mut buf)?;
    write_atomic(path, &buf)?;
    let _ = writeln!(std::io::stderr(), "wrote {}", path.display());
    Ok(())
}

fn rate(r: f64) -> String {
    format!("{} points/s", fmt_si(r, "").trim_end())
}

/// Reads the shard summaries, verifies and joins them, and writes the merged one.
fn merge(m: MergeArgs, out: &mut dyn Write) -> std::io::Result<Exit> {
    if let Some(Err(e)) = m.summary.as_deref().map(|p| writable("--summary", p)) {
        return Ok(err(e));
    }
    if let Some(Err(e)) = m
        .plot
        .as_deref()
        .and_then(|p| p.to_str())
        .map(|p| writable("--plot", p))
    {
        return Ok(err(e));
    }
    let mut parts = Vec::new();
    for f in &m.files {
        let text = match read_text(f) {
            Ok(t) => t,
            Err(e) => return Ok(err(format!("cannot read `{f}`: {e}"))),
        };
        match serde_json::from_str::<Summary>(&text) {
            Ok(s) => parts.push((f.clone(), s)),
            Err(e) => {
                return Ok(err(format!(
                    "{f}:{}:{}: not a sweep summary: {e}",
                    e.line(),
                    e.column()
                )))
            }
        }
    }
    let opts = tessera::sweep::merge::MergeOptions {
        top: m.top,
        allow_partial: m.allow_partial,
    };
    let (s, warnings) = match tessera::sweep::merge::merge(parts, opts) {
        Ok(x) => x,
        Err(e) => return Ok(err(e)),
    };
    for w in warnings {
        let _ = writeln!(std::io::stderr(), "warning: {w}");
    }
    deliver(
        &s,
        m.summary.as_deref(),
        m.plot.as_deref(),
        m.plot_size,
        m.format,
        out,
    )
}

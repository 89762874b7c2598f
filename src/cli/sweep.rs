//! `tessera sweep FILE | --arch A --workload W --vary PATH=VALUES...`: evaluate a design space on
//! all CPU cores or the GPU; print the best points and the Pareto front; optionally stream every
//! point to CSV or JSON Lines. `tessera sweep merge FILES...` joins shard summaries.

use super::{report, DiskFs, Exit, Format};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::sync::OnceLock;
use tessera::spec::Files;
use tessera::sweep::expr::split_cli;
use tessera::sweep::overrides::{parse_shard, Naming, Overrides};
use tessera::sweep::plan::{self, Inputs};
use tessera::sweep::report::{PointReport, RowFormat, Rows, Summary};
use tessera::sweep::run::{self, Backend, Options};
use tessera::sweep::space::Sampling;
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
        if a.format == Format::Json {
            writeln!(
                out,
                "{}",
                serde_json::to_string_pretty(&listed).expect("json")
            )?;
        } else {
            for l in listed {
                writeln!(out, "{}", l.path)?;
            }
        }
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

/// A sweep's summary where it was asked for: the `--summary` JSON file, the `--plot` picture,
/// and the report on `out`.
#[allow(clippy::disallowed_methods)] // the CLI writes the files the user named
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
        if let Err(e) = std::fs::write(p, text + "\n") {
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

/// The `--out` file: text rows, or (feature `arrow`) an Arrow IPC or Parquet file.
enum OutFile {
    Text(FileWriter, RowFormat),
    #[cfg(feature = "arrow")]
    Columns(tessera::sweep::arrow::FileSink<FileWriter>),
}

// Creates the --out file.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
impl OutFile {
    fn create(p: &str, plan: &tessera::sweep::Plan) -> Result<OutFile, String> {
        let open = || {
            std::fs::File::create(p)
                .map(|f| std::io::BufWriter::with_capacity(1 << 20, f))
                .map_err(|e| format!("cannot create `{p}`: {e}"))
        };
        if let Some(fmt) = RowFormat::from_path(p) {
            return Ok(OutFile::Text(open()?, fmt));
        }
        #[cfg(feature = "arrow")]
        if let Some(fmt) = tessera::sweep::arrow::FileFormat::from_path(p) {
            return tessera::sweep::arrow::FileSink::new(plan, fmt, open()?)
                .map(OutFile::Columns)
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
        match self {
            OutFile::Text(w, f) => Rows::Text(w, *f),
            #[cfg(feature = "arrow")]
            OutFile::Columns(s) => Rows::Columns(s),
        }
    }
    fn finish(self, summary: &Summary) -> std::io::Result<()> {
        let _ = summary;
        let mut w = match self {
            OutFile::Text(w, _) => w,
            #[cfg(feature = "arrow")]
            OutFile::Columns(s) => s.finish(Some(summary))?,
        };
        w.flush()
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
// Writes the --plot picture.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
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
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(path, buf)?;
    let _ = writeln!(std::io::stderr(), "wrote {}", path.display());
    Ok(())
}

fn rate(r: f64) -> String {
    format!("{} points/s", fmt_si(r, "").trim_end())
}

// Reads the shard summaries it joins and writes the merged one.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
fn merge(m: MergeArgs, out: &mut dyn Write) -> std::io::Result<Exit> {
    let mut parts = Vec::new();
    for f in &m.files {
        let text = match std::fs::read_to_string(f) {
            Ok(t) => t,
            Err(e) => return Ok(err(format!("cannot read `{f}`: {e}"))),
        };
        match serde_json::from_str::<Summary>(&text) {
            Ok(s) => parts.push(s),
            Err(e) => {
                return Ok(err(format!(
                    "{f}:{}:{}: not a sweep summary: {e}",
                    e.line(),
                    e.column()
                )))
            }
        }
    }
    let (s, warnings) = match tessera::sweep::report::merge(parts, m.top) {
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

/// Rows of the Pareto front a table shows.
const FRONT_ROWS: usize = 25;

fn points_table(s: &Summary, pts: &[(usize, &PointReport)]) -> (Vec<String>, Vec<Vec<String>>) {
    let many = s.programs.len() > 1;
    let mut h = vec!["#".to_string()];
    for a in &s.axes {
        h.push(a.path.clone());
    }
    if many {
        h.push("devices, mapping".into());
    }
    for x in [
        "step time",
        "throughput",
        "power",
        "energy per unit",
        "MFU",
        "free memory",
    ] {
        h.push(x.into());
    }
    let rows = pts
        .iter()
        .map(|(i, p)| {
            let mut r = vec![(i + 1).to_string()];
            for (a, v) in s.axes.iter().zip(&p.values) {
                r.push(if a.unit.is_empty() {
                    format!("{v:.4}")
                } else {
                    fmt_si(*v, &a.unit)
                });
            }
            if many {
                r.push(s.programs.get(p.program).cloned().unwrap_or_default());
            }
            r.push(fmt_si(p.step_time_s, "s"));
            r.push(format!(
                "{} {}/s",
                fmt_si(p.throughput_per_s, "").trim_end(),
                s.unit
            ));
            r.push(fmt_si(p.average_power_w, "W"));
            r.push(fmt_si(p.energy_per_unit_j, "J"));
            r.push(format!("{:.1}%", p.mfu * 100.0));
            r.push(fmt_si(p.memory_headroom_bytes, "B"));
            r
        })
        .collect();
    (h, rows)
}

fn print(s: &Summary, format: Format, out: &mut dyn Write) -> std::io::Result<()> {
    if format == Format::Json {
        return writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(s).expect("summary serialises")
        );
    }
    let render = |h: &[String], r: &[Vec<String>]| match format {
        Format::Csv => tessera::report::csv(h, r),
        Format::Markdown => tessera::report::markdown_table(h, r) + "\n",
        _ => tessera::report::table(h, r) + "\n",
    };
    if format == Format::Table || format == Format::Markdown {
        writeln!(out, "sweep: {} ({} on {})", s.name, s.workload, s.system)?;
        let shards = if s.shards.len() == 1 && s.shards[0].count > 1 {
            format!(
                ", shard {}/{} (points {}..{})",
                s.shards[0].index, s.shards[0].count, s.shards[0].start, s.shards[0].end
            )
        } else {
            String::new()
        };
        writeln!(
            out,
            "{} points: {} program(s) × {} machine points ({}){shards}",
            s.total_points,
            s.programs.len(),
            s.points_per_program,
            match s.sampling {
                Sampling::Grid => "grid".to_string(),
                Sampling::Random { seed, .. } => format!("random, seed {seed}"),
                Sampling::LatinHypercube { seed, .. } => format!("Latin hypercube, seed {seed}"),
            }
        )?;
        let inf: Vec<String> = s
            .infeasible
            .iter()
            .map(|(r, n)| format!("{n} {r}"))
            .collect();
        writeln!(
            out,
            "evaluated {}: {} feasible{}",
            s.evaluated,
            s.feasible,
            if inf.is_empty() {
                String::new()
            } else {
                format!("; infeasible: {}", inf.join(", "))
            }
        )?;
        if !s.skipped_programs.is_empty() {
            writeln!(
                out,
                "{} program(s) skipped, e.g. {}: {}",
                s.skipped_programs.len(),
                s.skipped_programs[0].label,
                s.skipped_programs[0].reason
            )?;
        }
        writeln!(out, "\nbest {} by {}:", s.top.len(), s.objective)?;
    }
    let top: Vec<(usize, &PointReport)> = s.top.iter().enumerate().collect();
    let (h, r) = points_table(s, &top);
    write!(out, "{}", render(&h, &r))?;
    if format == Format::Table || format == Format::Markdown {
        writeln!(
            out,
            "\nPareto front, {} vs {} ({} points):",
            s.pareto[0],
            s.pareto[1],
            s.front.len()
        )?;
    } else {
        writeln!(out)?;
    }
    // A long front is summarised in tables by rows spread evenly along it; CSV and JSON carry
    // all of it.
    let n = s.front.len();
    let pick: Vec<(usize, &PointReport)> = if format == Format::Csv || n <= FRONT_ROWS {
        s.front.iter().enumerate().collect()
    } else {
        let mut v: Vec<usize> = (0..FRONT_ROWS)
            .map(|i| i * (n - 1) / (FRONT_ROWS - 1))
            .collect();
        v.dedup();
        v.into_iter().map(|i| (i, &s.front[i])).collect()
    };
    let (h, r) = points_table(s, &pick);
    write!(out, "{}", render(&h, &r))?;
    if pick.len() < n {
        writeln!(
            out,
            "{} of {n} front points shown, spread along it (`--format json` or `--format csv` lists all)",
            pick.len()
        )?;
    }
    Ok(())
}

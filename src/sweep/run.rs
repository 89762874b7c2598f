//! Running a sweep on a backend: the CPU (rayon over all cores, `cpu::eval` in f64) or the GPU
//! (the WGSL kernel in f32, its candidates re-evaluated in f64), streaming points in chunks.

#[cfg(feature = "gpu")]
use super::accumulate::Screen;
use super::accumulate::{Front, TopK};
use super::outcome::Outcome;
use super::plan::Plan;
use super::report::{self, Counts, RowBuf, RowFormat, Rows, Shard, Summary};
use crate::engine::reason::point as reason;
use rayon::prelude::*;
use std::io::Write;

/// Which evaluator runs the points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The GPU for large sweeps on a hardware adapter, else the CPU.
    Auto,
    Cpu,
    Gpu,
}

impl crate::choice::Choice for Backend {
    const ALL: &'static [(&'static str, Self, &'static str)] = &[
        (
            "auto",
            Self::Auto,
            "The GPU for large sweeps on a hardware adapter, else the CPU",
        ),
        ("cpu", Self::Cpu, "Every CPU core (rayon), f64"),
        (
            "gpu",
            Self::Gpu,
            "The wgpu kernel (f32 screening, f64 re-evaluation)",
        ),
    ];
}

/// Relative bound on the difference between the GPU's f32 figures and the CPU's f64 figures
/// (see `tests/it/gpu_parity.rs` for the justification and the measurement).
pub const F32_BOUND: f64 = 1e-4;

/// Points below which `auto` does not start the GPU: at about 1e6 points/s on the CPU's cores a
/// smaller sweep is over before device setup, shader compilation and transfers pay off.
pub const GPU_MIN_POINTS: u64 = 4_000_000;

#[derive(Clone, Debug)]
pub struct Options {
    pub backend: Backend,
    /// Best points to keep.
    pub top: usize,
    /// Evaluate shard `i` of `n` (a contiguous slice of point indices).
    pub shard: Option<(u64, u64)>,
    /// Smallest sweep `auto` sends to the GPU.
    pub gpu_min_points: u64,
    /// Keep about this many points of the whole sweep (every `total / sample`-th index, the
    /// feasible ones) in the summary's `sample`, for plots; 0 for none.
    pub sample: u64,
}

impl Options {
    pub fn new(plan: &Plan) -> Self {
        Options {
            backend: Backend::Auto,
            top: plan.top,
            shard: None,
            gpu_min_points: GPU_MIN_POINTS,
            sample: 0,
        }
    }
}

/// Progress and notes for the caller to show (the library prints nothing).
pub trait Progress: Sync {
    fn start(&self, _total: u64, _backend: &str) {}
    fn advance(&self, _points: u64) {}
    fn note(&self, _message: &str) {}
    /// Whether the caller wants the sweep to stop (an interrupt): polled between chunks of
    /// points, after which the run ends with [`Error::Interrupted`].
    fn cancelled(&self) -> bool {
        false
    }
}

/// No progress reporting.
pub struct Quiet;
impl Progress for Quiet {}

#[derive(Debug)]
pub enum Error {
    Io(std::io::Error),
    Gpu(String),
    Usage(String),
    /// [`Progress::cancelled`] asked the run to stop; `evaluated` points had been evaluated.
    Interrupted {
        evaluated: u64,
    },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::Gpu(m) | Error::Usage(m) => f.write_str(m),
            Error::Interrupted { evaluated } => {
                write!(f, "interrupted after {evaluated} points")
            }
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

/// Point indices of shard `i` of `n`.
pub fn shard_range(total: u64, i: u64, n: u64) -> (u64, u64) {
    let at = |k: u64| (total as u128 * k as u128 / n as u128) as u64;
    (at(i), at(i + 1))
}

/// Run `plan`: every point of its shard, optionally written to `rows` as they are evaluated.
pub fn run(
    plan: &Plan,
    opts: &Options,
    rows: Option<(&mut dyn Write, RowFormat)>,
    progress: &dyn Progress,
) -> Result<Summary, Error> {
    run_with(plan, opts, rows.map(|(w, f)| Rows::Text(w, f)), progress)
}

/// [`run`], with the points going to text rows or to a column sink (Arrow, Parquet).
pub fn run_with(
    plan: &Plan,
    opts: &Options,
    rows: Option<Rows<'_>>,
    progress: &dyn Progress,
) -> Result<Summary, Error> {
    let total = plan.total();
    let (si, sn) = opts.shard.unwrap_or((0, 1));
    if sn == 0 || si >= sn {
        return Err(Error::Usage(format!("shard {si}/{sn}: need 0 ≤ I < N")));
    }
    let (start, end) = shard_range(total, si, sn);
    let shard = Shard {
        start,
        end,
        index: si,
        count: sn,
    };
    let use_gpu = match opts.backend {
        Backend::Cpu => false,
        Backend::Gpu => true,
        Backend::Auto => auto_gpu(end - start, opts, progress),
    };
    let mut rows = rows;
    if let Some(r) = rows.as_mut() {
        r.start(plan)?;
    }
    let (counts, top, front, backend) = if use_gpu {
        gpu(plan, opts, start, end, rows, progress)?
    } else {
        let threads = rayon::current_num_threads();
        let name = format!("cpu ({threads} threads, f64)");
        progress.start(end - start, &name);
        let (c, t, f) = cpu(plan, opts.top, start, end, rows, progress)?;
        (c, t, f, name)
    };
    let mut s = Summary::new(
        plan,
        shard,
        backend,
        &counts,
        top.into_sorted(),
        front.into_sorted(),
        opts.top,
    );
    // A stride of the whole sweep, so shards sample the same points one run would.
    if let Some(stride) = total.checked_div(opts.sample) {
        let stride = stride.max(1);
        let first = start.div_ceil(stride) * stride;
        let idx: Vec<u64> = (first..end).step_by(stride as usize).collect();
        let naxes = plan.space.axes.len();
        let outs: Vec<Outcome> = idx
            .par_iter()
            .map_init(|| vec![0.0; naxes], |v, &i| plan.evaluate(i, v))
            .collect();
        s.sample = outs
            .iter()
            .filter(|o| o.feasible())
            .map(|o| report::PointReport::new(plan, o))
            .collect();
    }
    s.seal();
    Ok(s)
}

#[cfg(feature = "gpu")]
fn auto_gpu(points: u64, opts: &Options, progress: &dyn Progress) -> bool {
    if points < opts.gpu_min_points {
        return false;
    }
    match crate::sweep::gpu::Gpu::shared() {
        Ok(g) if g.is_hardware() => true,
        Ok(g) => {
            progress.note(&format!(
                "the GPU adapter is {}, a software rasteriser slower than the CPU's cores; using the CPU",
                g.describe()
            ));
            false
        }
        Err(e) => {
            progress.note(&format!("{e}; using the CPU"));
            false
        }
    }
}

#[cfg(not(feature = "gpu"))]
fn auto_gpu(_points: u64, _opts: &Options, _progress: &dyn Progress) -> bool {
    false
}

/// One task's share of a chunk.
struct Part {
    counts: Counts,
    top: TopK,
    front: Front,
    rows: RowBuf,
}

const TASK: u64 = 4096;

/// Evaluate `start..end` on all cores.
pub fn cpu(
    plan: &Plan,
    k: usize,
    start: u64,
    end: u64,
    mut rows: Option<Rows<'_>>,
    progress: &dyn Progress,
) -> Result<(Counts, TopK, Front), Error> {
    let fmt = rows.as_ref().map(|r| r.kind());
    // Bounded memory: a chunk's rows are formatted before they are written.
    let chunk: u64 = if fmt.is_some() { 1 << 16 } else { 1 << 20 };
    let mut counts = Counts::default();
    let mut top = TopK::new(k, plan.objective);
    let mut front = Front::new(plan.pareto.0, plan.pareto.1);
    let naxes = plan.space.axes.len();
    let mut at = start;
    while at < end {
        let cend = (at + chunk).min(end);
        let tasks: Vec<(u64, u64)> = (at..cend)
            .step_by(TASK as usize)
            .map(|a| (a, (a + TASK).min(cend)))
            .collect();
        let parts: Vec<Part> = tasks
            .par_iter()
            .map(|&(a, b)| {
                let mut p = Part {
                    counts: Counts::default(),
                    top: TopK::new(k, plan.objective),
                    front: Front::new(plan.pareto.0, plan.pareto.1),
                    rows: RowBuf::new(fmt, naxes),
                };
                let mut vals = vec![0.0; naxes];
                for i in a..b {
                    let o = plan.evaluate(i, &mut vals);
                    p.counts.add(o.reason);
                    if o.reason == reason::OK {
                        p.top.push(&o);
                        p.front.push(&o);
                    }
                    p.rows.push(plan, &o, &vals);
                }
                p
            })
            .collect();
        let mut bufs = Vec::with_capacity(parts.len());
        for p in parts {
            counts.merge(&p.counts);
            top.merge(p.top);
            front.merge(p.front);
            bufs.push(p.rows);
        }
        if let Some(r) = rows.as_mut() {
            r.write(bufs)?;
        }
        progress.advance(cend - at);
        at = cend;
        if at < end && progress.cancelled() {
            return Err(Error::Interrupted {
                evaluated: at - start,
            });
        }
    }
    Ok((counts, top, front))
}

/// An outcome from the kernel's words for point `index`.
#[inline]
pub fn from_words(index: u64, w: &[f32]) -> Outcome {
    Outcome {
        index,
        reason: w[6] as u8,
        step_time: w[0] as f64,
        energy_per_step: w[1] as f64,
        power: w[2] as f64,
        throughput: w[3] as f64,
        mfu: w[4] as f64,
        headroom: w[5] as f64,
        energy_per_unit: w[7] as f64,
    }
}

#[cfg(not(feature = "gpu"))]
fn gpu(
    _plan: &Plan,
    _opts: &Options,
    _start: u64,
    _end: u64,
    _rows: Option<Rows<'_>>,
    _progress: &dyn Progress,
) -> Result<(Counts, TopK, Front, String), Error> {
    Err(Error::Gpu(
        "this tessera was built without the `gpu` feature; use `--backend cpu`".into(),
    ))
}

/// Evaluate `start..end` on the GPU: f32 figures for counts and rows, a screen of candidates for
/// the top-K and the front, and those candidates re-evaluated in f64 for the answer. Without
/// per-point rows the screening runs on the device ([`Gpu::screen`]); with rows every point is
/// read back ([`Gpu::evaluate`]) and rows carry the f32 figures.
///
/// [`Gpu::screen`]: crate::sweep::gpu::Gpu::screen
/// [`Gpu::evaluate`]: crate::sweep::gpu::Gpu::evaluate
#[cfg(feature = "gpu")]
fn gpu(
    plan: &Plan,
    opts: &Options,
    start: u64,
    end: u64,
    mut rows: Option<Rows<'_>>,
    progress: &dyn Progress,
) -> Result<(Counts, TopK, Front, String), Error> {
    use crate::sweep::gpu::{Gpu, OUT_WORDS};
    let g = Gpu::shared().map_err(|e| Error::Gpu(e.to_string()))?;
    let design = g
        .upload(
            &plan
                .programs
                .iter()
                .map(|p| (&p.program, &p.base))
                .collect::<Vec<_>>(),
            &plan.space,
        )
        .map_err(|e| Error::Gpu(e.to_string()))?;
    let name = format!("gpu ({}, f32 screened, f64 answers)", g.describe());
    progress.start(end - start, &name);
    let fmt = rows.as_ref().map(|r| r.kind());
    let k = opts.top;
    let margin = 4.0 * F32_BOUND;
    let mut counts = Counts::default();
    let mut screen = Screen::new(k, k + 64, plan.objective, plan.pareto, margin);
    let mut boundary: Vec<u64> = Vec::new();
    let mut io_error: Option<std::io::Error> = None;
    let mut done: u64 = 0;
    let naxes = plan.space.axes.len();
    let budget = plan.constraints.power_budget;
    let floor = plan.constraints.memory_floor;
    if fmt.is_none() {
        // Screening on the device: only counts and candidates come back.
        use crate::sweep::gpu::{Bounds, Screened, Screening};
        let how = Screening {
            objective: plan.objective.code(),
            pareto: [plan.pareto.0.code(), plan.pareto.1.code()],
            margin: margin as f32,
            budget: budget.map(|b| b as f32).unwrap_or(0.0),
            floor: floor.map(|f| f as f32).unwrap_or(f32::MIN),
        };
        let mut vals = vec![0.0; naxes];
        let mut next = |b: Screened| -> Option<Bounds> {
            for (r, n) in b.counts.iter().enumerate() {
                counts.0[r] += n;
            }
            for w in b.candidates.chunks_exact(OUT_WORDS) {
                let (li, r) = (w[6] & 0x00ff_ffff, (w[6] >> 24) as u8);
                let index = b.first + li as u64;
                let mut f = [0f32; OUT_WORDS];
                for (x, y) in f.iter_mut().zip(w) {
                    *x = f32::from_bits(*y);
                }
                f[6] = r as f32;
                if r == reason::AMBIGUOUS {
                    // near a threshold in f32: classify and count it in f64
                    let o = plan.evaluate(index, &mut vals);
                    counts.add(o.reason);
                    if o.reason == reason::OK {
                        screen.push(&o);
                    }
                    continue;
                }
                let o = from_words(index, &f);
                if r == reason::OK {
                    screen.push(&o);
                } else if boundary.len() < 1 << 20 {
                    boundary.push(index);
                }
            }
            progress.advance(b.points as u64);
            done += b.points as u64;
            if progress.cancelled() {
                return None;
            }
            let (threshold, front) = screen.bounds();
            Some(Bounds { threshold, front })
        };
        g.screen(&design, start, end, &how, &mut next)
            .map_err(|e| Error::Gpu(e.to_string()))?;
    } else {
        let mut sink = |first: u64, words: &[f32]| -> bool {
            let n = words.len() / OUT_WORDS;
            let tasks: Vec<(usize, usize)> = (0..n)
                .step_by(TASK as usize)
                .map(|a| (a, (a + TASK as usize).min(n)))
                .collect();
            let parts: Vec<(Counts, Screen, RowBuf)> = tasks
                .par_iter()
                .map(|&(a, b)| {
                    let mut c = Counts::default();
                    let mut s = Screen::new(k, k + 64, plan.objective, plan.pareto, margin);
                    let mut text = RowBuf::new(fmt, naxes);
                    let mut vals = vec![0.0; naxes];
                    for j in a..b {
                        let index = first + j as u64;
                        let raw = from_words(index, &words[j * OUT_WORDS..(j + 1) * OUT_WORDS]);
                        let slack = |x: f64| margin * x.abs();
                        let tol = slack(
                            plan.programs[plan.locate(index).0]
                                .program
                                .footprint
                                .total(),
                        );
                        // Within the f32 margin of a threshold, or past f32's range: classify it
                        // in f64.
                        let ambiguous = match raw.reason {
                            reason::OK => {
                                budget.is_some_and(|b| (raw.power - b).abs() <= slack(b))
                                    || floor.is_some_and(|f| (raw.headroom - f).abs() <= tol)
                                    || !(raw.step_time < 3e38
                                        && raw.energy_per_step < 3e38
                                        && raw.power < 3e38)
                            }
                            reason::MEMORY => raw.headroom.abs() <= tol,
                            _ => false,
                        };
                        if ambiguous {
                            let o = plan.evaluate(index, &mut vals);
                            c.add(o.reason);
                            if o.reason == reason::OK {
                                s.push(&o);
                            }
                            text.push(plan, &o, &vals);
                            continue;
                        }
                        let mut o = raw;
                        plan.constrain(&mut o);
                        c.add(o.reason);
                        if raw.reason == reason::OK {
                            let ok_power = budget.is_none_or(|b| raw.power <= b + slack(b));
                            let ok_floor = floor.is_none_or(|f| raw.headroom + tol >= f);
                            if ok_power && ok_floor {
                                s.push(&raw);
                            }
                        }
                        if fmt.is_some() {
                            plan.space.sample(plan.locate(index).1, &mut vals);
                            text.push(plan, &o, &vals);
                        }
                    }
                    (c, s, text)
                })
                .collect();
            let mut bufs = Vec::with_capacity(parts.len());
            for (c, s, text) in parts {
                counts.merge(&c);
                screen.merge(s);
                bufs.push(text);
            }
            if let Some(r) = rows.as_mut() {
                if let Err(e) = r.write(bufs) {
                    io_error = Some(e);
                    return false;
                }
            }
            progress.advance(n as u64);
            done += n as u64;
            !progress.cancelled()
        };
        g.evaluate(&design, start, end, None, &mut sink)
            .map_err(|e| Error::Gpu(e.to_string()))?;
    }
    if let Some(e) = io_error {
        return Err(Error::Io(e));
    }
    if done < end - start && progress.cancelled() {
        return Err(Error::Interrupted { evaluated: done });
    }
    let mut cands = screen.candidates();
    cands.extend(boundary);
    cands.sort_unstable();
    cands.dedup();
    let (top, front) = refine(plan, k, &cands);
    Ok((counts, top, front, name))
}

/// The exact top-K and front of the points `indices`, evaluated in f64.
pub fn refine(plan: &Plan, k: usize, indices: &[u64]) -> (TopK, Front) {
    let naxes = plan.space.axes.len();
    let outs: Vec<Outcome> = indices
        .par_iter()
        .map_init(|| vec![0.0; naxes], |vals, &i| plan.evaluate(i, vals))
        .collect();
    let mut top = TopK::new(k, plan.objective);
    let mut front = Front::new(plan.pareto.0, plan.pareto.1);
    for o in outs.iter().filter(|o| o.feasible()) {
        top.push(o);
        front.push(o);
    }
    (top, front)
}

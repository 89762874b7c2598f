//! `tessera._tessera`, the Python extension: the Rust library's loaders, estimate, comparison,
//! sweep and shard merge, called from the `tessera` package (python/tessera/). Results cross as
//! the same JSON the CLI prints (so keys never drift from the contract) or, for a sweep's points,
//! as Arrow record batches through the C data interface (no copy). No model lives here.

// The one place this extension reads the files the library loads (the library does no I/O).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use tessera::choice::Choice;
use tessera::diag::{Diagnostic, Severity};
use tessera::request::{Mapping, Refused, Request};
use tessera::spec::{Files, Fs, Loaded};
use tessera::sweep::overrides::{Naming, Overrides};
use tessera::sweep::report::{Rows, Summary};
use tessera::sweep::run::{self, Backend, Options, Quiet};

create_exception!(
    _tessera,
    TesseraError,
    PyException,
    "Invalid input: the message carries every diagnostic, each located as `file:line:col` with \
     the source line and a hint, as the CLI prints them."
);

struct DiskFs;

impl Fs for DiskFs {
    fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        // as the CLI reads: a regular file under the size limit, checked before it is opened
        // (a FIFO would block, /dev/zero fill memory)
        use std::io::Read;
        let io = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_string(),
            _ => e.to_string(),
        };
        let m = std::fs::metadata(path).map_err(io)?;
        tessera::spec::admit(m.is_file(), m.is_dir(), m.len())?;
        let limit = tessera::spec::MAX_FILE_BYTES;
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .map_err(io)?
            .take(limit + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        tessera::spec::admit(true, false, bytes.len() as u64)?;
        Ok(bytes)
    }
}

/// Every diagnostic rendered as the CLI renders it, sorted the same way.
fn render(diags: &[Diagnostic], files: &Files) -> String {
    let mut sorted: Vec<&Diagnostic> = diags.iter().collect();
    sorted.sort_by(|a, b| (&a.file, a.pos, a.severity).cmp(&(&b.file, b.pos, b.severity)));
    sorted
        .iter()
        .map(|d| d.render(files.text_of(&d.file)))
        .collect::<String>()
}

/// The value, or a `TesseraError` with every diagnostic when any is an error.
fn loaded<T>(l: Loaded<T>) -> PyResult<T> {
    let failed = l.diagnostics.iter().any(|d| d.severity == Severity::Error);
    match l.value {
        Some(v) if !failed => Ok(v),
        _ => Err(TesseraError::new_err(
            render(&l.diagnostics, &l.files).trim_end().to_string(),
        )),
    }
}

fn usage(m: impl std::fmt::Display) -> PyErr {
    TesseraError::new_err(format!("error: {m}"))
}

fn choice<T: Choice>(what: &str, s: &str) -> PyResult<T> {
    T::parse(s).ok_or_else(|| {
        let names: Vec<&str> = T::ALL.iter().map(|c| c.0).collect();
        usage(format!("{what} `{s}`: choose one of {}", names.join(", ")))
    })
}

/// A validated system (an architecture file).
#[pyclass(frozen, module = "tessera")]
struct System {
    inner: tessera::model::system::System,
    #[pyo3(get)]
    path: String,
}

#[pymethods]
impl System {
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }
    /// Accelerator devices in the whole system.
    #[getter]
    fn devices(&self) -> u64 {
        self.inner.devices
    }
    fn __repr__(&self) -> String {
        format!(
            "System({:?}, devices={}, path={:?})",
            self.inner.name, self.inner.devices, self.path
        )
    }
}

/// A validated workload (a workload file), with its published mapping if it gives one.
#[pyclass(frozen, module = "tessera")]
struct Workload {
    inner: tessera::model::workload::Workload,
    #[pyo3(get)]
    path: String,
}

#[pymethods]
impl Workload {
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }
    /// Whether the file gives the mapping its source published.
    #[getter]
    fn has_published_mapping(&self) -> bool {
        self.inner.mapping.is_some()
    }
    fn __repr__(&self) -> String {
        format!("Workload({:?}, path={:?})", self.inner.name, self.path)
    }
}

#[pyfunction]
fn load_system(py: Python<'_>, path: String) -> PyResult<System> {
    let inner = py.detach(|| tessera::model::system::load_system(&path, &DiskFs));
    Ok(System {
        inner: loaded(inner)?,
        path,
    })
}

#[pyfunction]
fn load_workload(py: Python<'_>, path: String) -> PyResult<Workload> {
    let inner = py.detach(|| tessera::model::workload::load_workload(&path, &DiskFs));
    Ok(Workload {
        inner: loaded(inner)?,
        path,
    })
}

/// `auto` (search), `published` (the workload's, else auto), a mapping file, or `None`: the
/// command's default, as the CLI without `--mapping` (estimate: published; compare: auto).
fn mapping_arg(mapping: Option<&str>) -> PyResult<Option<Mapping>> {
    Ok(match mapping {
        None => None,
        Some("auto") => Some(Mapping::Auto),
        Some("published") => Some(Mapping::Published),
        Some(path) => Some(Mapping::Given(loaded(
            tessera::model::workload::load_mapping(path, &DiskFs),
        )?)),
    })
}

/// The library's [`Request`] from the keywords, every option parsed by the code the CLI's flags
/// use: `set` holds `--set PATH=VALUE` as (path, value) pairs; `power_budget` a power ("20 MW");
/// `software` a stack file, read and checked; `slo`, `min_user_rate` and `concurrency` as
/// `--slo`, `--min-user-rate` and `--concurrency` write them.
#[allow(clippy::too_many_arguments)]
fn request(
    mapping: Option<&str>,
    objective: &str,
    devices: Option<u64>,
    set: &[(String, String)],
    power_boundary: &str,
    power_budget: Option<&str>,
    budget_basis: &str,
    slo: Option<&str>,
    min_user_rate: Option<&str>,
    concurrency: Option<&str>,
    software: Option<&str>,
) -> PyResult<Request> {
    use tessera::model::serving::{rate, Concurrency, Slo};
    let err = |m: String| TesseraError::new_err(format!("error: {m}"));
    Ok(Request {
        objective: choice("objective", objective)?,
        power_boundary: choice("power_boundary", power_boundary)?,
        power_budget: power_budget
            .map(|b| {
                tessera::request::power_budget(b)
                    .map_err(|m| usage(format!("power_budget `{b}`: {m}")))
            })
            .transpose()?,
        budget_basis: choice("budget_basis", budget_basis)?,
        cost_budget: None,
        software: software
            .map(|p| loaded(tessera::model::system::load_software(p, &DiskFs)))
            .transpose()?,
        slo: slo.map(Slo::parse).transpose().map_err(err)?,
        min_user_rate: min_user_rate.map(rate).transpose().map_err(err)?,
        concurrency: concurrency
            .map(Concurrency::parse)
            .transpose()
            .map_err(err)?,
        goodput: Default::default(),
        mapping: mapping_arg(mapping)?,
        devices,
        all_devices: false,
        execution: Default::default(),
        set: tessera::sweep::set::Overrides::from_pairs(
            set.iter().map(|(p, v)| (p.as_str(), v.as_str())),
        ),
    })
}

/// Why a request did not run, as a `TesseraError` with the CLI's words.
fn refused(r: Refused) -> PyErr {
    match r {
        Refused::Load(m) => TesseraError::new_err(format!("error: {m}")),
        Refused::Set(diags) => {
            TesseraError::new_err(render(&diags, &Files::default()).trim_end().to_string())
        }
    }
}

/// The estimate's JSON, as `tessera estimate --format json` prints it: the keywords make the
/// library's `Request` the CLI's flags make, and the library runs it.
#[pyfunction]
#[pyo3(signature = (system, workload, mapping = None, objective = "time", devices = None, set = Vec::new(), power_boundary = "facility", slo = None, min_user_rate = None, concurrency = None, software = None, checkpoint_interval = "auto", straggler = None))]
#[allow(clippy::too_many_arguments)]
fn estimate_json(
    py: Python<'_>,
    system: &System,
    workload: &Workload,
    mapping: Option<String>,
    objective: &str,
    devices: Option<u64>,
    set: Vec<(String, String)>,
    power_boundary: &str,
    slo: Option<String>,
    min_user_rate: Option<String>,
    concurrency: Option<String>,
    software: Option<String>,
    checkpoint_interval: &str,
    straggler: Option<String>,
) -> PyResult<String> {
    let mut req = request(
        mapping.as_deref(),
        objective,
        devices,
        &set,
        power_boundary,
        None,
        "rated",
        slo.as_deref(),
        min_user_rate.as_deref(),
        concurrency.as_deref(),
        software.as_deref(),
    )?;
    req.goodput = goodput_options(checkpoint_interval, straggler.as_deref())?;
    let (sys, w) = (system.inner.clone(), &workload.inner);
    let e = py.detach(|| req.estimate(sys, w)).map_err(refused)?;
    serde_json::to_string(&e).map_err(usage)
}

/// The goodput choices `--checkpoint-interval` and `--straggler` make, parsed as the CLI parses
/// them (the same messages).
fn goodput_options(
    checkpoint_interval: &str,
    straggler: Option<&str>,
) -> PyResult<tessera::model::reliability::GoodputOptions> {
    use tessera::model::reliability::{GoodputOptions, Interval};
    Ok(GoodputOptions {
        interval: Interval::parse(checkpoint_interval).map_err(usage)?,
        straggler: straggler
            .map(GoodputOptions::parse_straggler)
            .transpose()
            .map_err(usage)?
            .unwrap_or(0.0),
        no_failures: false,
    })
}

/// The comparison's JSON, as `tessera compare --format json` prints it (the first system is the
/// baseline): the keywords make the library's `Request` the CLI's flags make, and the library
/// runs it.
#[pyfunction]
#[pyo3(signature = (systems, workload, mapping = None, objective = "time", devices = None, slo = None, min_user_rate = None, concurrency = None, software = None, set = Vec::new(), power_budget = None, power_boundary = "facility", budget_basis = "rated", budget = None, checkpoint_interval = "auto", straggler = None))]
#[allow(clippy::too_many_arguments)]
fn compare_json(
    py: Python<'_>,
    systems: Vec<PyRef<'_, System>>,
    workload: &Workload,
    mapping: Option<String>,
    objective: &str,
    devices: Option<u64>,
    slo: Option<String>,
    min_user_rate: Option<String>,
    concurrency: Option<String>,
    software: Option<String>,
    set: Vec<(String, String)>,
    power_budget: Option<String>,
    power_boundary: &str,
    budget_basis: &str,
    budget: Option<String>,
    checkpoint_interval: &str,
    straggler: Option<String>,
) -> PyResult<String> {
    if systems.is_empty() {
        return Err(usage("compare needs at least one system"));
    }
    let req = request(
        mapping.as_deref(),
        objective,
        devices,
        &set,
        power_boundary,
        power_budget.as_deref(),
        budget_basis,
        slo.as_deref(),
        min_user_rate.as_deref(),
        concurrency.as_deref(),
        software.as_deref(),
    )?;
    let mut req = req;
    req.cost_budget = budget
        .map(|b| tessera::request::cost_budget(&b).map_err(|m| usage(format!("budget `{b}`: {m}"))))
        .transpose()?;
    req.goodput = goodput_options(checkpoint_interval, straggler.as_deref())?;
    let sys: Vec<_> = systems.iter().map(|s| s.inner.clone()).collect();
    let w = &workload.inner;
    let c = py.detach(|| req.compare(sys, w)).map_err(refused)?;
    serde_json::to_string(&c).map_err(usage)
}

/// Run a sweep (a sweep file and/or options, as `tessera sweep` takes them). Returns the summary's
/// JSON (what `sweep --summary` writes) and, when `keep_points`, a `pyarrow.Table` of every point.
/// With `out`, the points also stream to that `.parquet` / `.arrow` file. The GIL is released
/// while the points are evaluated.
#[pyfunction]
#[pyo3(signature = (
    file = None, *, arch = None, workload = None, mapping = None, vary = Vec::new(),
    sampling = None, points = None, seed = None, power_budget = None, memory_floor = None,
    objective = None, pareto = None, top = None, shard = None, backend = "auto",
    keep_points = true, out = None
))]
#[allow(clippy::too_many_arguments)]
fn run_sweep<'py>(
    py: Python<'py>,
    file: Option<String>,
    arch: Option<String>,
    workload: Option<String>,
    mapping: Option<String>,
    vary: Vec<String>,
    sampling: Option<String>,
    points: Option<u64>,
    seed: Option<u64>,
    power_budget: Option<String>,
    memory_floor: Option<String>,
    objective: Option<String>,
    pareto: Option<Vec<String>>,
    top: Option<usize>,
    shard: Option<(u64, u64)>,
    backend: &str,
    keep_points: bool,
    out: Option<String>,
) -> PyResult<(String, Option<Bound<'py, PyAny>>)> {
    let backend: Backend = choice("backend", backend)?;
    let (mut inp, files) = match &file {
        Some(f) => {
            let l = py.detach(|| tessera::sweep::plan::read_file(f, &DiskFs));
            let files = l.files.clone();
            (loaded(l)?, files)
        }
        None => Default::default(),
    };
    let o = Overrides {
        arch,
        workload,
        mapping,
        vary,
        sampling,
        points,
        seed,
        power_budget,
        memory_floor,
        objective,
        pareto,
        top,
    };
    o.apply(&mut inp, Naming::Python).map_err(usage)?;
    if inp.axes.is_empty() && file.is_none() && inp.arch.is_none() {
        return Err(usage(
            "nothing to sweep: give a sweep file, or `arch=..., workload=..., vary={PATH: VALUES}`",
        ));
    }
    let plan = loaded(py.detach(|| tessera::sweep::plan::build(&inp, &DiskFs, files, Vec::new())))?;
    let mut opts = Options::new(&plan);
    opts.backend = backend;
    if let Some((i, n)) = shard {
        if n == 0 || i >= n {
            return Err(usage(format!("shard {i}/{n}: expected I/N with 0 ≤ I < N")));
        }
        opts.shard = Some((i, n));
    }
    use tessera::sweep::arrow::{FileFormat, FileSink, MemorySink};
    type W = std::io::BufWriter<std::fs::File>;
    let mut pending = Pending::default();
    let mut file_sink: Option<FileSink<W>> = match &out {
        Some(p) => {
            let fmt = FileFormat::from_path(p)
                .ok_or_else(|| usage(format!("out `{p}`: name a `.parquet` or `.arrow` file")))?;
            let f = pending
                .create(p)
                .map_err(|e| usage(format!("cannot create `{p}`: {e}")))?;
            Some(
                FileSink::new(&plan, fmt, std::io::BufWriter::with_capacity(1 << 20, f))
                    .map_err(|e| usage(format!("cannot write `{p}`: {e}")))?,
            )
        }
        None => None,
    };
    let mut mem = keep_points.then(|| MemorySink::new(&plan));
    let summary: Summary = py
        .detach(|| {
            let mut tee = Tee {
                a: file_sink.as_mut(),
                b: mem.as_mut(),
            };
            let any = tee.a.is_some() || tee.b.is_some();
            let rows = any.then_some(Rows::Columns(&mut tee));
            run::run_with(&plan, &opts, rows, &Quiet)
        })
        .map_err(usage)?;
    if let (Some(f), Some(p)) = (file_sink, &out) {
        use std::io::Write;
        f.finish(Some(&summary))
            .and_then(|mut w| w.flush())
            .map_err(|e| usage(format!("cannot write `{p}`: {e}")))?;
        pending
            .commit()
            .map_err(|e| usage(format!("cannot write `{p}`: {e}")))?;
    }
    let text = serde_json::to_string(&summary).map_err(usage)?;
    let table = match mem {
        Some(m) => Some(to_pyarrow(py, m, &text)?),
        None => None,
    };
    Ok((text, table))
}

/// A points file written under a temporary name beside it (`.NAME.tmp-PID`) and renamed when
/// complete, as the CLI writes its outputs: a sweep that fails or is interrupted leaves no file
/// under the final name (dropped without [`Pending::commit`], the temporary file is removed).
#[derive(Default)]
struct Pending {
    names: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

impl Pending {
    fn create(&mut self, dest: &str) -> std::io::Result<std::fs::File> {
        let dest = std::path::Path::new(dest);
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "out".into());
        let tmp = dest.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
        let f = std::fs::File::create(&tmp)?;
        self.names = Some((tmp, dest.to_path_buf()));
        Ok(f)
    }

    fn commit(&mut self) -> std::io::Result<()> {
        if let Some((tmp, dest)) = self.names.take() {
            std::fs::rename(tmp, dest)?;
        }
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

/// Points to both sinks.
struct Tee<'a, A, B> {
    a: Option<&'a mut A>,
    b: Option<&'a mut B>,
}

impl<A: tessera::sweep::report::ColumnSink, B: tessera::sweep::report::ColumnSink>
    tessera::sweep::report::ColumnSink for Tee<'_, A, B>
{
    fn write(&mut self, cols: tessera::sweep::report::Columns) -> std::io::Result<()> {
        match (&mut self.a, &mut self.b) {
            (Some(a), Some(b)) => {
                a.write(cols.clone())?;
                b.write(cols)
            }
            (Some(a), None) => a.write(cols),
            (None, Some(b)) => b.write(cols),
            (None, None) => Ok(()),
        }
    }
}

/// The batches as one `pyarrow.Table`, moved through the Arrow C stream interface (pyarrow takes
/// the Rust buffers; nothing is copied). The summary goes in the schema's metadata.
fn to_pyarrow<'py>(
    py: Python<'py>,
    m: tessera::sweep::arrow::MemorySink,
    summary: &str,
) -> PyResult<Bound<'py, PyAny>> {
    use arrow::ffi_stream::FFI_ArrowArrayStream;
    use arrow::record_batch::RecordBatchIterator;
    let mut meta = m.schema().metadata().clone();
    meta.insert(
        tessera::sweep::arrow::META_SUMMARY.to_string(),
        summary.to_string(),
    );
    let schema = std::sync::Arc::new(m.schema().as_ref().clone().with_metadata(meta));
    let batches: Vec<_> = m
        .batches
        .into_iter()
        .map(|b| b.with_schema(schema.clone()))
        .collect::<Result<_, _>>()
        .map_err(usage)?;
    let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), schema);
    let mut stream = Box::new(FFI_ArrowArrayStream::new(Box::new(reader)));
    let addr = &mut *stream as *mut FFI_ArrowArrayStream as usize;
    let pa = py.import("pyarrow")?;
    // pyarrow moves the stream out (leaving it released); `stream` is then dropped here.
    let reader = pa
        .getattr("RecordBatchReader")?
        .call_method1("_import_from_c", (addr,))?;
    let table = reader.call_method0("read_all")?;
    drop(stream);
    Ok(table)
}

/// Join shard summaries (JSON) with `sweep merge`'s verified, order-independent merge: the merged
/// summary's JSON and the warnings (missing shards, under `allow_partial`).
#[pyfunction]
#[pyo3(signature = (summaries, top = None, allow_partial = false))]
fn merge_json(
    summaries: Vec<String>,
    top: Option<usize>,
    allow_partial: bool,
) -> PyResult<(String, Vec<String>)> {
    let mut parts = Vec::new();
    for (i, t) in summaries.iter().enumerate() {
        let s = serde_json::from_str::<Summary>(t).map_err(|e| {
            usage(format!(
                "summary {i}:{}:{}: not a sweep summary: {e}",
                e.line(),
                e.column()
            ))
        })?;
        parts.push((format!("summary {i}"), s));
    }
    let opts = tessera::sweep::merge::MergeOptions { top, allow_partial };
    let (s, w) = tessera::sweep::merge::merge(parts, opts).map_err(usage)?;
    Ok((serde_json::to_string(&s).map_err(usage)?, w))
}

/// Point indices `start..end` of shard `i` of `n` of a sweep of `total` points.
#[pyfunction]
fn shard_range(total: u64, i: u64, n: u64) -> PyResult<(u64, u64)> {
    if n == 0 || i >= n {
        return Err(usage(format!("shard {i}/{n}: expected I/N with 0 ≤ I < N")));
    }
    Ok(run::shard_range(total, i, n))
}

#[pymodule]
fn _tessera(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TesseraError", m.py().get_type::<TesseraError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<System>()?;
    m.add_class::<Workload>()?;
    m.add_function(wrap_pyfunction!(load_system, m)?)?;
    m.add_function(wrap_pyfunction!(load_workload, m)?)?;
    m.add_function(wrap_pyfunction!(estimate_json, m)?)?;
    m.add_function(wrap_pyfunction!(compare_json, m)?)?;
    m.add_function(wrap_pyfunction!(run_sweep, m)?)?;
    m.add_function(wrap_pyfunction!(merge_json, m)?)?;
    m.add_function(wrap_pyfunction!(shard_range, m)?)?;
    Ok(())
}

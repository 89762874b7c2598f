//! A sweep's points as Arrow IPC and Parquet files: written by the library's column sink and by
//! `tessera sweep --out`, read back with the arrow / parquet readers, every point there with its
//! typed columns equal to what the engine evaluates, the summary in the file's metadata.

#![cfg(feature = "arrow")]
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::print_stderr
)] // not the library: may use the disk and say why a test skips

use crate::common;
use arrow::array::{
    Array, AsArray, BooleanArray, DictionaryArray, Float64Array, StringArray, UInt64Array,
};
use arrow::datatypes::{DataType, Float64Type, UInt32Type, UInt64Type, UInt8Type};
use arrow::record_batch::RecordBatch;
use tessera::sweep::arrow::{FileFormat, FileSink, MemorySink, META_SUMMARY, ROW_GROUP};
use tessera::sweep::plan::{self, Plan};
use tessera::sweep::report::{Rows, Summary};
use tessera::sweep::run::{self, Backend, Options, Quiet};

const GRID: &str = "architectures/sweeps/gb200-cluster-llama405b.ron";
const RANDOM: &str = "architectures/sweeps/gb200-cluster-random.ron";

fn load(path: &str) -> Plan {
    let l = plan::read_file(path, &common::CrateFs);
    let b = plan::build(&l.value.unwrap(), &common::CrateFs, l.files, l.diagnostics);
    b.value.unwrap()
}

fn cpu(plan: &Plan) -> Options {
    let mut o = Options::new(plan);
    o.backend = Backend::Cpu;
    o
}

fn tmp(name: &str) -> std::path::PathBuf {
    crate::common::scratch_dir("arrow").join(name)
}

/// Every column of every batch checked against the engine, point by point.
fn check_points(plan: &Plan, batches: &[RecordBatch], s: &Summary) {
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows as u64, plan.total());
    let mut next = 0u64;
    let mut feasible = 0u64;
    let naxes = plan.space.axes.len();
    let mut vals = vec![0.0; naxes];
    for b in batches {
        let schema = b.schema();
        assert_eq!(schema.field(0).name(), "index");
        assert_eq!(schema.field(0).data_type(), &DataType::UInt64);
        let index = b.column(0).as_primitive::<UInt64Type>();
        let devices = b.column(1).as_primitive::<UInt64Type>();
        let mapping = b.column(2).as_dictionary::<UInt32Type>();
        let labels = mapping.values().as_string::<i32>();
        let col = |n: &str| b.column_by_name(n).unwrap();
        let ok = col("feasible").as_boolean().clone();
        let reason = col("reason").as_dictionary::<UInt8Type>();
        let step = col("step_time_s").as_primitive::<Float64Type>();
        let headroom = col("memory_headroom_bytes").as_primitive::<Float64Type>();
        let tdp = col("device.tdp").as_primitive::<Float64Type>();
        assert_eq!(
            schema
                .field_with_name("device.tdp")
                .unwrap()
                .metadata()
                .get("unit")
                .map(String::as_str),
            Some("W")
        );
        for r in 0..b.num_rows() {
            assert_eq!(index.value(r), next, "points come in index order");
            let o = plan.evaluate(next, &mut vals);
            let (p, _) = plan.locate(next);
            assert_eq!(devices.value(r), plan.programs[p].devices);
            let k = mapping.keys().value(r) as usize;
            assert_eq!(labels.value(k), plan.programs[p].label);
            assert_eq!(ok.value(r), o.feasible());
            let tdp_axis = plan
                .space
                .axes
                .iter()
                .position(|a| a.path == "device.tdp")
                .unwrap();
            assert_eq!(tdp.value(r), vals[tdp_axis]);
            if o.feasible() {
                feasible += 1;
                assert!(reason.is_null(r));
                assert_eq!(step.value(r), o.step_time);
            } else {
                assert!(step.is_null(r), "an infeasible point has no step time");
                let names = reason.values().as_string::<i32>();
                let rk = reason.keys().value(r) as usize;
                assert_eq!(names.value(rk), tessera::sweep::reason::name(o.reason));
            }
            if o.headroom.is_finite() {
                assert_eq!(headroom.value(r), o.headroom);
            }
            next += 1;
        }
    }
    assert_eq!(feasible, s.feasible);
}

#[test]
fn parquet_and_arrow_files_hold_every_point() {
    let plan = load(GRID);
    for fmt in [FileFormat::Parquet, FileFormat::Arrow] {
        let mut sink = FileSink::new(&plan, fmt, Vec::new()).unwrap();
        let s = run::run_with(&plan, &cpu(&plan), Some(Rows::Columns(&mut sink)), &Quiet).unwrap();
        assert_eq!(sink.rows, plan.total());
        let bytes = sink.finish(Some(&s)).unwrap();
        let path = tmp(&format!("grid.{fmt:?}"));
        std::fs::write(&path, &bytes).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let (batches, meta): (Vec<RecordBatch>, Option<String>) = match fmt {
            FileFormat::Parquet => {
                let b = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
                    .unwrap();
                let kv = b
                    .metadata()
                    .file_metadata()
                    .key_value_metadata()
                    .and_then(|kv| kv.iter().find(|k| k.key == META_SUMMARY).cloned())
                    .and_then(|k| k.value);
                (b.build().unwrap().map(|b| b.unwrap()).collect(), kv)
            }
            FileFormat::Arrow => {
                let r = arrow::ipc::reader::FileReader::try_new(f, None).unwrap();
                let kv = r.custom_metadata().get(META_SUMMARY).cloned();
                (r.map(|b| b.unwrap()).collect(), kv)
            }
        };
        check_points(&plan, &batches, &s);
        let back: Summary = serde_json::from_str(&meta.expect("summary in the metadata")).unwrap();
        assert_eq!(back, s);
    }
}

#[test]
fn parquet_row_groups_stay_bounded() {
    // A third of 2 programs × 1e6 Latin-hypercube points: more than two row groups' worth.
    let plan = load(RANDOM);
    let mut o = cpu(&plan);
    o.shard = Some((0, 3));
    let mut sink = FileSink::new(&plan, FileFormat::Parquet, Vec::new()).unwrap();
    let s = run::run_with(&plan, &o, Some(Rows::Columns(&mut sink)), &Quiet).unwrap();
    let bytes = sink.finish(Some(&s)).unwrap();
    let path = tmp("random.parquet");
    std::fs::write(&path, &bytes).unwrap();
    let r = parquet::file::serialized_reader::SerializedFileReader::new(
        std::fs::File::open(&path).unwrap(),
    )
    .unwrap();
    use parquet::file::reader::FileReader;
    let md = r.metadata();
    let n = s.shards[0].end - s.shards[0].start;
    assert_eq!(md.file_metadata().num_rows() as u64, n);
    assert_eq!(s.evaluated, n);
    assert!(md.num_row_groups() as u64 >= n / ROW_GROUP as u64);
    assert!(md.num_row_groups() >= 2);
    for g in md.row_groups() {
        assert!(g.num_rows() as usize <= ROW_GROUP);
    }
}

#[test]
fn memory_sink_equals_the_file() {
    let plan = load(GRID);
    let mut mem = MemorySink::new(&plan);
    run::run_with(&plan, &cpu(&plan), Some(Rows::Columns(&mut mem)), &Quiet).unwrap();
    let rows: usize = mem.batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows as u64, plan.total());
    // A `devices` axis is the typed `devices` column, not a second column of that name.
    let names: Vec<String> = mem
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names.iter().filter(|n| *n == "devices").count(), 1);
    let b = &mem.batches[0];
    let _: &BooleanArray = b.column_by_name("feasible").unwrap().as_boolean();
    let _: &DictionaryArray<UInt32Type> = b.column_by_name("mapping").unwrap().as_dictionary();
    let _: &Float64Array = b.column_by_name("mfu").unwrap().as_primitive();
    let _: &UInt64Array = b.column(0).as_primitive();
    let _ = StringArray::from(vec!["x"]).len();
}

#[test]
fn cli_writes_parquet_and_arrow() {
    for ext in ["parquet", "arrow"] {
        let path = tmp(&format!("cli.{ext}"));
        let out = common::tessera(&[
            "sweep",
            GRID,
            "--backend",
            "cpu",
            "--quiet",
            "--format",
            "json",
            "--out",
            path.to_str().expect("utf-8 path"),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s: Summary = serde_json::from_slice(&out.stdout).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let rows: usize = if ext == "parquet" {
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
                .unwrap()
                .build()
                .unwrap()
                .map(|b| b.unwrap().num_rows())
                .sum()
        } else {
            arrow::ipc::reader::FileReader::try_new(f, None)
                .unwrap()
                .map(|b| b.unwrap().num_rows())
                .sum()
        };
        assert_eq!(rows as u64, s.total_points);
    }
    let bad = common::tessera(&["sweep", GRID, "--out", "points.xlsx"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains(".parquet"));
}

/// The GPU backend fills the same columns: the same points, the same feasibility, figures within
/// the f32 bound of the CPU's (lavapipe in CI; skipped with the reason where no adapter exists).
#[cfg(feature = "gpu")]
#[test]
fn gpu_columns_match_the_cpu() {
    use tessera::sweep::gpu::Gpu;
    if let Err(e) = Gpu::shared() {
        // only a machine without an adapter skips; a kernel that does not compile fails
        assert!(
            matches!(e, tessera::sweep::gpu::GpuError::NoAdapter(_)),
            "{e}"
        );
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("CI=true and no GPU adapter ({e}): `.ci/run` installs lavapipe");
        }
        eprintln!("skipping the GPU test: {e}. Install `mesa-vulkan-drivers libvulkan1`.");
        return;
    }
    let plan = load(GRID);
    let mut cpu_sink = MemorySink::new(&plan);
    run::run_with(
        &plan,
        &cpu(&plan),
        Some(Rows::Columns(&mut cpu_sink)),
        &Quiet,
    )
    .unwrap();
    let mut o = cpu(&plan);
    o.backend = Backend::Gpu;
    let mut gpu_sink = MemorySink::new(&plan);
    run::run_with(&plan, &o, Some(Rows::Columns(&mut gpu_sink)), &Quiet).unwrap();
    let cat = |m: &MemorySink| arrow::compute::concat_batches(&m.schema(), &m.batches).unwrap();
    let (c, g) = (cat(&cpu_sink), cat(&gpu_sink));
    assert_eq!(c.num_rows(), g.num_rows());
    for name in [
        "index",
        "devices",
        "mapping",
        "feasible",
        "reason",
        "device.tdp",
    ] {
        assert_eq!(
            c.column_by_name(name).unwrap().to_data(),
            g.column_by_name(name).unwrap().to_data(),
            "{name}"
        );
    }
    let (a, b) = (
        c.column_by_name("step_time_s")
            .unwrap()
            .as_primitive::<Float64Type>(),
        g.column_by_name("step_time_s")
            .unwrap()
            .as_primitive::<Float64Type>(),
    );
    for r in 0..c.num_rows() {
        assert_eq!(a.is_null(r), b.is_null(r));
        if a.is_valid(r) {
            let rel = (a.value(r) - b.value(r)).abs() / a.value(r).abs();
            assert!(rel <= tessera::sweep::run::F32_BOUND, "row {r}: {rel}");
        }
    }
}

/// Issue 45: a GB200 NVL72 serving sweep's `mapping` dictionary held 566 entries with 451
/// distinct labels (mappings that differ only where the label does not look print alike), which
/// pandas refuses (`Categorical categories must be unique`). The dictionary now holds each label
/// once, and every row still reads its own program's label.
#[test]
fn a_serving_sweeps_mapping_labels_are_a_dictionary_pandas_can_read() {
    let path = common::scratch_dir("tessera-arrow-labels").join("serving.arrow");
    let out = common::tessera(&[
        "sweep",
        "--arch",
        "architectures/gb200-nvl72.ron",
        "--workload",
        "workloads/llama3.1-70b-serving.ron",
        "--vary",
        "device.tdp=800 W .. 1200 W step 200 W",
        "--backend",
        "cpu",
        "--quiet",
        "--out",
        path.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = std::fs::File::open(&path).unwrap();
    let reader = arrow::ipc::reader::FileReader::try_new(file, None).unwrap();
    let mut rows = 0;
    for b in reader {
        let b = b.unwrap();
        let mapping = b.column(2).as_dictionary::<UInt32Type>();
        let labels = mapping.values().as_string::<i32>();
        let distinct: std::collections::BTreeSet<&str> = labels.iter().flatten().collect();
        assert_eq!(
            distinct.len(),
            labels.len(),
            "a label repeats in the dictionary"
        );
        rows += b.num_rows();
    }
    assert!(rows > 0);
}

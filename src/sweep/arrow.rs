//! A sweep's points as Arrow record batches with typed columns: streamed to an Arrow IPC file or a
//! Parquet file (one batch per stretch of points, row groups flushed as they fill, so memory stays
//! bounded however many points), or kept in memory for the Python package's `pyarrow.Table`.
//!
//! Columns: `index` (u64), `devices` (u64), `mapping` (dictionary of program labels), one f64
//! column per axis named by its path (its SI unit in the field's `unit` metadata; a `devices` axis
//! is the `devices` column), `feasible` (bool), `reason` (dictionary, null when feasible), then
//! the figures of [`FIGURE_NAMES`] (f64, null where they mean nothing: an infeasible point's, except
//! how far memory is short). The writers take any `Write`: the library opens no file.

use super::plan::Plan;
use super::report::{ColumnSink, Columns, Summary, FIGURE_NAMES};
use crate::engine::reason::point as reason;
use arrow::array::{
    ArrayRef, BooleanArray, DictionaryArray, Float64Array, StringArray, UInt32Array, UInt64Array,
    UInt8Array,
};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, UInt32Type, UInt8Type};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

/// Schema metadata key of the sweep's identity (name, fingerprint, system, workload) as JSON.
pub const META_SWEEP: &str = "tessera:sweep";
/// Key of the run's summary (the JSON `sweep --summary` writes), added when a file is finished.
pub const META_SUMMARY: &str = "tessera:summary";

/// Rows per Parquet row group: about 20 MB of columns in flight at most.
pub const ROW_GROUP: usize = 1 << 18;

/// Axis columns, by axis index, that get a column of their own (a `devices` axis is the `devices`
/// column already).
fn own_axes(plan: &Plan) -> Vec<usize> {
    plan.space
        .axes
        .iter()
        .enumerate()
        .filter(|(_, a)| a.path != "devices")
        .map(|(i, _)| i)
        .collect()
}

/// The schema of `plan`'s points.
pub fn schema(plan: &Plan) -> SchemaRef {
    let dict = |name: &str, key: DataType, nullable: bool| {
        Field::new(
            name,
            DataType::Dictionary(Box::new(key), Box::new(DataType::Utf8)),
            nullable,
        )
    };
    let mut f = vec![
        Field::new("index", DataType::UInt64, false),
        Field::new("devices", DataType::UInt64, false),
        dict("mapping", DataType::UInt32, false),
    ];
    for i in own_axes(plan) {
        let a = &plan.space.axes[i];
        f.push(
            Field::new(&a.path, DataType::Float64, false).with_metadata(HashMap::from([(
                "unit".to_string(),
                plan.axis_unit(i).to_string(),
            )])),
        );
    }
    f.push(Field::new("feasible", DataType::Boolean, false));
    f.push(dict("reason", DataType::UInt8, true));
    for n in FIGURE_NAMES {
        f.push(Field::new(n, DataType::Float64, true));
    }
    let ident = serde_json::json!({
        "name": plan.name,
        "fingerprint": plan.fingerprint,
        "system": plan.system,
        "workload": plan.workload,
        "unit": plan.unit,
        "total_points": plan.total(),
    });
    Arc::new(Schema::new_with_metadata(
        f,
        HashMap::from([(META_SWEEP.to_string(), ident.to_string())]),
    ))
}

/// Turns [`Columns`] of one plan into record batches of its [`schema`].
pub struct Batcher {
    schema: SchemaRef,
    /// The distinct labels of the plan's programs, in first-seen order: two programs can print the
    /// same label (mappings that differ only where the label does not look), and a dictionary
    /// with a repeated value is not one pandas can read (`to_pandas` needs unique categories).
    labels: Arc<StringArray>,
    /// Each program's key into `labels`.
    keys: Vec<u32>,
    devices: Vec<u64>,
    reasons: Arc<StringArray>,
    axes: Vec<usize>,
}

impl Batcher {
    pub fn new(plan: &Plan) -> Self {
        let mut distinct: Vec<&str> = Vec::new();
        let mut seen: HashMap<&str, u32> = HashMap::new();
        let keys = plan
            .programs
            .iter()
            .map(|p| {
                *seen.entry(p.label.as_str()).or_insert_with(|| {
                    distinct.push(p.label.as_str());
                    (distinct.len() - 1) as u32
                })
            })
            .collect();
        Batcher {
            schema: schema(plan),
            labels: Arc::new(StringArray::from_iter_values(distinct)),
            keys,
            devices: plan.programs.iter().map(|p| p.devices).collect(),
            reasons: Arc::new(StringArray::from_iter_values(
                (0..reason::COUNT as u8).map(reason::name),
            )),
            axes: own_axes(plan),
        }
    }
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
    /// The batch of `c`'s points (its vectors move into the arrays, uncopied).
    pub fn batch(&self, c: Columns) -> Result<RecordBatch, ArrowError> {
        let feasible: Vec<bool> = c.reason.iter().map(|&r| r == reason::OK).collect();
        let devices: Vec<u64> = c
            .program
            .iter()
            .map(|&p| self.devices[p as usize])
            .collect();
        let mut program = c.program;
        for p in &mut program {
            *p = self.keys[*p as usize];
        }
        let mapping = DictionaryArray::<UInt32Type>::try_new(
            UInt32Array::from(program),
            self.labels.clone(),
        )?;
        let reason = DictionaryArray::<UInt8Type>::try_new(
            UInt8Array::new(
                c.reason.into(),
                Some(NullBuffer::from(
                    feasible.iter().map(|f| !f).collect::<Vec<bool>>(),
                )),
            ),
            self.reasons.clone(),
        )?;
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from(c.index)),
            Arc::new(UInt64Array::from(devices)),
            Arc::new(mapping),
        ];
        let mut values: Vec<Option<Vec<f64>>> = c.values.into_iter().map(Some).collect();
        for &i in &self.axes {
            let v = values[i].take().unwrap_or_default();
            cols.push(Arc::new(Float64Array::from(v)));
        }
        let all_feasible = feasible.iter().all(|f| *f);
        let [a, b, cc, d, e, f, headroom] = c.figures;
        let nulls = (!all_feasible).then(|| NullBuffer::from(feasible.as_slice()));
        for v in [a, b, cc, d, e, f] {
            cols.push(Arc::new(Float64Array::new(v.into(), nulls.clone())));
        }
        let valid: Vec<bool> = headroom.iter().map(|h| h.is_finite()).collect();
        let nulls = (!valid.iter().all(|x| *x)).then(|| NullBuffer::from(valid));
        cols.insert(3 + self.axes.len(), Arc::new(BooleanArray::from(feasible)));
        cols.insert(4 + self.axes.len(), Arc::new(reason));
        cols.push(Arc::new(Float64Array::new(headroom.into(), nulls)));
        RecordBatch::try_new(self.schema.clone(), cols)
    }
}

fn io(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// The container a file of points is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    /// Arrow IPC file format (Feather v2), uncompressed.
    Arrow,
    /// Parquet, snappy-compressed, in row groups of [`ROW_GROUP`] rows.
    Parquet,
}

impl FileFormat {
    /// From a file name: `.arrow` / `.feather` / `.ipc`, or `.parquet` / `.pq`.
    pub fn from_path(p: &str) -> Option<FileFormat> {
        let l = p.to_ascii_lowercase();
        if l.ends_with(".arrow") || l.ends_with(".feather") || l.ends_with(".ipc") {
            Some(FileFormat::Arrow)
        } else if l.ends_with(".parquet") || l.ends_with(".pq") {
            Some(FileFormat::Parquet)
        } else {
            None
        }
    }
}

enum Writer<W: Write + Send> {
    Arrow(Box<arrow::ipc::writer::FileWriter<W>>),
    Parquet(Box<parquet::arrow::ArrowWriter<W>>),
}

/// Streams a sweep's points into an Arrow IPC or Parquet file on `W`.
pub struct FileSink<W: Write + Send> {
    batcher: Batcher,
    writer: Writer<W>,
    /// Points written.
    pub rows: u64,
}

impl<W: Write + Send> FileSink<W> {
    pub fn new(plan: &Plan, format: FileFormat, w: W) -> std::io::Result<Self> {
        let batcher = Batcher::new(plan);
        let schema = batcher.schema();
        let writer = match format {
            FileFormat::Arrow => Writer::Arrow(Box::new(
                arrow::ipc::writer::FileWriter::try_new(w, &schema).map_err(io)?,
            )),
            FileFormat::Parquet => {
                use parquet::basic::Compression;
                use parquet::file::properties::WriterProperties;
                use parquet::schema::types::ColumnPath;
                // Dictionary pages only where values repeat (labels, reasons): on the axis and
                // figure columns every value is new, and trying a dictionary first halves the
                // rate.
                let props = WriterProperties::builder()
                    .set_compression(Compression::SNAPPY)
                    .set_max_row_group_row_count(Some(ROW_GROUP))
                    .set_dictionary_enabled(false)
                    .set_column_dictionary_enabled(ColumnPath::from("mapping"), true)
                    .set_column_dictionary_enabled(ColumnPath::from("reason"), true)
                    .build();
                Writer::Parquet(Box::new(
                    parquet::arrow::ArrowWriter::try_new(w, schema, Some(props)).map_err(io)?,
                ))
            }
        };
        Ok(FileSink {
            batcher,
            writer,
            rows: 0,
        })
    }

    /// Write the footer, with the run's summary in the file's metadata, and hand back `W`.
    pub fn finish(self, summary: Option<&Summary>) -> std::io::Result<W> {
        let text = summary.map(serde_json::to_string).transpose().map_err(io)?;
        match self.writer {
            Writer::Arrow(mut w) => {
                if let Some(t) = text {
                    w.write_metadata(META_SUMMARY, t);
                }
                w.finish().map_err(io)?;
                w.into_inner().map_err(io)
            }
            Writer::Parquet(mut w) => {
                if let Some(t) = text {
                    w.append_key_value_metadata(parquet::file::metadata::KeyValue::new(
                        META_SUMMARY.to_string(),
                        t,
                    ));
                }
                w.into_inner().map_err(io)
            }
        }
    }
}

impl<W: Write + Send> ColumnSink for FileSink<W> {
    fn write(&mut self, cols: Columns) -> std::io::Result<()> {
        self.rows += cols.len() as u64;
        let b = self.batcher.batch(cols).map_err(io)?;
        match &mut self.writer {
            Writer::Arrow(w) => w.write(&b).map_err(io),
            Writer::Parquet(w) => w.write(&b).map_err(io),
        }
    }
}

/// Keeps every batch in memory (for a table handed to Python without copying).
pub struct MemorySink {
    batcher: Batcher,
    pub batches: Vec<RecordBatch>,
}

impl MemorySink {
    pub fn new(plan: &Plan) -> Self {
        MemorySink {
            batcher: Batcher::new(plan),
            batches: Vec::new(),
        }
    }
    pub fn schema(&self) -> SchemaRef {
        self.batcher.schema()
    }
}

impl ColumnSink for MemorySink {
    fn write(&mut self, cols: Columns) -> std::io::Result<()> {
        let b = self.batcher.batch(cols).map_err(io)?;
        self.batches.push(b);
        Ok(())
    }
}

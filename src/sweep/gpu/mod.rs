//! The wgpu backend: the WGSL kernel in `eval.wgsl` interprets flat cost programs for many
//! machine vectors at once (f32), generating each design point from its index.
//!
//! - [`Gpu`] holds the device, queue and compute pipeline, built once per process
//!   ([`Gpu::shared`]); a software adapter (lavapipe, llvmpipe) works but is slower than rayon,
//!   so `auto` uses it only for hardware adapters.
//! - [`Gpu::upload`] packs a sweep's programs, base machines and axes into storage buffers once;
//!   [`Gpu::evaluate`] streams any index range through two ping-pong slots (the next batch is
//!   computed while the last is read back), chunked to the adapter's buffer limits, with a 2-D
//!   dispatch past its workgroup-count limit, and reads back every point's figures.
//! - [`Gpu::screen`] does the same but keeps the reduction on the device: points are counted by
//!   reason in workgroup memory, and only candidates for the best points and the Pareto front
//!   (judged against the host's current entry score and front, with a margin) are written back,
//!   so neither the bus nor the host has to touch every point.
//! - Validation, out-of-memory and device-lost errors are caught (error scopes, an uncaptured-error
//!   handler, a device-lost callback, poll timeouts) and returned as [`GpuError`], never a panic.

use crate::engine::program::Program;
use crate::engine::table::{self as fields, Fields};
use crate::sweep::space::Space;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Invocations per workgroup (the kernel's `@workgroup_size`).
pub const WORKGROUP: u32 = 256;
/// f32 words the kernel writes per point.
pub const OUT_WORDS: usize = 8;
/// Most machine-vector axes the kernel handles.
pub const MAX_AXES: usize = 32;
/// Largest batch per dispatch (points); smaller when the adapter's buffers are.
pub const MAX_CHUNK: u32 = 1 << 20;

/// The kernel's hand-written parts: entry point and screening, design-point generation, and the
/// cost-program interpreter (its link section, then the rest). The host prepends the generated
/// constants and records.
const SHADER: [&str; 4] = [
    include_str!("kernel.wgsl"),
    include_str!("sample.wgsl"),
    include_str!("links.wgsl"),
    include_str!("eval.wgsl"),
];

mod layout;
mod pack;
use layout::{Layout, Params};
use pack::{pack, Packed};

/// The whole shader source: generated constants and record layouts, then the kernel.
pub fn shader_source() -> String {
    format!(
        "{}{}{}const MAX_AXES: u32 = {MAX_AXES}u;\n{}{}",
        fields::wgsl_constants(),
        crate::engine::reason::point::wgsl_constants(),
        crate::engine::coeffs::tier_wgsl(),
        layout::wgsl(),
        SHADER.concat()
    )
}
const WAIT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, PartialEq)]
pub enum GpuError {
    /// No adapter (no Vulkan, Metal, DX12 or GL driver).
    NoAdapter(String),
    /// The device reported an error (validation, out of memory, lost, timeout).
    Device(String),
    /// The sweep does not fit the kernel (too many axes).
    Unsupported(String),
}

impl std::fmt::Display for GpuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuError::NoAdapter(m) => write!(f, "no GPU adapter: {m}"),
            GpuError::Device(m) => write!(f, "GPU error: {m}"),
            GpuError::Unsupported(m) => write!(f, "the GPU backend cannot run this sweep: {m}"),
        }
    }
}

impl std::error::Error for GpuError {}

/// The device, its queue and the compiled kernel.
pub struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
    pub info: wgpu::AdapterInfo,
    /// Points per dispatch.
    pub chunk: u32,
    /// Workgroups per dispatch dimension.
    pub max_groups: u32,
    errors: Arc<Mutex<Vec<String>>>,
}

/// A sweep's programs and axes, resident on the device.
pub struct Design {
    progs: wgpu::Buffer,
    recs: wgpu::Buffer,
    vals: wgpu::Buffer,
    /// Machine points per program.
    pub points: u64,
    pub programs: usize,
    /// What every dispatch of this design shares.
    params: Params,
}

struct Slot {
    params: wgpu::Buffer,
    out: wgpu::Buffer,
    staging: wgpu::Buffer,
    front: wgpu::Buffer,
    counts: wgpu::Buffer,
    counts_staging: wgpu::Buffer,
    bind: wgpu::BindGroup,
}

static SHARED: OnceLock<Result<Gpu, GpuError>> = OnceLock::new();

fn scope_error(e: Option<wgpu::Error>) -> Result<(), GpuError> {
    match e {
        Some(e) => Err(GpuError::Device(e.to_string())),
        None => Ok(()),
    }
}

impl Gpu {
    /// The process-wide GPU context, created on first use.
    pub fn shared() -> Result<&'static Gpu, GpuError> {
        SHARED.get_or_init(Gpu::new).as_ref().map_err(|e| e.clone())
    }

    /// Pick the best adapter (high performance, hardware first) and compile the kernel.
    pub fn new() -> Result<Gpu, GpuError> {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            force_fallback_adapter: false,
            compatible_surface: None,
            apply_limit_buckets: false,
        }))
        .map_err(|e| {
            GpuError::NoAdapter(format!(
                "{e} (install a Vulkan driver, e.g. `mesa-vulkan-drivers libvulkan1` for lavapipe)"
            ))
        })?;
        let info = adapter.get_info();
        let al = adapter.limits();
        let mut limits = wgpu::Limits::downlevel_defaults();
        limits.max_storage_buffer_binding_size = al.max_storage_buffer_binding_size;
        limits.max_buffer_size = al.max_buffer_size;
        limits.max_compute_workgroups_per_dimension = al.max_compute_workgroups_per_dimension;
        limits.max_storage_buffers_per_shader_stage =
            al.max_storage_buffers_per_shader_stage.min(8);
        limits.max_compute_invocations_per_workgroup = al.max_compute_invocations_per_workgroup;
        limits.max_compute_workgroup_size_x = al.max_compute_workgroup_size_x;
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("tessera sweep"),
            required_features: wgpu::Features::empty(),
            required_limits: limits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::default(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|e| GpuError::Device(format!("cannot open {}: {e}", info.name)))?;
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        {
            let errors = errors.clone();
            device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
                if let Ok(mut v) = errors.lock() {
                    v.push(e.to_string());
                }
            }));
        }
        {
            let errors = errors.clone();
            device.set_device_lost_callback(move |reason, msg| {
                if let Ok(mut v) = errors.lock() {
                    v.push(format!("device lost ({reason:?}): {msg}"));
                }
            });
        }
        let source = shader_source();
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("eval.wgsl"),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("tessera eval"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        scope_error(pollster::block_on(scope.pop()))?;
        let layout = pipeline.get_bind_group_layout(0);
        let per_point = (OUT_WORDS * 4) as u64;
        let by_buffer = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size)
            / per_point;
        let chunk = (by_buffer.min(MAX_CHUNK as u64) as u32 / WORKGROUP * WORKGROUP).max(WORKGROUP);
        Ok(Gpu {
            device,
            queue,
            pipeline,
            layout,
            info,
            chunk,
            max_groups: limits.max_compute_workgroups_per_dimension.max(1),
            errors,
        })
    }

    /// A hardware GPU (not a CPU rasteriser such as llvmpipe).
    pub fn is_hardware(&self) -> bool {
        self.info.device_type != wgpu::DeviceType::Cpu
    }

    /// "NVIDIA H100 (Vulkan, DiscreteGpu)".
    pub fn describe(&self) -> String {
        format!(
            "{} ({:?}, {:?})",
            self.info.name, self.info.backend, self.info.device_type
        )
    }

    fn check(&self) -> Result<(), GpuError> {
        let mut e = self
            .errors
            .lock()
            .map_err(|_| GpuError::Device("error log poisoned".into()))?;
        if e.is_empty() {
            Ok(())
        } else {
            Err(GpuError::Device(std::mem::take(&mut *e).join("; ")))
        }
    }

    fn storage(&self, label: &str, words: &[u32]) -> wgpu::Buffer {
        let data: &[u32] = if words.is_empty() { &[0] } else { words };
        let buf = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: (data.len() * 4) as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.queue.write_buffer(&buf, 0, bytemuck::cast_slice(data));
        buf
    }

    /// Pack `programs` (each with the machine fields its points start from) and the sweep's axes
    /// into device buffers.
    pub fn upload(
        &self,
        programs: &[(&Program, &Fields)],
        space: &Space,
    ) -> Result<Design, GpuError> {
        if space.axes.len() > MAX_AXES {
            return Err(GpuError::Unsupported(format!(
                "{} axes; the kernel takes at most {MAX_AXES}",
                space.axes.len()
            )));
        }
        let Packed {
            recs,
            vals,
            progs,
            params,
        } = pack(programs, space);
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let design = Design {
            progs: self.storage("programs", &progs),
            recs: self.storage("records", &recs),
            vals: self.storage("values", bytemuck::cast_slice(&vals)),
            points: space.points,
            programs: programs.len(),
            params,
        };
        scope_error(pollster::block_on(scope.pop()))?;
        self.check()?;
        Ok(design)
    }

    fn slot(&self, design: &Design, chunk: u32) -> Result<Slot, GpuError> {
        fn entry(binding: u32, buffer: &wgpu::Buffer) -> wgpu::BindGroupEntry<'_> {
            wgpu::BindGroupEntry {
                binding,
                resource: buffer.as_entire_binding(),
            }
        }
        let bytes = chunk as u64 * (OUT_WORDS * 4) as u64;
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let vscope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let buffer = |label: &str, size: u64, usage: wgpu::BufferUsages| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        use wgpu::BufferUsages as U;
        let params = buffer(
            "params",
            std::mem::size_of::<Params>() as u64,
            U::UNIFORM | U::COPY_DST,
        );
        let out = buffer("out", bytes, U::STORAGE | U::COPY_SRC);
        let staging = buffer("staging", bytes, U::MAP_READ | U::COPY_DST);
        let front = buffer("front", MAX_FRONT as u64 * 8, U::STORAGE | U::COPY_DST);
        let counts = buffer("counts", 32, U::STORAGE | U::COPY_SRC | U::COPY_DST);
        let counts_staging = buffer("counts staging", 32, U::MAP_READ | U::COPY_DST);
        let bind = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("sweep"),
            layout: &self.layout,
            entries: &[
                entry(0, &params),
                entry(1, &design.progs),
                entry(2, &design.recs),
                entry(3, &design.vals),
                entry(4, &out),
                entry(5, &front),
                entry(6, &counts),
            ],
        });
        scope_error(pollster::block_on(vscope.pop()))?;
        scope_error(pollster::block_on(scope.pop()))?;
        Ok(Slot {
            params,
            out,
            staging,
            front,
            counts,
            counts_staging,
            bind,
        })
    }

    fn batches(&self, design: &Design, start: u64, end: u64, chunk: u32) -> Vec<(u64, u32)> {
        let end = end.min(design.points * design.programs as u64);
        let mut v = Vec::new();
        let mut at = start;
        while at < end {
            let n = (end - at).min(chunk as u64);
            v.push((at, n as u32));
            at += n;
        }
        v
    }

    /// Evaluate points `start..end` of `design` (global index = program × points + machine
    /// point), handing each batch's results to `sink(first index, words)` in order: `OUT_WORDS`
    /// f32 per point (step time, energy per step, power, throughput, MFU, memory headroom,
    /// reason, energy per unit). `sink` returns false to stop. `limits` overrides the batch size
    /// and the workgroups per dimension (tests use it to force 2-D dispatch).
    pub fn evaluate(
        &self,
        design: &Design,
        start: u64,
        end: u64,
        limits: Option<(u32, u32)>,
        sink: &mut dyn FnMut(u64, &[f32]) -> bool,
    ) -> Result<(), GpuError> {
        let (chunk, max_groups) = limits.unwrap_or((self.chunk, self.max_groups));
        let chunk = chunk.clamp(1, self.chunk.max(1));
        let max_groups = max_groups.clamp(1, self.max_groups);
        let batches = self.batches(design, start, end, chunk);
        if batches.is_empty() {
            return Ok(());
        }
        let slots = [self.slot(design, chunk)?, self.slot(design, chunk)?];
        let mut pending: Option<(usize, u64, u32, wgpu::SubmissionIndex)> = None;
        for (bi, &(first, n)) in batches.iter().enumerate() {
            let si = bi % 2;
            let sub = self.submit(design, &slots[si], first, n, max_groups, None)?;
            if let Some((ps, pf, pn, pidx)) = pending.take() {
                if !self.read(&slots[ps], pf, pn, pidx, sink)? {
                    return self.drain(sub);
                }
            }
            pending = Some((si, first, n, sub));
        }
        if let Some((ps, pf, pn, pidx)) = pending {
            self.read(&slots[ps], pf, pn, pidx, sink)?;
        }
        self.check()
    }

    /// Evaluate points `start..end` of `design` on the device and read back only their counts by
    /// reason and the candidates `how` lets through (see `eval.wgsl`). Each batch is handed to
    /// `next`, which returns the bounds the following batches are screened against (its best
    /// scores so far), or `None` to stop.
    pub fn screen(
        &self,
        design: &Design,
        start: u64,
        end: u64,
        how: &Screening,
        next: &mut dyn FnMut(Screened) -> Option<Bounds>,
    ) -> Result<(), GpuError> {
        let chunk = self.chunk;
        let batches = self.batches(design, start, end, chunk);
        if batches.is_empty() {
            return Ok(());
        }
        let slots = [self.slot(design, chunk)?, self.slot(design, chunk)?];
        let mut bounds = Bounds {
            threshold: f32::MIN,
            front: Vec::new(),
        };
        let mut pending: Option<(usize, u64, u32, wgpu::SubmissionIndex)> = None;
        for (bi, &(first, n)) in batches.iter().enumerate() {
            let si = bi % 2;
            let sub = self.submit(
                design,
                &slots[si],
                first,
                n,
                self.max_groups,
                Some((how, &bounds)),
            )?;
            if let Some((ps, pf, pn, pidx)) = pending.take() {
                match self.read_screened(&slots[ps], pf, pn, pidx, next)? {
                    Some(b) => bounds = b,
                    None => return self.drain(sub),
                }
            }
            pending = Some((si, first, n, sub));
        }
        if let Some((ps, pf, pn, pidx)) = pending {
            self.read_screened(&slots[ps], pf, pn, pidx, next)?;
        }
        self.check()
    }

    fn drain(&self, sub: wgpu::SubmissionIndex) -> Result<(), GpuError> {
        self.wait(sub)?;
        self.check()
    }

    fn wait(&self, sub: wgpu::SubmissionIndex) -> Result<(), GpuError> {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(sub),
                timeout: Some(WAIT),
            })
            .map(|_| ())
            .map_err(|e| GpuError::Device(format!("waiting for the GPU: {e}")))
    }

    fn submit(
        &self,
        d: &Design,
        slot: &Slot,
        first: u64,
        n: u32,
        max_groups: u32,
        screen: Option<(&Screening, &Bounds)>,
    ) -> Result<wgpu::SubmissionIndex, GpuError> {
        let prog = first / d.points;
        let mi = first % d.points;
        let mut params = Params {
            start_prog: prog as u32,
            start_mi: mi as u32,
            count: n,
            ..d.params
        };
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        if let Some((how, b)) = screen {
            // the front the kernel screens against: at most MAX_FRONT of its points (a subset
            // screens less, never wrongly)
            let len = b.front.len();
            let take = len.min(MAX_FRONT);
            let pts: Vec<[f32; 2]> = (0..take)
                .map(|k| {
                    b.front[if take < len {
                        k * (len - 1) / (take - 1).max(1)
                    } else {
                        k
                    }]
                })
                .collect();
            if !pts.is_empty() {
                self.queue
                    .write_buffer(&slot.front, 0, bytemuck::cast_slice(&pts));
            }
            params.mode = layout::code::MODE_SCREEN;
            params.objective = how.objective;
            params.pareto_a = how.pareto[0];
            params.pareto_b = how.pareto[1];
            params.n_front = pts.len() as u32;
            params.threshold = b.threshold;
            params.margin = how.margin;
            params.budget = how.budget;
            params.floor = how.floor;
        }
        let groups = n.div_ceil(WORKGROUP);
        let x = groups.min(max_groups);
        let y = groups.div_ceil(x);
        if y > self.max_groups {
            return Err(GpuError::Unsupported(format!(
                "{n} points need {groups} workgroups, more than {x} × {} dispatches",
                self.max_groups
            )));
        }
        self.queue.write_buffer(&slot.params, 0, params.bytes());
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("sweep"),
            });
        if screen.is_some() {
            enc.clear_buffer(&slot.counts, 0, None);
        }
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("eval"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &slot.bind, &[]);
            pass.dispatch_workgroups(x, y, 1);
        }
        if screen.is_some() {
            enc.copy_buffer_to_buffer(&slot.counts, 0, &slot.counts_staging, 0, 32);
            // the first candidates come back with the counts; more need a second trip
            let bytes = (n.min(PREFIX) as u64) * (OUT_WORDS * 4) as u64;
            enc.copy_buffer_to_buffer(&slot.out, 0, &slot.staging, 0, bytes);
        } else {
            let bytes = n as u64 * (OUT_WORDS * 4) as u64;
            enc.copy_buffer_to_buffer(&slot.out, 0, &slot.staging, 0, bytes);
        }
        let sub = self.queue.submit([enc.finish()]);
        scope_error(pollster::block_on(scope.pop()))?;
        self.check()?;
        Ok(sub)
    }

    /// Map `slice`, wait for `sub`, and hand the bytes to `f`.
    fn map<R>(
        &self,
        buffer: &wgpu::Buffer,
        bytes: u64,
        sub: wgpu::SubmissionIndex,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, GpuError> {
        let slice = buffer.slice(..bytes.max(4));
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.wait(sub)?;
        self.check()?;
        match rx.recv_timeout(WAIT) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(GpuError::Device(format!("reading results back: {e}"))),
            Err(_) => return Err(GpuError::Device("the results never came back".into())),
        }
        let r = {
            let view = slice
                .get_mapped_range()
                .map_err(|e| GpuError::Device(format!("reading results back: {e}")))?;
            f(&view)
        };
        buffer.unmap();
        Ok(r)
    }

    fn read(
        &self,
        slot: &Slot,
        first: u64,
        n: u32,
        sub: wgpu::SubmissionIndex,
        sink: &mut dyn FnMut(u64, &[f32]) -> bool,
    ) -> Result<bool, GpuError> {
        let bytes = n as u64 * (OUT_WORDS * 4) as u64;
        self.map(&slot.staging, bytes, sub, |b| {
            sink(first, bytemuck::cast_slice(b))
        })
    }

    fn read_screened(
        &self,
        slot: &Slot,
        first: u64,
        n: u32,
        sub: wgpu::SubmissionIndex,
        next: &mut dyn FnMut(Screened) -> Option<Bounds>,
    ) -> Result<Option<Bounds>, GpuError> {
        let counts: Vec<u32> = self.map(&slot.counts_staging, 32, sub.clone(), |b| {
            bytemuck::cast_slice::<u8, u32>(b).to_vec()
        })?;
        let found = counts[crate::engine::reason::point::COUNT].min(n);
        let prefix = n.min(PREFIX);
        let bytes = found as u64 * (OUT_WORDS * 4) as u64;
        let sub = if found > prefix {
            let mut enc = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("candidates"),
                });
            enc.copy_buffer_to_buffer(&slot.out, 0, &slot.staging, 0, bytes);
            self.queue.submit([enc.finish()])
        } else {
            sub
        };
        let mut by_reason = [0u64; crate::engine::reason::point::COUNT];
        for (c, n) in by_reason.iter_mut().zip(&counts) {
            *c = *n as u64;
        }
        self.map(&slot.staging, bytes, sub, |b| {
            next(Screened {
                first,
                points: n,
                counts: by_reason,
                candidates: bytemuck::cast_slice(b),
            })
        })
    }
}

/// Words of the kernel's `Params`.
/// Front points the kernel screens against.
pub const MAX_FRONT: usize = 4096;
/// Candidates read back with the counts in one trip.
const PREFIX: u32 = 8192;

/// How the kernel screens (its `mode 1`): metrics by code (`0` throughput, `1` step time, `2`
/// power, `3` energy per unit, `4` throughput per watt, `5` MFU), the relative margin, and the
/// constraints (`budget` ≤ 0: none; `floor` = `f32::MIN`: none).
#[derive(Clone, Copy, Debug)]
pub struct Screening {
    pub objective: u32,
    pub pareto: [u32; 2],
    pub margin: f32,
    pub budget: f32,
    pub floor: f32,
}

/// What the host knows so far: the score a point must reach to rank (`f32::MIN` at first), and
/// the Pareto front as (score a, score b) with score a descending.
#[derive(Clone, Debug)]
pub struct Bounds {
    pub threshold: f32,
    pub front: Vec<[f32; 2]>,
}

/// One batch as the kernel screened it.
pub struct Screened<'a> {
    /// Global index of the batch's first point.
    pub first: u64,
    pub points: u32,
    /// Points by reason (0 feasible, then `sweep::reason`), constraints applied.
    pub counts: [u64; crate::engine::reason::point::COUNT],
    /// `OUT_WORDS` per candidate, as in full mode except word 6: the point's index in the batch
    /// | its reason << 24.
    pub candidates: &'a [u32],
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A code the generator emits and no part of the kernel reads is a branch the kernel no
    /// longer takes (the `OVERLAP_*` codes outlived the record's settled booking): drop it.
    #[test]
    fn the_kernel_reads_every_generated_code() {
        let kernel = SHADER.concat();
        let unread: Vec<String> = layout::codes()
            .lines()
            .filter_map(|l| l.strip_prefix("const ")?.split(':').next())
            .filter(|name| !kernel.contains(name))
            .map(str::to_string)
            .collect();
        assert!(unread.is_empty(), "generated but never read: {unread:?}");
    }
}

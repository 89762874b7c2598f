//! The wgpu backend: the WGSL kernel in `eval.wgsl` interprets flat cost programs for many
//! machine vectors at once (f32), generating each design point from its index.
//!
//! - [`Gpu`] holds the device, queue and compute pipeline, built once per process
//!   ([`Gpu::shared`]); a software adapter (lavapipe, llvmpipe) works but is slower than rayon,
//!   so `auto` uses it only for hardware adapters.
//! - [`Gpu::upload`] packs a sweep's programs, base machines and axes into storage buffers once;
//!   [`Gpu::evaluate`] streams any index range through two ping-pong slots (the next batch is
//!   computed while the last is read back), chunked to the adapter's buffer limits, with a 2-D
//!   dispatch past its workgroup-count limit.
//! - Validation, out-of-memory and device-lost errors are caught (error scopes, an uncaptured-error
//!   handler, a device-lost callback, poll timeouts) and returned as [`GpuError`], never a panic.

use crate::engine::program::Program;
use crate::sweep::fields::{self, Fields, NX};
use crate::sweep::space::{Op, Sampling, Space, Values};
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

const SHADER: &str = include_str!("eval.wgsl");
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
    n_axes: u32,
    axis_start: u32,
    n_targets: u32,
    target_start: u32,
    sampling: u32,
    seed: u32,
    rederive: u32,
    divide: u32,
}

struct Slot {
    params: wgpu::Buffer,
    out: wgpu::Buffer,
    staging: wgpu::Buffer,
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
        let source = format!(
            "{}const MAX_AXES: u32 = {MAX_AXES}u;\n{SHADER}",
            fields::wgsl_constants()
        );
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
        let f = |x: f64| (x as f32).to_bits();
        let mut recs: Vec<u32> = Vec::new();
        let mut vals: Vec<f32> = Vec::new();
        let mut progs: Vec<u32> = Vec::new();
        let mut bases: Vec<&Fields> = Vec::new();
        for (p, base) in programs {
            let b = match bases.iter().position(|x| x == base) {
                Some(i) => i,
                None => {
                    bases.push(base);
                    bases.len() - 1
                }
            };
            let op_start = recs.len() / 8;
            for o in &p.ops {
                recs.extend([
                    o.matrix as u32,
                    o.precision as u32,
                    o.section as u32,
                    o.phase as u32,
                    f(o.flops),
                    f(o.weight_bytes),
                    f(o.act_bytes),
                    f(o.count),
                ]);
            }
            let comm_start = recs.len() / 8;
            for c in &p.comms {
                recs.extend([
                    c.kind as u32,
                    c.section as u32,
                    c.overlap as u32,
                    c.weight_stream as u32,
                    f(c.bytes),
                    f(c.inner),
                    f(c.outer),
                    f(c.count),
                ]);
            }
            let fp = &p.footprint;
            progs.extend([
                op_start as u32,
                p.ops.len() as u32,
                comm_start as u32,
                p.comms.len() as u32,
                (b * NX) as u32,
                p.mfu_precision as u32,
                0,
                0,
                f(p.micro_batches),
                f(p.bubble),
                f(p.devices),
                f(p.units_per_step),
                f(p.model_flops_per_step),
                f(fp.state()),
                f(fp.working()),
                f(fp.total()),
            ]);
        }
        for b in &bases {
            vals.extend(b.iter().map(|x| *x as f32));
        }
        let axis_start = recs.len() / 8;
        for a in &space.axes {
            let (kind, count, off, lo, hi, lr) = match &a.values {
                Values::List(v) => {
                    let off = vals.len();
                    vals.extend(v.iter().map(|x| *x as f32));
                    (0, v.len(), off, 0.0, 0.0, 0.0)
                }
                Values::Linear { lo, hi } => (1, 0, 0, *lo, *hi, 0.0),
                Values::Log { lo, hi } => (2, 0, 0, *lo, *hi, (hi / lo).ln()),
            };
            recs.extend([kind, count as u32, off as u32, 0, f(lo), f(hi), f(lr), 0]);
        }
        let target_start = recs.len() / 8;
        for (axis, t) in &space.flat {
            let (op, a, b, floor) = match t.op {
                Op::Set {
                    scale,
                    offset,
                    floor,
                } => (0, scale, offset, floor.max(f32::MIN as f64)),
                Op::DivBy { scale } => (1, scale, 0.0, 0.0),
            };
            recs.extend([*axis as u32, t.field as u32, op, 0, f(a), f(b), f(floor), 0]);
        }
        let (sampling, seed) = match space.sampling {
            Sampling::Grid => (0, 0),
            Sampling::Random { seed, .. } => (1, crate::sweep::space::seed32(seed)),
            Sampling::LatinHypercube { seed, .. } => (2, crate::sweep::space::seed32(seed)),
        };
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let design = Design {
            progs: self.storage("programs", &progs),
            recs: self.storage("records", &recs),
            vals: self.storage("values", bytemuck::cast_slice(&vals)),
            points: space.points,
            programs: programs.len(),
            n_axes: space.axes.len() as u32,
            axis_start: axis_start as u32,
            n_targets: space.flat.len() as u32,
            target_start: target_start as u32,
            sampling,
            seed,
            rederive: space.derive.rederive,
            divide: space.derive.divide,
        };
        scope_error(pollster::block_on(scope.pop()))?;
        self.check()?;
        Ok(design)
    }

    fn slot(&self, design: &Design, chunk: u32) -> Result<Slot, GpuError> {
        let bytes = chunk as u64 * (OUT_WORDS * 4) as u64;
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let vscope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let params = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("params"),
            size: 48,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let out = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("out"),
            size: bytes,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("staging"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let bind = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("sweep"),
            layout: &self.layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: params.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: design.progs.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: design.recs.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 3,
                    resource: design.vals.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 4,
                    resource: out.as_entire_binding(),
                },
            ],
        });
        scope_error(pollster::block_on(vscope.pop()))?;
        scope_error(pollster::block_on(scope.pop()))?;
        Ok(Slot {
            params,
            out,
            staging,
            bind,
        })
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
        let end = end.min(design.points * design.programs as u64);
        if start >= end {
            return Ok(());
        }
        let slots = [self.slot(design, chunk)?, self.slot(design, chunk)?];
        let mut batches = Vec::new();
        let mut at = start;
        while at < end {
            let n = (end - at).min(chunk as u64);
            batches.push((at, n as u32));
            at += n;
        }
        let mut pending: Option<(usize, u64, u32, wgpu::SubmissionIndex)> = None;
        for (bi, &(first, n)) in batches.iter().enumerate() {
            let si = bi % 2;
            let sub = self.submit(design, &slots[si], first, n, max_groups)?;
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

    fn drain(&self, sub: wgpu::SubmissionIndex) -> Result<(), GpuError> {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(sub),
                timeout: Some(WAIT),
            })
            .map_err(|e| GpuError::Device(e.to_string()))?;
        self.check()
    }

    fn submit(
        &self,
        d: &Design,
        slot: &Slot,
        first: u64,
        n: u32,
        max_groups: u32,
    ) -> Result<wgpu::SubmissionIndex, GpuError> {
        let prog = first / d.points;
        let mi = first % d.points;
        let params: [u32; 12] = [
            prog as u32,
            mi as u32,
            n,
            d.points as u32,
            d.n_axes,
            d.axis_start,
            d.n_targets,
            d.target_start,
            d.sampling,
            d.seed,
            d.rederive,
            d.divide,
        ];
        let groups = n.div_ceil(WORKGROUP);
        let x = groups.min(max_groups);
        let y = groups.div_ceil(x);
        if y > self.max_groups {
            return Err(GpuError::Unsupported(format!(
                "{n} points need {groups} workgroups, more than {x} × {} dispatches",
                self.max_groups
            )));
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        self.queue
            .write_buffer(&slot.params, 0, bytemuck::cast_slice(&params));
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("sweep"),
            });
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("eval"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &slot.bind, &[]);
            pass.dispatch_workgroups(x, y, 1);
        }
        let bytes = n as u64 * (OUT_WORDS * 4) as u64;
        enc.copy_buffer_to_buffer(&slot.out, 0, &slot.staging, 0, bytes);
        let sub = self.queue.submit([enc.finish()]);
        scope_error(pollster::block_on(scope.pop()))?;
        self.check()?;
        Ok(sub)
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
        let slice = slot.staging.slice(..bytes);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(sub),
                timeout: Some(WAIT),
            })
            .map_err(|e| GpuError::Device(format!("waiting for the GPU: {e}")))?;
        self.check()?;
        match rx.recv_timeout(WAIT) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(GpuError::Device(format!("reading results back: {e}"))),
            Err(_) => return Err(GpuError::Device("the results never came back".into())),
        }
        let keep_going = {
            let view = slice
                .get_mapped_range()
                .map_err(|e| GpuError::Device(format!("reading results back: {e}")))?;
            let words: &[f32] = bytemuck::cast_slice(&view);
            sink(first, words)
        };
        slot.staging.unmap();
        Ok(keep_going)
    }
}

//! What the integration tests share: the shipped files read from the crate root, whatever the
//! working directory, and the `tessera` binary run from there (`use crate::common;` in a module of
//! `tests/it`).

#![allow(clippy::disallowed_methods, clippy::disallowed_types, dead_code)] // a test helper: may use the disk

use tessera::spec::Fs;

/// The crate's files, by path relative to its root.
pub struct CrateFs;

impl Fs for CrateFs {
    fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
            .map_err(|e| e.to_string())
    }
}

/// The crate root, where the shipped files are.
pub fn root() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Run the `tessera` binary with `args` from the crate root (so paths read and print as the
/// shipped files' do).
pub fn tessera(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run tessera")
}

/// [`tessera`], which must exit 0: the panic message carries the command and its stderr.
pub fn tessera_ok(args: &[&str]) -> std::process::Output {
    let out = tessera(args);
    assert!(
        out.status.success(),
        "tessera {} exited {:?}; stderr:\n{}",
        args.join(" "),
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Run `tessera ARGS`, which must fail as invalid input (exit 1) with each of `wants` on stderr.
pub fn refused(args: &[&str], wants: &[&str]) {
    let out = tessera(args);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    for w in wants {
        assert!(err.contains(w), "{args:?}: no `{w}` in {err}");
    }
}

/// The stdout of `tessera ARGS...` (run as `out`) as JSON; panics with its stderr when it is not.
pub fn stdout_json(args: &[&str], out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "tessera {}: stdout is not JSON ({e}); stderr:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Where this test process writes its files: a folder of its own in cargo's scratch folder for
/// integration tests (`target/tmp`, so nothing lands in the system's `/tmp`), removed when the
/// process exits, passed or failed (`TESSERA_KEEP_SCRATCH=1` keeps it, to look at a failure).
static SCRATCH: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

fn scratch_root() -> &'static std::path::Path {
    SCRATCH.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("tessera-tests-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        #[cfg(unix)]
        if std::env::var_os("TESSERA_KEEP_SCRATCH").is_none() {
            extern "C" fn remove() {
                if let Some(d) = SCRATCH.get() {
                    let _ = std::fs::remove_dir_all(d);
                }
            }
            // SAFETY: `remove` is a plain function that lives as long as the process; the C
            // library runs it at `exit`, after the test harness is done with every thread.
            unsafe {
                libc::atexit(remove);
            }
        }
        dir
    })
}

/// A fresh folder of its own under this process's scratch folder, for a test that must write a
/// file to disk. Tests run on parallel threads of one process and several write files of the same
/// name: a folder per call keeps one test from reading a file another is rewriting.
pub fn scratch_dir(prefix: &str) -> std::path::PathBuf {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = scratch_root().join(format!("{prefix}-{call}"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A system and a workload from their file text, loaded as `tessera` loads files (in memory);
/// panics with the diagnostics where either has any.
pub fn load_texts(
    system: &str,
    workload: &str,
) -> (
    tessera::model::system::System,
    tessera::model::workload::Workload,
) {
    let mut fs = tessera::model::system::MemFs::default();
    fs.0.insert("s.ron".into(), system.as_bytes().to_vec());
    fs.0.insert("w.ron".into(), workload.as_bytes().to_vec());
    let s = tessera::model::system::load_system("s.ron", &fs);
    assert!(s.diagnostics.is_empty(), "{:?}", s.diagnostics);
    let w = tessera::model::workload::load_workload("w.ron", &fs);
    assert!(w.diagnostics.is_empty(), "{:?}", w.diagnostics);
    (s.value.unwrap(), w.value.unwrap())
}

/// A GPT-like 13B transformer trained at sequence 2048, global batch 64, to 1e9 tokens: the
/// engine tests' workload.
pub const GPT_13B_TRAINING: &str = r#"Workload(
    version: 1, name: "gpt-like 13B", source: "t", sources: { "t": "test fixture" },
    model: Transformer(layers: 40, hidden: 5120, heads: 40, vocab: 51200),
    task: Training(seq_len: 2048, global_batch: 64, target: Tokens(1e9)),
)"#;

/// A collective between devices, `inner` ranks inside each scale-up domain × `outer` domains,
/// exposed in the micro-batch section, with its coefficients settled (`Comm::with_coeffs`).
pub fn comm(
    kind: tessera::engine::program::CollKind,
    bytes: f64,
    inner: f64,
    outer: f64,
) -> tessera::engine::program::Comm {
    use tessera::engine::program::{Comm, Overlap, Role, Section};
    Comm {
        name: "c".into(),
        role: Role::Other,
        kind,
        bytes,
        inner,
        outer,
        count: 1.0,
        section: Section::MicroBatch,
        overlap: Overlap::None,
        weight_stream: false,
        host: false,
        inner_share: 1.0,
        mesh: 0.0,
        coeffs: Default::default(),
        form: tessera::engine::program::Form::Both,
    }
    .with_coeffs()
}

/// One node of eight 989-TFLOP/s (bf16) GPUs of 80 GB on a 900 GB/s switch: the lowering tests'
/// system.
pub const NODE_8: &str = r#"System(
    version: 1, name: "test node", source: "t", sources: { "t": "test fixture" },
    device: Device(
        name: "gpu", source: "t",
        die: Die(name: "die", source: "t", compute: [(name: "tc", kind: Matrix, peak: { "bf16": "989.4 TFLOP/s", "fp8": "1978.9 TFLOP/s" })]),
        memory: [(name: "HBM", kind: Hbm, attach: Package, capacity: "80 GB", bandwidth: "3.35 TB/s")],
        tdp: "700 W", idle_power: "100 W",
        efficiency: (matmul: "0.7", memory: "0.9", network: "0.8", kernel_overhead: "2 us"),
    ),
    node: Node(name: "node", source: "t", devices: 8, host: (cpus: 2, cpu_tdp: "350 W"), other_power: "1 kW"),
    nodes: 1,
    scale_up: (name: "nvlink", topology: Switched, size: 8, bandwidth: "900 GB/s", counted: BothDirections, latency: "2 us"),
    facility: (pue: "1.2"),
)"#;

/// Four nodes of eight 160 GB GPUs with 1 TB of host DDR at 400 GB/s, each GPU on its own PCIe link of
/// 64 GB/s per direction: a GPU's host bandwidth is min(64, 400 / 8) = 50 GB/s, its host memory
/// 1 TB / 8 = 125 GB.
pub const HOST_NODES: &str = r#"System(
    version: 1, name: "offload fixture", source: "t", sources: { "t": "test fixture" },
    device: Device(
        name: "gpu", source: "t",
        die: Die(name: "die", source: "t", compute: [(name: "tc", kind: Matrix, peak: { "bf16": "989.4 TFLOP/s" })]),
        memory: [(name: "HBM", kind: Hbm, attach: Package, capacity: "160 GB", bandwidth: "3.35 TB/s")],
        tdp: "700 W", idle_power: "100 W",
        efficiency: (matmul: "0.7", memory: "0.9", network: "1.0", kernel_overhead: "2 us"),
    ),
    node: Node(name: "node", source: "t", devices: 8, host: (cpus: 2, cpu_tdp: "350 W"),
        memory: [(name: "DDR", kind: Dram, attach: Node, capacity: "1 TB", bandwidth: "400 GB/s")],
        host_link: (name: "PCIe", bandwidth: "64 GB/s", counted: PerDirection, latency: "1 us", energy_per_bit: "5 pJ/bit"),
        other_power: "1 kW"),
    nodes: 4,
    scale_up: (name: "nvlink", topology: Switched, size: 8, bandwidth: "900 GB/s", counted: BothDirections, latency: "2 us"),
    scale_out: (name: "ib", topology: FatTree, bandwidth: "400 Gb/s", latency: "5 us"),
    facility: (pue: "1.2"),
)"#;

/// [`HOST_NODES`]' host link, to take it out.
pub const HOST_LINK: &str = r#"host_link: (name: "PCIe", bandwidth: "64 GB/s", counted: PerDirection, latency: "1 us", energy_per_bit: "5 pJ/bit"),"#;

/// 8 layers, all with 8 routed experts of 768 (top-2, gated), no shared expert, trained at
/// sequence 4096, global batch 16; `{moe}` is replaced by further `experts` clauses (routing
/// under test) or nothing.
pub const MOE_8_EXPERTS: &str = r#"Workload(
    version: 1, name: "test", source: "t", sources: { "t": "test fixture" },
    model: Transformer(layers: 8, hidden: 2048, heads: 32, kv_heads: 4, ffn: 6144, gated_ffn: true, vocab: 32000,
        experts: (count: 8, top_k: 2, ffn: 768{moe})),
    task: Training(seq_len: 4096, global_batch: 16, target: Steps(10), flash_attention: true, dropout: false),
)"#;

/// [`MOE_8_EXPERTS`] with `moe` for its `{moe}`, on [`NODE_8`] at dp 8, expert parallelism
/// `ep`, ZeRO 1, micro-batch 1: the program and its step time.
pub fn moe_program(moe: &str, ep: u64) -> (tessera::engine::program::Program, f64) {
    let (sys, w) = load_texts(NODE_8, &MOE_8_EXPERTS.replace("{moe}", moe));
    let m = tessera::model::mapping::Mapping {
        dp: 8,
        ep,
        zero: 1,
        micro_batch: 1,
        ..tessera::model::mapping::Mapping::single()
    };
    let p = tessera::engine::lower::lower(&sys, &w, &m, 8).unwrap_or_else(|r| panic!("{r}"));
    let t = tessera::engine::cpu::eval(&p, &tessera::engine::lower::machine(&sys, 8)).step_time;
    (p, t)
}

/// Bytes per device per step of `comms`, collectives of `p`: each piece's bytes × its count ×
/// the micro-batches per step where it runs every micro-batch.
pub fn bytes_per_step<'a>(
    p: &tessera::engine::program::Program,
    comms: impl IntoIterator<Item = &'a tessera::engine::program::Comm>,
) -> f64 {
    comms
        .into_iter()
        .map(|c| {
            let per = match c.section {
                tessera::engine::program::Section::MicroBatch => p.micro_batches,
                tessera::engine::program::Section::Step => 1.0,
            };
            c.bytes * c.count * per
        })
        .sum()
}

/// `NODE_8` with a GEMM tiling on its die: `units` units of 128 × 128 output tiles.
pub fn tiled_node(units: u32) -> String {
    NODE_8
        .replace(
            r#"die: Die(name: "die", source: "t","#,
            &format!(r#"die: Die(name: "die", source: "t", cores: {units},"#),
        )
        .replace(
            r#"kernel_overhead: "2 us")"#,
            r#"kernel_overhead: "2 us", tiling: (tiles: [(128, 128)], source: "t"))"#,
        )
}

/// The occupancy of the operator `name` in `phase` of a program.
pub fn occupancy_of(
    p: &tessera::engine::program::Program,
    name: &str,
    phase: tessera::engine::program::Phase,
) -> f64 {
    p.ops
        .iter()
        .find(|o| o.name == name && o.phase == phase)
        .unwrap_or_else(|| panic!("no {name}"))
        .occupancy
}

/// An H100 SXM reduced to the numbers the engine's hand-checked tests need: 989.4 TFLOP/s dense
/// bf16 (133.8 TFLOP/s on the vector units), 3.35 TB/s HBM3, 450 GB/s NVLink per direction, a
/// 50 GB/s NIC, a 25 GB/s host link with 1 TB behind it, 700 W TDP and 100 W idle, every
/// efficiency 1, no latencies, no launch overhead.
pub fn h100() -> tessera::engine::table::Machine {
    use tessera::engine::table as t;
    use tessera::model::precision::{Precision, NPREC};
    let mut peak = [0.0; NPREC];
    peak[Precision::Bf16.index()] = 989.4e12;
    let mut vec = [0.0; NPREC];
    vec[Precision::Bf16.index()] = 133.8e12;
    let mut m = t::Machine::zero();
    m.set_row(t::MATRIX_PEAK, &peak);
    m.set_row(t::VECTOR_PEAK, &vec);
    for e in [
        t::EFF_MATMUL,
        t::EFF_LOW_PRECISION,
        t::EFF_VECTOR,
        t::EFF_MEMORY,
        t::EFF_NETWORK,
    ] {
        m[e] = 1.0;
    }
    m[t::HBM_CAPACITY] = 80e9;
    m[t::HBM_BANDWIDTH] = 3.35e12;
    m[t::UP_BANDWIDTH] = 450e9;
    m[t::OUT_BANDWIDTH] = 50e9;
    m[t::HOST_BANDWIDTH] = 25e9;
    m[t::HOST_CAPACITY] = 1e12;
    m[t::TDP] = 700.0;
    m[t::IDLE_POWER] = 100.0;
    m[t::PUE] = 1.0;
    m
}

/// One compute-bound GEMM of `secs` seconds at 989.4 TFLOP/s in `phase` and `section`.
pub fn timed_gemm(
    secs: f64,
    phase: tessera::engine::program::Phase,
    section: tessera::engine::program::Section,
) -> tessera::engine::program::Op {
    use tessera::engine::program::{Form, Op};
    use tessera::model::precision::Precision;
    let flops = 2.0 * 8192f64.powi(3);
    Op {
        name: "gemm".into(),
        matrix: true,
        precision: Precision::Bf16.index(),
        flops,
        occupancy: 1.0,
        weight_bytes: 8192.0 * 8192.0 * 2.0,
        act_bytes: 2.0 * 8192.0 * 8192.0 * 2.0,
        count: secs / (flops / 989.4e12),
        section,
        phase,
        form: Form::Both,
    }
}

/// A micro-batch of `fwd` and `bwd` seconds of GEMMs ([`timed_gemm`], on [`h100`]), an update of
/// `upd` seconds once per step, `mbs` micro-batches a step, and the collectives `comms`.
pub fn timed_program(
    fwd: f64,
    bwd: f64,
    upd: f64,
    mbs: f64,
    comms: Vec<tessera::engine::program::Comm>,
) -> tessera::engine::program::Program {
    use tessera::engine::program::{Footprint, Phase, Program, Section};
    use tessera::model::precision::Precision;
    let mb = Section::MicroBatch;
    Program {
        ops: vec![
            timed_gemm(fwd, Phase::Forward, mb),
            timed_gemm(bwd, Phase::Backward, mb),
            timed_gemm(upd, Phase::Update, Section::Step),
        ],
        comms,
        stages: Vec::new(),
        micro_batches: mbs,
        bubble: 0.0,
        footprint: Footprint::default(),
        devices: 1.0,
        units_per_step: 1.0,
        unit: "samples",
        model_flops_per_step: 1.0,
        mfu_precision: Precision::Bf16.index(),
        steps: None,
        host_steps: 0.0,
    }
}

/// FLOPs a training program's recomputation re-runs per micro-batch on one device.
pub fn recomputed_flops(p: &tessera::engine::program::Program) -> f64 {
    p.ops
        .iter()
        .filter(|o| o.phase == tessera::engine::program::Phase::Recompute)
        .map(|o| o.flops * o.count)
        .sum()
}

/// The step time of program `p` on the system of file text `system` with `devices` devices.
pub fn step_time_on(system: &str, p: &tessera::engine::program::Program, devices: u64) -> f64 {
    let mut fs = tessera::model::system::MemFs::default();
    fs.0.insert("s.ron".into(), system.as_bytes().to_vec());
    let s = tessera::model::system::load_system("s.ron", &fs);
    assert!(s.diagnostics.is_empty(), "{:?}", s.diagnostics);
    let sys = s.value.unwrap();
    tessera::engine::cpu::eval(p, &tessera::engine::lower::machine(&sys, devices)).step_time
}

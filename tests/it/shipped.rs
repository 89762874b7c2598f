//! The shipped architecture files and the starter templates: every system under `architectures/`
//! loads with no error and no warning, every part file checks clean, the flagship systems add up to
//! their published totals (within 2%), and every `tessera new` template renders to a clean file.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use crate::common;

use approx::assert_relative_eq;
use tessera::check::{check_file, kind_of};
use tessera::diag::Diagnostic;
use tessera::model::system::{load_system, MemFs, System};
use tessera::report::system::{summarize, SystemSummary};
use tessera::spec::{Files, Fs};
use tessera::templates::{render, Template};

use crate::common::root;

/// `.ron` files directly under `dir` (relative to the crate root), sorted.
fn ron_files(dir: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "ron"))
        .map(|p| format!("{dir}/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    out.sort();
    out
}

fn rendered(files: &Files, diags: &[Diagnostic]) -> String {
    diags
        .iter()
        .map(|d| d.render(files.text_of(&d.file)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Load a system with `fs`, failing on any diagnostic (errors and warnings alike).
fn load_clean(path: &str, fs: &dyn Fs) -> System {
    let loaded = load_system(path, fs);
    assert!(
        loaded.diagnostics.is_empty(),
        "{path} has diagnostics:\n{}",
        rendered(&loaded.files, &loaded.diagnostics)
    );
    loaded.value.unwrap_or_else(|| panic!("{path}: no system"))
}

fn shipped(path: &str) -> (System, SystemSummary) {
    let s = load_clean(path, &common::CrateFs);
    let sum = summarize(&s);
    (s, sum)
}

fn peak(sum: &SystemSummary, precision: &str) -> f64 {
    *sum.peak_flops_per_s
        .get(precision)
        .unwrap_or_else(|| panic!("{}: no {precision} peak", sum.name))
}

fn capacity(sum: &SystemSummary, level: &str) -> f64 {
    *sum.memory_capacity_bytes
        .get(level)
        .unwrap_or_else(|| panic!("{}: no memory level `{level}`", sum.name))
}

fn bandwidth(sum: &SystemSummary, level: &str) -> f64 {
    *sum.memory_bandwidth_bytes_per_s
        .get(level)
        .unwrap_or_else(|| panic!("{}: no memory level `{level}`", sum.name))
}

// ---------------------------------------------------------------------------------------------
// 1. Everything shipped loads clean.

#[test]
fn every_shipped_system_loads_without_errors_or_warnings() {
    let mut systems = 0;
    for f in ron_files("architectures") {
        let text = std::fs::read_to_string(root().join(&f)).unwrap();
        if kind_of(&text).as_deref() != Some("System") {
            continue;
        }
        let s = load_clean(&f, &common::CrateFs);
        // `check` agrees: no energy figure of the device or its links left unset.
        let (files, diags) = check_file(&f, &common::CrateFs);
        assert!(diags.is_empty(), "{f}:\n{}", rendered(&files, &diags));
        systems += 1;
        // Basic sanity on what every system must have.
        assert!(s.devices >= 1, "{f}");
        let sum = summarize(&s);
        assert!(
            sum.peak_flops_per_s.values().any(|v| *v > 0.0),
            "{f}: no compute"
        );
        assert!(sum.power_w > 0.0, "{f}: no power");
        if let Some(lim) = sum.power_limit_w {
            assert!(
                sum.power_w <= lim * 1.0001,
                "{f}: rated power above its limit"
            );
        }
    }
    // gb200-nvl72 plus the systems this suite ships.
    assert!(systems >= 24, "only {systems} systems found");
}

#[test]
fn every_part_file_checks_clean() {
    let parts = ron_files("architectures/parts");
    assert!(parts.len() >= 20, "only {} part files", parts.len());
    for f in parts {
        let (files, diags) = check_file(&f, &common::CrateFs);
        assert!(
            diags.is_empty(),
            "{f} has diagnostics:\n{}",
            rendered(&files, &diags)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 2. GB200 NVL72 against its published rack totals.

#[test]
fn gb200_nvl72_matches_published_rack_totals() {
    let (_, sum) = shipped("architectures/gb200-nvl72.ron");
    // 72 GPUs in 18 compute trays of 4 (setloop.io NVL72 guide; MLPerf JSON accelerators_per_node=4).
    assert_eq!(sum.accelerators, 72);
    // "130 TB/s" NVLink aggregate = 72 x 1.8 TB/s (datacrunch blog; aiwiki; setloop).
    let nvlink = sum
        .scale_up
        .as_ref()
        .expect("scale-up")
        .aggregate_bytes_per_s;
    assert_relative_eq!(nvlink, 130e12, max_relative = 0.02);
    // 13.4 TB of HBM3e per rack (aiwiki; introl).
    assert_relative_eq!(capacity(&sum, "HBM3e"), 13.4e12, max_relative = 0.02);
    // 720 PFLOP/s FP8 "with sparsity" = 360 PFLOP/s dense (aiwiki; 72 x 5 PFLOP/s dense per
    // GPU from the glennklockwood B200 page, GB200 column).
    assert_relative_eq!(peak(&sum, "fp8"), 360e15, max_relative = 0.02);
    // 576 TB/s of HBM bandwidth per rack (aiwiki; introl).
    assert_relative_eq!(bandwidth(&sum, "HBM3e"), 576e12, max_relative = 0.02);
}

// ---------------------------------------------------------------------------------------------
// 3. A wafer-scale and a near-memory system against their published totals.

#[test]
fn cerebras_cs3_matches_published_wafer_totals() {
    let (s, sum) = shipped("architectures/cerebras-cs3.ron");
    assert_eq!(sum.accelerators, 1);
    // Cerebras counts 900,000 cores on the WSE-3 (tomshardware WSE-3 article; Argonne AI-testbed
    // tutorial); a program gets the 755 x 1170 rectangle of the SDK's 762 x 1172 CS-3 fabric
    // (MeshInfra/WaferLLM's WSE-3 compile.py; the memcpy edge of Cerebras/csl-examples), 98 % of
    // them.
    assert_eq!(s.device.cores, 755 * 1170);
    // 44 GB of on-wafer SRAM (tweaktown WSE-3; Argonne tutorial page).
    assert_relative_eq!(capacity(&sum, "SRAM"), 44e9, max_relative = 0.02);
    // 21 PB/s of SRAM bandwidth (tweaktown WSE-3; Argonne tutorial page).
    assert_relative_eq!(bandwidth(&sum, "SRAM"), 21e15, max_relative = 0.02);
    // The on-wafer mesh spans every core.
    let mesh = s.device.mesh.as_ref().expect("mesh");
    assert_eq!(mesh.dims.iter().product::<u64>(), s.device.cores);
    // 125 PFLOP/s "peak AI" is a sparse figure; the file divides by 8, well below the headline.
    let fp16 = peak(&sum, "fp16");
    assert!(fp16 < 125e15 / 4.0 && fp16 > 125e15 / 16.0, "{fp16}");
    // Weights stream from MemoryX over SwarmX, which reduces gradients in flight.
    assert!(s.weight_store.is_some());
    assert!(sum.scale_out.as_ref().expect("SwarmX").in_network_reduction);
}

#[test]
fn cerebras_cs2_matches_published_wafer_totals() {
    let (s, sum) = shipped("architectures/cerebras-cs2.ron");
    // Cerebras counts 850,000 cores with 48 KB of SRAM each (WaferLLM, OSDI'25, section 7); a
    // program gets the 750 x 994 rectangle of the SDK's 757 x 996 CS-2 fabric (MeshInfra/WaferLLM's
    // WSE-2 compile.py; Cerebras/csl-examples single-tile-matvec), and the device is that.
    assert_eq!(s.device.cores, 750 * 994);
    let usable = s.device.cores as f64 / 850_000.0;
    // The published wafer totals, over the cores a program gets: 40 GB of SRAM (AnandTech;
    // WaferLLM: 850,000 x 48 KB = 40.8 GB), 20 PB/s of SRAM bandwidth (AnandTech WSE-2), and
    // 120 PFLOP/s dense FP16 for the 16 CS-2 of Andromeda (Tom's Hardware) = 7.5 per CS-2.
    assert_relative_eq!(capacity(&sum, "SRAM"), 40e9 * usable, max_relative = 0.025);
    assert_relative_eq!(bandwidth(&sum, "SRAM"), 20e15 * usable, max_relative = 0.02);
    assert_relative_eq!(peak(&sum, "fp16"), 7.5e15 * usable, max_relative = 0.02);
}

#[test]
fn northpole_288_matches_published_rack_totals() {
    let (_, sum) = shipped("architectures/northpole-288.ron");
    // 288 cards in 18 x 2U servers (DeBole et al., arXiv 2511.15950).
    assert_eq!(sum.accelerators, 288);
    assert_eq!(sum.nodes, 18);
    // 115 peta-ops INT4 (arXiv 2511.15950 abstract).
    assert_relative_eq!(peak(&sum, "int4"), 115e15, max_relative = 0.02);
    // 3.7 PB/s of memory bandwidth (arXiv 2511.15950 abstract).
    assert_relative_eq!(
        bandwidth(&sum, "core memory (on-chip)"),
        3.7e15,
        max_relative = 0.02
    );
    // 30 kW for the rack (arXiv 2511.15950 abstract).
    assert_relative_eq!(sum.power_w, 30e3, max_relative = 0.02);
}

#[test]
fn northpole_16_card_appliance_draws_672_w_in_cards() {
    let (s, sum) = shipped("architectures/northpole-16.ron");
    // 16 cards draw 672 W (Appuswamy et al., IEEE HPEC 2024): their static power alone stays
    // below it, and their limit is no longer that figure over 16 but at least the 74 W one card
    // drew on ResNet-50 (Science 2023; the two points fix the card's power figures, issue 41,
    // tests/it/near_memory.rs).
    assert_eq!(sum.accelerators, 16);
    assert!(s.device.idle_power * 16.0 < 672.0);
    assert!(s.device.tdp >= 74.0);
    assert!((s.device.tdp * 16.0 - 672.0).abs() > 0.02 * 672.0);
}

#[test]
fn tpu_v4_pod_matches_published_pod_totals() {
    let (_, sum) = shipped("architectures/tpu-v4-pod.ron");
    // 4,096 chips per pod (cloud.google.com/tpu/docs/v4).
    assert_eq!(sum.accelerators, 4096);
    // "1.1 exaflops" per pod (same page; 4,096 x 275 TFLOP/s = 1.126 EFLOP/s, so 3% for rounding).
    assert_relative_eq!(peak(&sum, "bf16"), 1.1e18, max_relative = 0.03);
    // 24 TB/s bisection bandwidth per pod (same page).
    let ici = sum.scale_up.as_ref().expect("ICI");
    assert_relative_eq!(ici.bisection_bytes_per_s, 24e12, max_relative = 0.02);
}

#[test]
fn cluster_sizes_hold_the_published_runs() {
    // Megatron-LM on Selene used up to 3,072 A100 (Narayanan et al. 2021).
    let (_, sum) = shipped("architectures/selene-a100.ron");
    assert!(sum.accelerators >= 3072);
    // MLPerf v5.0 Llama 3.1 405B on 8,192 H100 (Eos-dfw, 1,024 nodes).
    let (_, sum) = shipped("architectures/eos-h100.ron");
    assert_eq!(sum.accelerators, 8192);
    // MLPerf v5.0 Llama 3.1 405B on 2,496 GB200 (carina) and 512 GB200 (Tyche) runs.
    let (s, sum) = shipped("architectures/gb200-cluster.ron");
    assert!(sum.accelerators >= 2496);
    assert_eq!(s.scale_up_size(), 72);
    // PowerAI DDL: 64 Minsky servers, 256 P100 (Cho et al., arXiv:1708.02188).
    let (_, sum) = shipped("architectures/ibm-minsky-64.ron");
    assert_eq!(sum.accelerators, 256);
}

// ---------------------------------------------------------------------------------------------
// 4. Every starter template renders to a clean file.

#[test]
fn every_template_renders_to_a_clean_system() {
    for (t, file) in [
        (Template::GpuNode, "gpu-node.ron"),
        (Template::NvlRack, "nvl-rack.ron"),
        (Template::Wafer, "wafer.ron"),
        (Template::NearMemory, "near-memory.ron"),
    ] {
        // A name with characters that need escaping inside a RON string.
        let name = format!("My \"{file}\" system \\ v1");
        let text = render(t, &name);
        assert!(!text.contains("{{NAME}}"), "{file}: placeholder left");
        let mut fs = MemFs::default();
        fs.0.insert(file.to_string(), text.into_bytes());
        let s = load_clean(file, &fs);
        assert_eq!(s.name, name, "{file}");
        let sum = summarize(&s);
        assert!(sum.peak_flops_per_s.values().any(|v| *v > 0.0), "{file}");
        // check_file agrees.
        let (files, diags) = check_file(file, &fs);
        assert!(diags.is_empty(), "{file}:\n{}", rendered(&files, &diags));
    }
}

#[test]
fn every_sweep_file_checks_clean_and_a_bad_path_is_located() {
    // The shipped sweeps build their plans (architecture, workload, mapping, every path) cleanly.
    let mut n = 0;
    for e in std::fs::read_dir("architectures/sweeps").unwrap() {
        let p = e.unwrap().path().to_string_lossy().into_owned();
        let (_, diags) = tessera::check::check_file(&p, &common::CrateFs);
        assert!(diags.is_empty(), "{p}: {diags:?}");
        n += 1;
    }
    assert!(n >= 2);
    // A misspelt parameter path is an error at its line, with the right spelling as a hint.
    let text =
        std::fs::read_to_string(root().join("architectures/sweeps/gb200-cluster-random.ron"))
            .unwrap()
            .replace("\"scale_up.bandwidth\"", "\"scale_up.bandwith\"")
            .replace("\"../", &format!("\"{}/architectures/", root().display()));
    let line = text.lines().position(|l| l.contains("bandwith")).unwrap() + 1;
    let path = common::scratch_dir("tessera-bad-sweep").join("bad-sweep.ron");
    std::fs::write(&path, text).unwrap();
    let (_, diags) = tessera::check::check_file(path.to_str().unwrap(), &common::CrateFs);
    let d = diags
        .iter()
        .find(|d| d.message.contains("scale_up.bandwith"))
        .expect("located error");
    assert_eq!(d.pos.map(|p| p.line), Some(line));
    assert!(d
        .hint
        .as_deref()
        .unwrap_or("")
        .contains("scale_up.bandwidth"));
}

/// Issue 12: what `show` adds up against the power the vendors publish for the whole system. A
/// node's rated power (its devices at TDP, hosts, NICs, other parts and its share of the
/// scale-up switches) stays at or below the published maximum the file states as its
/// `power_limit` (which also provisions for what no file itemises: power-supply conversion
/// losses, fans at full speed), and within a fifth of it: a device or part left out or entered
/// at a tenth of its figure shows as a node far below its vendor's rating. Today: NVL72 108 kW of
/// 132 kW (0.82), DGX H100 8.98 of 10.2 kW (0.88), DGX B200 11.8 of 14.3 kW (0.83), CS-3 23 of 23 kW.
#[test]
fn shown_node_power_stays_within_a_fifth_of_the_published_system_power() {
    // (file, the published figure, whether it rates a rack (scale-up domain) or a node)
    let cases = [
        // GB200 NVL72: 132 kW of power shelves per rack
        ("architectures/gb200-nvl72.ron", 132e3, true),
        // DGX H100: 10.2 kW maximum system input (six 3.3 kW supplies)
        ("architectures/dgx-h100.ron", 10.2e3, false),
        // DGX B200: 14.3 kW
        ("architectures/dgx-b200.ron", 14.3e3, false),
        // CS-3: about 23 kW for the system (MemoryX's servers counted apart; the chassis's own
        // parts are derived from this figure, so here it checks the derivation)
        ("architectures/cerebras-cs3.ron", 23e3, false),
    ];
    for (f, published, rack) in cases {
        let s = load_clean(f, &common::CrateFs);
        let (limit, units) = if rack {
            let domains = s.devices as f64 / s.scale_up_size() as f64;
            (s.scale_up.as_ref().and_then(|d| d.power_limit), domains)
        } else {
            (s.node.power_limit, s.nodes as f64)
        };
        assert_relative_eq!(
            limit.expect("a published limit"),
            published,
            max_relative = 1e-9
        );
        let parts = s.rated_parts();
        let rated =
            (s.device.tdp * s.devices as f64 + parts.node + parts.scale_up_switches) / units;
        let share = rated / published;
        assert!(
            (0.8..=1.0).contains(&share),
            "{f}: rated {rated:.0} W is {share:.3} of the published {published:.0} W"
        );
    }
}

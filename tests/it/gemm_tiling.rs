//! Tile and wave quantization (`engine::tiling`): hand counts from NVIDIA's Matrix
//! Multiplication Background guide (an A100's 108 SMs, 256 × 128 tiles), the split-K rule, the
//! laws (occupancy in (0, 1]; a larger product never finishes sooner; more units at the same
//! per-unit rate never slower), and the lowering: a device without a tiling is the old program to
//! the bit, one with a tiling gives each matrix operator its products' occupancy and is never
//! faster.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // not the library: may use the disk

use approx::assert_relative_eq;
use proptest::prelude::*;
use tessera::engine::program::{Phase, Program};
use tessera::engine::tiling::{Gemm, Tiling};

use crate::common;

const A100_256X128: Tiling<'static> = Tiling {
    units: 108.0,
    tiles: &[(256, 128)],
};

/// The guide's tile list (`architectures/parts/*.ron`, `nv-gemm-tiles`).
const CUBLAS_TILES: &[(u32, u32)] = &[
    (256, 128),
    (128, 256),
    (128, 128),
    (256, 64),
    (64, 256),
    (128, 64),
    (64, 128),
    (64, 64),
];

#[test]
fn the_guides_wave_example() {
    // 1792 × 1792 in 256 × 128 tiles: 7 × 14 = 98 tiles, one wave of 108 SMs (K too short to
    // split: 64 < 2 × 128)
    assert_relative_eq!(
        A100_256X128.occupancy(Gemm::new(1792.0, 1792.0, 64.0)),
        98.0 / 108.0,
        max_relative = 1e-12
    );
    // 108 tiles fill the wave exactly; one column of tiles more starts a second wave that only
    // 9 of them use
    assert_eq!(
        A100_256X128.occupancy(Gemm::new(9.0 * 256.0, 12.0 * 128.0, 64.0)),
        1.0
    );
    assert_relative_eq!(
        A100_256X128.occupancy(Gemm::new(9.0 * 256.0, 13.0 * 128.0, 64.0)),
        117.0 / 216.0,
        max_relative = 1e-12
    );
}

#[test]
fn tile_quantization_pads_the_last_tile() {
    let one = Tiling {
        units: 1.0,
        tiles: &[(256, 128)],
    };
    // 257 rows take two tiles of 256, one of them holding a single row
    assert_relative_eq!(
        one.occupancy(Gemm::new(257.0, 128.0, 64.0)),
        257.0 / 512.0,
        max_relative = 1e-12
    );
    // the library takes the tile that finishes first: 128 × 128 pads 257 rows to 384
    let two = Tiling {
        units: 1.0,
        tiles: &[(256, 128), (128, 128)],
    };
    assert_relative_eq!(
        two.occupancy(Gemm::new(257.0, 128.0, 64.0)),
        257.0 / 384.0,
        max_relative = 1e-12
    );
}

#[test]
fn split_k_fills_a_wave_in_whole_k_steps() {
    let h100 = Tiling {
        units: 132.0,
        tiles: &[(64, 64)],
    };
    // one 64 × 64 tile: split 16 ways over K = 4096 (slices of 256), 16 of 132 SMs busy
    assert_relative_eq!(
        h100.occupancy(Gemm::new(64.0, 64.0, 4096.0)),
        16.0 / 132.0,
        max_relative = 1e-12
    );
    // K = 255: four slices of one 64-deep step each (the last one short by one), not eight
    // (four of them would have no step to run)
    assert_relative_eq!(
        h100.occupancy(Gemm::new(64.0, 64.0, 255.0)),
        4.0 / 132.0 * 255.0 / 256.0,
        max_relative = 1e-12
    );
    // K = 100 unsplit pads to two steps; split in two, each slice pads one step to 64
    assert_relative_eq!(
        h100.occupancy(Gemm::new(64.0, 64.0, 100.0)),
        2.0 / 132.0 * 100.0 / 128.0,
        max_relative = 1e-12
    );
    // a grid that fills a wave is not split: 132 tiles over K = 64 × 1000 take one wave
    assert_eq!(h100.occupancy(Gemm::new(64.0 * 132.0, 64.0, 64_000.0)), 1.0);
    // 133 tiles take two waves, the second one tile: no split to even them out
    assert_relative_eq!(
        h100.occupancy(Gemm::new(64.0 * 133.0, 64.0, 64_000.0)),
        133.0 / 264.0,
        max_relative = 1e-12
    );
}

#[test]
fn a_row_blocked_kernel_tiles_its_rows_only() {
    // FlashAttention: 8 heads × 1 sequence × 1000 queries in blocks of 128: 64 blocks, 132 SMs
    let t = Tiling {
        units: 132.0,
        tiles: &[(128, 128)],
    };
    assert_relative_eq!(
        t.occupancy(Gemm::rows(1000.0, 8.0)),
        8000.0 / (132.0 * 128.0),
        max_relative = 1e-12
    );
}

#[test]
fn several_products_take_their_time_weighted_mean() {
    let t = Tiling {
        units: 1.0,
        tiles: &[(256, 128)],
    };
    let (a, b) = (Gemm::new(256.0, 128.0, 64.0), Gemm::new(257.0, 128.0, 64.0));
    // equal FLOPs at occupancy 1 and 257/512: 2 / (1 + 512/257)
    assert_relative_eq!(
        t.mix(&[(1.0, a), (1.0, b)]),
        2.0 / (1.0 + 512.0 / 257.0),
        max_relative = 1e-12
    );
    assert_eq!(t.mix(&[]), 1.0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn occupancy_is_a_share_and_a_larger_product_never_finishes_sooner(
        m in 1u32..5000, n in 1u32..20000, k in 1u32..20000, groups in 1u32..64,
        dm in 0u32..600, dn in 0u32..600, dk in 0u32..600, units in 1u32..200,
    ) {
        let t = Tiling { units: units as f64, tiles: CUBLAS_TILES };
        let (m, n, k, g) = (m as f64, n as f64, k as f64, groups as f64);
        let o = t.occupancy(Gemm::grouped(m, n, k, g));
        prop_assert!(o > 0.0 && o <= 1.0, "occupancy {o}");
        // time ∝ work / occupancy at a fixed rate; more rows or columns never take less
        let time = |m: f64, n: f64, k: f64| m * n * k * g / t.occupancy(Gemm::grouped(m, n, k, g));
        let (m2, n2, k2) = (m + dm as f64, n + dn as f64, k + dk as f64);
        let t0 = time(m, n, k) * (1.0 - 1e-12);
        prop_assert!(time(m2, n, k) >= t0);
        prop_assert!(time(m, n2, k) >= t0);
        // nor a deeper one: split-K's slices are whole k-steps whatever K is
        prop_assert!(time(m, n, k2) >= t0);
    }

    #[test]
    fn more_units_at_the_same_rate_per_unit_are_never_slower(
        m in 1u32..5000, n in 1u32..20000, k in 1u32..20000, units in 1u32..200, more in 0u32..200,
    ) {
        // at a fixed rate per unit the device's rate grows with its units: the time is the work
        // over units × occupancy
        let time = |u: u32| {
            let t = Tiling { units: u as f64, tiles: CUBLAS_TILES };
            1.0 / (u as f64 * t.occupancy(Gemm::new(m as f64, n as f64, k as f64)))
        };
        prop_assert!(time(units + more) <= time(units) * (1.0 + 1e-12));
    }
}

/// `common::NODE_8` with a tiling of 10 units and 128 × 128 tiles on its die.
fn tiled_node() -> String {
    common::tiled_node(10)
}

/// A small transformer (hidden 256, 4 heads, FFN 1024, vocab 1000) trained at sequence 2048,
/// micro-batch 1, on one device.
const SMALL: &str = r#"Workload(
    version: 1, name: "small", source: "t", sources: { "t": "test fixture" },
    model: Transformer(layers: 4, hidden: 256, heads: 4, ffn: 1024, vocab: 1000),
    task: Training(seq_len: 2048, global_batch: 8, target: Steps(10), flash_attention: true, dropout: false),
)"#;

fn program(system: &str) -> (Program, f64) {
    let (sys, w) = common::load_texts(system, SMALL);
    let m = tessera::model::mapping::Mapping {
        micro_batch: 1,
        ..tessera::model::mapping::Mapping::single()
    };
    let p = tessera::engine::lower::lower(&sys, &w, &m, 1).unwrap_or_else(|r| panic!("{r}"));
    let t = tessera::engine::cpu::eval(&p, &tessera::engine::lower::machine(&sys, 1)).step_time;
    (p, t)
}

#[test]
fn a_device_without_a_tiling_runs_every_product_at_full_occupancy() {
    let (p, _) = program(common::NODE_8);
    assert!(p.ops.iter().all(|o| o.occupancy == 1.0));
}

#[test]
fn the_lowering_gives_each_product_its_shapes_occupancy() {
    let (p, tiled) = program(&tiled_node());
    // Q, K, V: 2048 tokens × 768 in 128 × 128 tiles = 16 × 6 = 96 tiles on 10 units: 10 waves
    // (the grid fills a wave, so K = 256 is not split)
    assert_relative_eq!(
        common::occupancy_of(&p, "qkv projection", Phase::Forward),
        0.96,
        max_relative = 1e-12
    );
    // its backward: the input gradient 2048 × 256 (16 × 2 = 32 tiles: 4 waves) and the weight
    // gradient 256 × 768 (2 × 6 = 12 tiles: 2 waves, the second of two), equal FLOPs each
    let (dgrad, wgrad) = (32.0 / 40.0, 12.0 / 20.0);
    assert_relative_eq!(
        common::occupancy_of(&p, "qkv projection", Phase::Backward),
        2.0 / (1.0 / dgrad + 1.0 / wgrad),
        max_relative = 1e-12
    );
    // attention: 4 heads × 2048 queries in blocks of 128 = 64 blocks on 10 units: 7 waves
    assert_relative_eq!(
        common::occupancy_of(&p, "attention scores + context", Phase::Forward),
        64.0 / 70.0,
        max_relative = 1e-12
    );
    // vector work is not tiled
    assert_eq!(
        common::occupancy_of(&p, "norms, residuals, activation", Phase::Forward),
        1.0
    );
    // the same program but for the occupancies, and no faster
    let (q, plain) = program(common::NODE_8);
    assert_eq!(p.ops.len(), q.ops.len());
    for (a, b) in p.ops.iter().zip(&q.ops) {
        assert_eq!((&a.name, a.flops), (&b.name, b.flops));
    }
    assert!(tiled > plain, "{tiled} vs {plain}");
}

#[test]
fn a_tiling_needs_cores_and_tiles() {
    let fs = |text: String| {
        let mut fs = tessera::model::system::MemFs::default();
        fs.0.insert("s.ron".into(), text.into_bytes());
        tessera::model::system::load_system("s.ron", &fs)
    };
    let no_cores = fs(tiled_node().replace("cores: 10,", ""));
    assert!(no_cores.value.is_none());
    assert!(
        no_cores
            .diagnostics
            .iter()
            .any(|d| format!("{d:?}").contains("states no `cores`")),
        "{:?}",
        no_cores.diagnostics
    );
    let empty = fs(tiled_node().replace("[(128, 128)]", "[]"));
    assert!(empty.value.is_none());
    let zero = fs(tiled_node().replace("[(128, 128)]", "[(128, 0)]"));
    assert!(zero.value.is_none());
}

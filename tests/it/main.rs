//! Every integration test in one binary: linking wgpu, Arrow and Parquet once instead of once per
//! file is most of what a fresh build of the tests costs (issue 40). One module per concern; where
//! each concern is tested is in `tests/README.md`, what the modules share in `tests/common`.
//!
//! Run one concern with a filter: `cargo test --release --test it contracts::` (or `plots::`,
//! `behaviour::`). The tests run on parallel threads of this one process, so none may change the
//! process's environment or working folder, and a test that writes a file writes it in a folder
//! of its own (`common::scratch_dir`).

#[path = "../common/mod.rs"]
mod common;

mod arrow;
mod attention_kernel;
mod bands;
mod behaviour;
mod calibrate;
mod compare_table;
mod contracts;
mod cost;
mod crossval;
mod data_formats;
mod diagnostics;
mod diagnostics_ux;
mod dropped_tokens;
mod engine;
mod expert_dispatch;
mod full_clock_power;
mod gemm_tiling;
mod goodput;
mod gpu_parity;
mod hybrid_sharding;
mod import_graph;
mod interleaved_windows;
mod kernel_counterparts;
mod lora;
mod loss_kernel;
mod megatron_bridge;
mod memory_footprint;
mod model_shapes;
mod moe_folding;
mod near_memory;
mod northpole_stack;
mod offload;
mod offload_state;
mod overlap_price;
mod overrides;
mod picture_text;
mod plots;
mod precision_schedule;
mod queue;
mod recompute_layers;
mod recompute_policy;
mod regressions;
mod regressions_io;
mod report_browser;
mod report_html;
mod ring_latency;
mod robust_props;
mod router_imbalance;
mod search_space;
mod serving;
mod sharded_gradients;
mod shipped;
mod sweep;
mod sweep_paths;
mod tp_overlap;
mod validation;
mod wafer;
mod wafer_regions;
mod weight_streaming;
mod workload_diagnostics;
mod workloads;

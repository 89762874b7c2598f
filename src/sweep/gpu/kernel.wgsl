// The sweep kernel's entry point: one invocation = one design point, generated from its index
// (`sample.wgsl`) and evaluated by the cost-program interpreter (`eval.wgsl`). The host prepends
// the generated constants (machine-table slots `F_*`, reason codes, tier slots) and record
// structs (`layout.rs`), so no layout is written here by hand.
//
// Two output modes. Full (mode 0): every point's figures, two vec4 per point, for per-point
// output. Screening (mode 1): points are counted by reason (per workgroup, then once per group in
// `counts`) and only candidates are appended to `out` — points that may rank among the best or
// lie on the Pareto front, judged against the host's current threshold and front with a relative
// margin — so the read-back is a few candidates, not every point.

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> progs: array<ProgRec>;
@group(0) @binding(2) var<storage, read> recs: array<Rec>;
@group(0) @binding(3) var<storage, read> vals: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<u32>>;
// screening: the current front as (score a, score b), score a descending
@group(0) @binding(5) var<storage, read> front: array<vec2<f32>>;
// screening: points by reason (0 .. REASON_COUNT - 1), then the number of candidates written
@group(0) @binding(6) var<storage, read_write> counts: array<atomic<u32>>;

var<workgroup> group_counts: array<atomic<u32>, REASON_COUNT>;

var<private> X: array<f32, NX>;
var<private> V: array<f32, MAX_AXES>;
var<private> bad: bool;


// ---- screening (sweep/accumulate.rs, `Screen`) ----

// A metric of a feasible point, larger is better (`sweep::Metric::score`; codes generated).
fn score(m: u32, p: Point) -> f32 {
    switch m {
        case METRIC_THROUGHPUT: { return p.a.w; }
        case METRIC_STEP_TIME: { return -p.a.x; }
        case METRIC_POWER: { return -p.a.z; }
        case METRIC_ENERGY: { return -p.b.w; }
        case METRIC_PERF_PER_WATT: { return p.a.w / p.a.z; }
        default: { return p.b.x; } // METRIC_MFU
    }
}

// Beaten by more than the margin in both metrics by a point of the host's front.
fn screened_out(a: f32, b: f32) -> bool {
    let ta = a + P.margin * abs(a);
    let tb = b + P.margin * abs(b);
    // k = number of front points with score a >= ta (they come first)
    var lo = 0u;
    var hi = P.n_front;
    while (lo < hi) {
        let mid = (lo + hi) / 2u;
        if (front[mid].x >= ta) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    return lo > 0u && front[lo - 1u].y >= tb;
}

@compute @workgroup_size(256)
fn main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let li = gid.y * nwg.x * 256u + gid.x;
    var reason = REASON_COUNT;
    if (li < P.count) {
        let p = evaluate(li);
        if (P.mode == MODE_FULL) {
            out[2u * li] = bitcast<vec4<u32>>(p.a);
            out[2u * li + 1u] = bitcast<vec4<u32>>(p.b);
        } else {
            // The constraints, with the margin: a point whose f32 figures lie within the margin
            // of a threshold (the power budget, the memory floor, or fitting in memory at all),
            // or that overflow f32, is not counted here but sent to the host as AMBIGUOUS,
            // which decides it in f64;
            // every other point is counted by its reason, and feasible ones that may make the
            // top-K or the front are sent as candidates.
            reason = u32(p.b.z);
            var candidate = false;
            var ambiguous = false;
            let tol = P.margin * progs[P.start_prog + (P.start_mi + li) / P.points].total;
            if (reason == REASON_OK) {
                // figures past f32's range (the step, its energy, the power) are decided in f64:
                // finite there, or infeasible as `REASON_NON_FINITE` (`cpu::eval`)
                ambiguous = (P.budget > 0.0 && abs(p.a.z - P.budget) <= P.margin * P.budget)
                    || abs(p.b.y - P.floor) <= tol
                    || !(p.a.x < 3.0e38 && p.a.y < 3.0e38 && p.a.z < 3.0e38);
                if (P.budget > 0.0 && p.a.z > P.budget) {
                    reason = REASON_POWER;
                } else if (p.b.y < P.floor) {
                    reason = REASON_MEMORY_FLOOR;
                }
                candidate = reason == REASON_OK
                    && (score(P.objective, p) >= P.threshold
                        || !screened_out(score(P.pareto_a, p), score(P.pareto_b, p)));
            } else if (reason == REASON_MEMORY) {
                ambiguous = abs(p.b.y) <= tol;
            }
            var code = u32(p.b.z);
            if (ambiguous) {
                candidate = true;
                code = AMBIGUOUS;
                reason = REASON_COUNT;
            }
            if (candidate) {
                let k = atomicAdd(&counts[REASON_COUNT], 1u);
                var b = bitcast<vec4<u32>>(p.b);
                b.z = li | (code << 24u);
                out[2u * k] = bitcast<vec4<u32>>(p.a);
                out[2u * k + 1u] = b;
            }
        }
    }
    if (P.mode == MODE_SCREEN) {
        if (reason < REASON_COUNT) {
            atomicAdd(&group_counts[reason], 1u);
        }
        workgroupBarrier();
        if (lid < REASON_COUNT) {
            let n = atomicLoad(&group_counts[lid]);
            if (n > 0u) {
                atomicAdd(&counts[lid], n);
            }
        }
    }
}

// The flat cost program interpreted for many machine vectors at once, in f32.
//
// One invocation = one design point: it builds its machine vector from the program's base fields
// and the sweep axes (generating the point from its index exactly as `sweep/space.rs` does), then
// evaluates the program's ops and collectives. This is a line-for-line port of `engine/cpu.rs`
// (`collective`, `place`, `eval_traced`) and must stay one; `tests/gpu_parity.rs` checks it
// against the f64 CPU evaluator on random design points.
//
// The field indices (F_*), NX, NPREC and MAX_AXES are prepended by the host from
// `engine/table.rs`, so the layout has one source.
//
// Where the CPU divides by a zero bandwidth (an infinite time, hence an infeasible point) the
// kernel sets `bad` instead of producing an infinity, which WGSL implementations need not honour.
//
// Two output modes. Full (mode 0): every point's figures, two vec4 per point, for per-point
// output. Screening (mode 1): points are counted by reason (per workgroup, then once per group in
// `counts`) and only candidates are appended to `out` — points that may rank among the best or
// lie on the Pareto front, judged against the host's current threshold and front with a relative
// margin — so the read-back is a few candidates, not every point.

// The reason codes (REASON_*, REASON_COUNT, AMBIGUOUS: a candidate the host must classify in
// f64) are prepended by the host from `engine/reason.rs`.

struct Params {
    start_prog: u32,
    start_mi: u32,
    count: u32,
    points: u32,
    n_axes: u32,
    axis_start: u32,
    n_targets: u32,
    target_start: u32,
    sampling: u32,
    seed: u32,
    rederive: u32,
    divide: u32,
    // screening (mode 1)
    mode: u32,
    objective: u32,
    pareto_a: u32,
    pareto_b: u32,
    n_front: u32,
    threshold: f32,
    margin: f32,
    budget: f32,
    floor: f32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

// Ops, collectives, axes and axis targets share one record shape.
//   op:     u = (matrix, precision, section, phase)       f = (flops, weight bytes, act bytes, count)
//   comm:   u = (kind | weight stream << 8, section, overlap, bits of the inner bandwidth share)
//           f = (bytes, inner, outer, count)
//   axis:   u = (kind 0 list 1 linear 2 log, count, list offset, 0)  f = (lo, hi, ln(hi/lo), 0)
//   target: u = (axis, field, op 0 set 1 divide, 0)       f = (scale, offset, floor, 0)
struct Rec {
    u: vec4<u32>,
    f: vec4<f32>,
}

struct Prog {
    op_start: u32,
    n_ops: u32,
    comm_start: u32,
    n_comms: u32,
    base: u32,
    mfu_prec: u32,
    pad0: u32,
    pad1: u32,
    micro_batches: f32,
    bubble: f32,
    devices: f32,
    units: f32,
    model_flops: f32,
    state: f32,
    working: f32,
    total: f32,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> progs: array<Prog>;
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


// ---- sampler (sweep/space.rs) ----

fn mix(x0: u32) -> u32 {
    var x = x0;
    x ^= x >> 16u;
    x *= 0x7feb352du;
    x ^= x >> 15u;
    x *= 0x846ca68bu;
    x ^= x >> 16u;
    return x;
}

fn axis_key(seed: u32, axis: u32, salt: u32) -> u32 {
    return mix(mix(seed ^ 0x9e3779b9u) ^ (axis * 0x85ebca6bu) ^ (salt * 0xc2b2ae35u));
}

fn permute(i: u32, n: u32, key: u32) -> u32 {
    if (n <= 1u) {
        return 0u;
    }
    let bits = 32u - countLeadingZeros(n - 1u);
    var mask = 0xffffffffu;
    if (bits < 32u) {
        mask = (1u << bits) - 1u;
    }
    let half = (bits + 1u) / 2u;
    var muls = array<u32, 3>(0x2c1b3c6du, 0x297a2d39u, 0x7feb352du);
    var x = i;
    loop {
        for (var r = 0u; r < 3u; r++) {
            x ^= (key ^ (r * 0x9e3779b9u)) & mask;
            x = (x * muls[r]) & mask;
            x ^= x >> half;
        }
        if (x < n) {
            break;
        }
    }
    return x;
}

fn unit(h: u32) -> f32 {
    return f32(h >> 8u) * (1.0 / 16777216.0);
}

fn sample(mi: u32) {
    let na = P.n_axes;
    if (P.sampling == 0u) {
        var rest = mi;
        for (var k = na; k > 0u; k--) {
            let a = recs[P.axis_start + k - 1u];
            let n = max(a.u.y, 1u);
            V[k - 1u] = vals[a.u.z + rest % n];
            rest = rest / n;
        }
        return;
    }
    for (var k = 0u; k < na; k++) {
        let a = recs[P.axis_start + k];
        let h = mix(axis_key(P.seed, k, 0u) ^ mi);
        let n = max(a.u.y, 1u);
        var u: f32;
        var j: u32;
        if (P.sampling == 1u) {
            u = unit(h);
            j = h % n;
        } else {
            let s = permute(mi, P.points, axis_key(P.seed, k, 1u));
            u = (f32(s) + unit(h)) / f32(P.points);
            j = s % n;
        }
        if (a.u.x == 0u) {
            V[k] = vals[a.u.z + j];
        } else if (a.u.x == 1u) {
            V[k] = a.f.x + u * (a.f.y - a.f.x);
        } else {
            V[k] = a.f.x * exp(u * a.f.z);
        }
    }
}

fn apply() {
    for (var t = 0u; t < P.n_targets; t++) {
        let r = recs[P.target_start + t];
        let v = V[r.u.x];
        if (r.u.z == 0u) {
            X[r.u.y] = max(v * r.f.x + r.f.y, r.f.z);
        } else {
            X[r.u.y] = X[r.u.y] * r.f.x / v;
        }
    }
    // energy per FLOP: `sweep::space::derive`
    let both = P.rederive | P.divide;
    if (both != 0u) {
        for (var i = 0u; i < NPREC; i++) {
            let bit = 1u << i;
            if ((both & bit) == 0u) {
                continue;
            }
            var e = X[F_RAW_EPF + i];
            if ((P.rederive & bit) != 0u) {
                let peak = max(X[F_RAW_MATRIX + i], X[F_RAW_VECTOR + i]);
                if (peak > 0.0) {
                    e = (X[F_TDP] - X[F_IDLE_POWER]) / peak;
                }
            }
            if ((P.divide & bit) != 0u) {
                var eff = X[F_EFF_VECTOR];
                if (X[F_RAW_MATRIX + i] > 0.0) {
                    eff = X[F_EFF_MATMUL];
                    if (i >= 5u) {
                        eff = X[F_EFF_MATMUL] * X[F_EFF_LOW_PRECISION];
                    }
                }
                if (eff > 0.0) {
                    e = e / eff;
                }
            }
            X[F_ENERGY_PER_FLOP + i] = e;
        }
    }
}

// ---- evaluator (engine/cpu.rs) ----

fn div(a: f32, b: f32) -> f32 {
    if (b <= 0.0) {
        bad = true;
        return 0.0;
    }
    return a / b;
}

// (time, bytes over scale-up, bytes over scale-out) of one collective: `cpu::collective`.
fn collective(c: Rec) -> vec3<f32> {
    let kind = c.u.x & 255u;
    let s = c.f.x;
    if ((c.u.x >> 8u) != 0u) {
        let bw = X[F_EXT_BANDWIDTH] * X[F_EFF_NETWORK];
        return vec3<f32>(div(s, bw) + X[F_EXT_LATENCY], 0.0, 0.0);
    }
    let u = max(c.f.y, 1.0);
    let o = max(c.f.z, 1.0);
    if (u <= 1.0 && o <= 1.0) {
        return vec3<f32>(0.0);
    }
    let bu = X[F_UP_BANDWIDTH] * X[F_EFF_NETWORK] * bitcast<f32>(c.u.w);
    let bo = X[F_OUT_BANDWIDTH] * X[F_EFF_NETWORK];
    let lu = X[F_UP_LATENCY];
    let lo = X[F_OUT_LATENCY];
    let log2o = max(log2(o), 1.0);
    if (kind == 0u) {
        // all-reduce: reduce-scatter + all-reduce across domains + all-gather
        var t_in = 0.0;
        var b_in = 0.0;
        if (u > 1.0) {
            if (X[F_UP_INR] != 0.0) {
                t_in = div(s, bu) + 2.0 * lu;
                b_in = s;
            } else {
                t_in = div(2.0 * (u - 1.0) / u * s, bu) + 2.0 * (u - 1.0) * lu;
                b_in = 2.0 * (u - 1.0) / u * s;
            }
        }
        let shard = s / u;
        var t_out = 0.0;
        var b_out = 0.0;
        if (o > 1.0) {
            if (X[F_OUT_INR] != 0.0) {
                t_out = div(shard, bo) + 2.0 * lo * log2o;
                b_out = shard;
            } else {
                t_out = div(2.0 * (o - 1.0) / o * shard, bo) + 2.0 * lo * log2o;
                b_out = 2.0 * (o - 1.0) / o * shard;
            }
        }
        return vec3<f32>(t_in + t_out, b_in, b_out);
    }
    if (kind == 1u || kind == 2u) {
        // all-gather, reduce-scatter
        var t_out = 0.0;
        var b_out = 0.0;
        if (o > 1.0) {
            let part = s / u;
            t_out = div((o - 1.0) / o * part, bo) + lo * log2o;
            b_out = (o - 1.0) / o * part;
        }
        var t_in = 0.0;
        var b_in = 0.0;
        if (u > 1.0) {
            t_in = div((u - 1.0) / u * s, bu) + (u - 1.0) * lu;
            b_in = (u - 1.0) / u * s;
        }
        return vec3<f32>(t_in + t_out, b_in, b_out);
    }
    if (kind == 3u) {
        // all-to-all
        let n = u * o;
        let b_in = (u - 1.0) / n * s;
        let b_out = (n - u) / n * s;
        var t_in = 0.0;
        if (u > 1.0) {
            t_in = div(b_in, bu) + lu;
        }
        var t_out = 0.0;
        if (o > 1.0) {
            t_out = div(b_out, bo) + lo;
        }
        return vec3<f32>(max(t_in, t_out), b_in, b_out);
    }
    if (kind == 4u) {
        // broadcast
        if (o > 1.0) {
            return vec3<f32>(div(s, bo) + lo * log2o, 0.0, s);
        }
        return vec3<f32>(div(s, bu) + lu * max(log2(u), 1.0), s, 0.0);
    }
    // send/receive
    if (o > 1.0) {
        return vec3<f32>(div(s, bo) + lo, 0.0, s);
    }
    return vec3<f32>(div(s, bu) + lu, s, 0.0);
}

fn tier_bandwidth(t: u32) -> f32 {
    if (t == 0u) {
        return X[F_SRAM_BANDWIDTH] * X[F_EFF_MEMORY];
    }
    if (t == 1u) {
        return X[F_HBM_BANDWIDTH] * X[F_EFF_MEMORY];
    }
    return X[F_EXT_BANDWIDTH] * X[F_EFF_NETWORK];
}

fn tier_energy(t: u32) -> f32 {
    if (t == 0u) {
        return X[F_SRAM_ENERGY];
    }
    if (t == 1u) {
        return X[F_HBM_ENERGY];
    }
    return X[F_OUT_ENERGY];
}

// One point's figures: a = (step time, energy per step, power, throughput),
// b = (MFU, memory headroom, reason, energy per unit).
struct Point {
    a: vec4<f32>,
    b: vec4<f32>,
}

fn infeasible(reason: f32, head: f32) -> Point {
    return Point(vec4<f32>(0.0), vec4<f32>(0.0, head, reason, 0.0));
}

fn evaluate(li: u32) -> Point {
    let t = P.start_mi + li;
    let pr = progs[P.start_prog + t / P.points];
    let mi = t % P.points;
    for (var i = 0u; i < NX; i++) {
        X[i] = vals[pr.base + i];
    }
    sample(mi);
    apply();
    bad = false;

    // Placement: `cpu::place`. Tiers: 0 SRAM, 1 HBM, 2 external.
    let st = pr.state;
    let wk = pr.working;
    let tot = pr.total;
    let sram = X[F_SRAM_CAPACITY];
    let hbm = X[F_HBM_CAPACITY];
    let ext = X[F_EXT_CAPACITY];
    var wt = 0u;
    var at = 0u;
    var head = 0.0;
    if (tot <= sram) {
        wt = 0u;
        at = 0u;
        head = sram - tot;
    } else if (ext > 0.0 && st <= ext && wk <= sram) {
        wt = 2u;
        at = 0u;
        head = sram - wk;
    } else if (tot <= hbm) {
        wt = 1u;
        at = 1u;
        head = hbm - tot;
    } else if (ext > 0.0 && st <= ext && wk <= hbm) {
        wt = 2u;
        at = 1u;
        head = hbm - wk;
    } else {
        return infeasible(f32(REASON_MEMORY), max(sram, hbm) - tot);
    }
    let bw_w = tier_bandwidth(wt);
    let bw_a = tier_bandwidth(at);
    let e_w = tier_energy(wt);
    let e_a = tier_energy(at);

    // per section [micro-batch, step]
    var comp = array<f32, 2>(0.0, 0.0);
    var mem = array<f32, 2>(0.0, 0.0);
    var comm = array<f32, 2>(0.0, 0.0);
    var oth = array<f32, 2>(0.0, 0.0);
    var busy = array<f32, 2>(0.0, 0.0);
    var bwd_mb = 0.0;
    var dyn_energy = 0.0;
    let mb_mult = pr.micro_batches;
    let ko = X[F_KERNEL_OVERHEAD];
    for (var i = 0u; i < pr.n_ops; i++) {
        let op = recs[pr.op_start + i];
        let prec = op.u.y;
        let flops = op.f.x;
        let wb = op.f.y;
        let ab = op.f.z;
        let count = op.f.w;
        var rate: f32;
        if (op.u.x != 0u) {
            var eff = X[F_EFF_MATMUL];
            if (prec >= 5u) {
                eff = X[F_EFF_MATMUL] * X[F_EFF_LOW_PRECISION];
            }
            rate = X[F_MATRIX_PEAK + prec] * eff;
        } else {
            rate = X[F_VECTOR_PEAK + prec] * X[F_EFF_VECTOR];
        }
        if (flops > 0.0 && rate <= 0.0) {
            return infeasible(f32(REASON_NO_COMPUTE), head);
        }
        var t_c = 0.0;
        if (flops > 0.0) {
            t_c = flops / rate;
        }
        var t_w = 0.0;
        if (wb > 0.0) {
            t_w = div(wb, bw_w);
        }
        var t_a = 0.0;
        if (ab > 0.0) {
            t_a = div(ab, bw_a);
        }
        var t_m: f32;
        if (wt == at) {
            t_m = t_w + t_a;
        } else {
            t_m = max(t_w, t_a);
        }
        let s = op.u.z;
        if (t_c >= t_m) {
            comp[s] += t_c * count;
        } else {
            mem[s] += t_m * count;
        }
        oth[s] += ko * count;
        let tt = (max(t_c, t_m) + ko) * count;
        busy[s] += tt;
        if (s == 0u && op.u.w == 1u) {
            bwd_mb += tt;
        }
        var mult = 1.0;
        if (s == 0u) {
            mult = mb_mult;
        }
        dyn_energy += mult * count * (flops * X[F_ENERGY_PER_FLOP + prec] + wb * e_w + ab * e_a);
    }
    for (var i = 0u; i < pr.n_comms; i++) {
        let c = recs[pr.comm_start + i];
        let r = collective(c);
        let s = c.u.y;
        let tt = r.x * c.f.w;
        var exposed = tt;
        if (c.u.z == 1u) {
            exposed = max(tt - bwd_mb, 0.0);
        } else if (c.u.z == 2u) {
            exposed = max(tt - busy[s], 0.0);
        }
        comm[s] += exposed;
        var mult = 1.0;
        if (s == 0u) {
            mult = mb_mult;
        }
        dyn_energy += mult * c.f.w * (r.y * X[F_UP_ENERGY] + r.z * X[F_OUT_ENERGY]);
    }
    let t_mb = comp[0] + mem[0] + comm[0] + 0.0 + oth[0];
    let mb = pr.micro_batches;
    let tc = comp[0] * mb + comp[1];
    let tm = mem[0] * mb + mem[1];
    let tk = comm[0] * mb + comm[1];
    let tb = (0.0 * mb + pr.bubble * t_mb) + 0.0;
    let to = oth[0] * mb + oth[1];
    let t_step = tc + tm + tk + tb + to;
    if (bad || !(t_step > 0.0 && t_step < 3.0e38)) {
        return infeasible(f32(REASON_NO_COMPUTE), head);
    }
    let dev_power = min(X[F_IDLE_POWER] + dyn_energy / t_step, X[F_TDP]);
    let power = pr.devices * (dev_power + X[F_OVERHEAD_POWER]) * X[F_PUE];
    let energy = power * t_step;
    let throughput = pr.units / t_step;
    let peak = X[F_MATRIX_PEAK + pr.mfu_prec] * pr.devices;
    var mfu = 0.0;
    if (peak > 0.0) {
        mfu = pr.model_flops / (t_step * peak);
    }
    return Point(
        vec4<f32>(t_step, energy, power, throughput),
        vec4<f32>(mfu, head, 0.0, energy / pr.units),
    );
}

// ---- screening (sweep/accumulate.rs, `Screen`) ----

// A metric of a feasible point, larger is better (`sweep::Metric::score`):
// 0 throughput, 1 step time, 2 power, 3 energy per unit, 4 throughput per watt, 5 MFU.
fn score(m: u32, p: Point) -> f32 {
    switch m {
        case 0u: { return p.a.w; }
        case 1u: { return -p.a.x; }
        case 2u: { return -p.a.z; }
        case 3u: { return -p.b.w; }
        case 4u: { return p.a.w / p.a.z; }
        default: { return p.b.x; }
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
        if (P.mode == 0u) {
            out[2u * li] = bitcast<vec4<u32>>(p.a);
            out[2u * li + 1u] = bitcast<vec4<u32>>(p.b);
        } else {
            // The constraints, with the margin: a point whose f32 figures lie within the margin
            // of a threshold (the power budget, the memory floor, or fitting in memory at all)
            // is not counted here but sent to the host as AMBIGUOUS, which decides it in f64;
            // every other point is counted by its reason, and feasible ones that may make the
            // top-K or the front are sent as candidates.
            reason = u32(p.b.z);
            var candidate = false;
            var ambiguous = false;
            let tol = P.margin * progs[P.start_prog + (P.start_mi + li) / P.points].total;
            if (reason == REASON_OK) {
                ambiguous = (P.budget > 0.0 && abs(p.a.z - P.budget) <= P.margin * P.budget)
                    || abs(p.b.y - P.floor) <= tol;
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
    if (P.mode == 1u) {
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

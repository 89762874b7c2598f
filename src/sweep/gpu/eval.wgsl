// The cost program interpreted on one machine vector, in f32: the kernel's port of
// `engine/cpu.rs` (`place`, `op_time`, `collective`, `eval_traced`). It holds no physics of its
// own: an operator's record names the machine slots its rate, efficiency and energy read (its
// efficiency class), a collective's record carries its alpha-beta coefficients per link class,
// and the tiers' slots are generated constants. `tests/gpu_parity.rs` checks it against the f64
// CPU evaluator. Where the CPU divides by a zero bandwidth (an infinite time, an infeasible
// point) the kernel sets `bad` instead of producing an infinity.

fn div(a: f32, b: f32) -> f32 {
    if (b <= 0.0) {
        bad = true;
        return 0.0;
    }
    return a / b;
}

// Time on one link class: latencies × latency + bytes / bandwidth.
fn link(bytes: f32, bw: f32, lats: f32, lat: f32) -> f32 {
    var t = lats * lat;
    if (bytes > 0.0) {
        t += div(bytes, bw);
    }
    return t;
}

// One point's figures: a = (step time, energy per step, power, throughput),
// b = (MFU, memory headroom, reason, energy per unit).
struct Point {
    a: vec4<f32>,
    b: vec4<f32>,
}

fn infeasible(reason: u32, head: f32) -> Point {
    return Point(vec4<f32>(0.0), vec4<f32>(0.0, head, f32(reason), 0.0));
}

fn tier_bandwidth(t: u32) -> f32 {
    return X[TIER_BANDWIDTH[t]] * X[TIER_EFFICIENCY[t]];
}

// The device's power limit: its TDP, or its share of a node or facility limit if lower
// (`cpu::power_limit`).
fn power_limit() -> f32 {
    let cap = X[F_POWER_CAP];
    if (cap > 0.0) {
        return min(X[F_TDP], cap);
    }
    return X[F_TDP];
}

// Relative supply voltage at relative clock s (`cpu::voltage`).
fn voltage(s: f32) -> f32 {
    let c0 = X[F_DVFS_MIN_CLOCK];
    let v0 = X[F_DVFS_MIN_VOLTAGE];
    if (c0 >= 1.0 || s >= 1.0) {
        return 1.0;
    }
    return v0 + (1.0 - v0) * max(s - c0, 0.0) / (1.0 - c0);
}

// Device power at relative clock s (`cpu::Demand::power`): d = (clock-bound time, other time,
// FLOP energy, other energy) at full clock.
fn demand_power(d: vec4<f32>, s: f32) -> f32 {
    let v = voltage(s);
    return X[F_IDLE_POWER] + (d.z * v * v + d.w) / (d.x / s + d.y);
}

// Power per device within the boundary (`cpu::system_power`).
fn system_power(device: f32, wt: u32) -> f32 {
    let b = X[F_BOUNDARY];
    var p = device;
    if (b >= 1.0) {
        p += X[F_NODE_POWER];
    }
    if (b >= 2.0) {
        p += X[F_SWITCH_POWER];
    }
    if (b >= 3.0) {
        p += X[F_NETWORK_POWER];
        if (wt == TIER_EXTERNAL) {
            p += X[F_STORE_POWER];
        }
    }
    if (b >= 4.0) {
        p *= X[F_PUE];
    }
    return p;
}

fn evaluate(li: u32) -> Point {
    let t = P.start_mi + li;
    let pr = progs[P.start_prog + t / P.points];
    for (var i = 0u; i < NX; i++) {
        X[i] = vals[pr.base + i];
    }
    sample(t % P.points);
    apply();
    bad = false;

    // Placement (`cpu::place`): the fastest tier that holds everything, else state in the
    // weight store and working data in that tier.
    let ext = X[F_EXT_CAPACITY];
    var wt = TIER_NONE;
    var at = TIER_NONE;
    var head = 0.0;
    for (var k = 0u; k < TIER_EXTERNAL && wt == TIER_NONE; k++) {
        let cap = X[TIER_CAPACITY[k]];
        if (cap > 0.0 && pr.total <= cap) {
            wt = k;
            at = k;
            head = cap - pr.total;
        } else if (cap > 0.0 && ext > 0.0 && pr.state <= ext && pr.working <= cap) {
            wt = TIER_EXTERNAL;
            at = k;
            head = cap - pr.working;
        }
    }
    if (wt == TIER_NONE) {
        return infeasible(REASON_MEMORY, max(X[F_SRAM_CAPACITY], X[F_HBM_CAPACITY]) - pr.total);
    }
    let bw_w = tier_bandwidth(wt);
    let bw_a = tier_bandwidth(at);
    let e_w = X[TIER_ENERGY[wt]];
    let e_a = X[TIER_ENERGY[at]];

    // per section, indexed by SECTION_MICRO_BATCH and SECTION_STEP
    var comp = array<f32, 2>(0.0, 0.0);
    var mem = array<f32, 2>(0.0, 0.0);
    var comm = array<f32, 2>(0.0, 0.0);
    var oth = array<f32, 2>(0.0, 0.0);
    var busy = array<f32, 2>(0.0, 0.0);
    var mult = array<f32, 2>(pr.micro_batches, 1.0);
    var bwd_mb = 0.0;
    var flop_energy = 0.0;
    var dyn_energy = 0.0;
    let ko = X[F_KERNEL_OVERHEAD];
    for (var i = 0u; i < pr.n_ops; i++) {
        let op = read_OpRec(pr.op_start + i * OpRec_RECS);
        var eff = X[op.eff];
        if (op.eff2 < NX) {
            eff *= X[op.eff2];
        }
        let rate = X[op.rate] * eff;
        if (op.flops > 0.0 && rate <= 0.0) {
            return infeasible(REASON_NO_COMPUTE, head);
        }
        var t_c = 0.0;
        if (op.flops > 0.0) {
            t_c = op.flops / rate;
        }
        var t_w = 0.0;
        if (op.weight_bytes > 0.0) {
            t_w = div(op.weight_bytes, bw_w);
        }
        var t_a = 0.0;
        if (op.act_bytes > 0.0) {
            t_a = div(op.act_bytes, bw_a);
        }
        var t_m = max(t_w, t_a);
        if (wt == at) {
            t_m = t_w + t_a;
        }
        let s = op.section;
        if (t_c >= t_m) {
            comp[s] += t_c * op.count;
        } else {
            mem[s] += t_m * op.count;
        }
        oth[s] += ko * op.count;
        let tt = (max(t_c, t_m) + ko) * op.count;
        busy[s] += tt;
        if (s == SECTION_MICRO_BATCH && op.phase == PHASE_BACKWARD) {
            bwd_mb += tt;
        }
        flop_energy += mult[s] * op.count * op.flops * X[op.epf];
        dyn_energy += mult[s] * op.count * (op.weight_bytes * e_w + op.act_bytes * e_a);
    }
    let net = X[F_EFF_NETWORK];
    for (var i = 0u; i < pr.n_comms; i++) {
        let c = read_CommRec(pr.comm_start + i * CommRec_RECS);
        var up = vec2<f32>(c.up_lat, c.up_bytes);
        if (X[F_UP_INR] != 0.0) {
            up = vec2<f32>(c.up_lat_inr, c.up_bytes_inr);
        }
        var out = vec2<f32>(c.out_lat, c.out_bytes);
        if (X[F_OUT_INR] != 0.0) {
            out = vec2<f32>(c.out_lat_inr, c.out_bytes_inr);
        }
        let t_up = link(up.y, X[F_UP_BANDWIDTH] * net * c.share, up.x, X[F_UP_LATENCY]);
        let t_out = link(out.y, X[F_OUT_BANDWIDTH] * net, out.x, X[F_OUT_LATENCY]);
        let t_ext = link(c.ext_bytes, X[F_EXT_BANDWIDTH] * net, c.ext_lat, X[F_EXT_LATENCY]);
        var tt = t_up + t_out + t_ext;
        if (c.overlapped != 0u) {
            tt = max(t_up, t_out);
        }
        tt *= c.count;
        let s = c.section;
        var exposed = tt;
        if (c.overlap == OVERLAP_BACKWARD) {
            exposed = max(tt - bwd_mb, 0.0);
        } else if (c.overlap == OVERLAP_COMPUTE) {
            exposed = max(tt - busy[s], 0.0);
        }
        comm[s] += exposed;
        dyn_energy += mult[s] * c.count * (up.y * X[F_UP_ENERGY] + out.y * X[F_OUT_ENERGY]);
    }
    let t_mb = comp[0] + mem[0] + comm[0] + oth[0];
    let mb = pr.micro_batches;
    var t_step = (comp[0] * mb + comp[1]) + (mem[0] * mb + mem[1]) + (comm[0] * mb + comm[1])
        + pr.bubble * t_mb + (oth[0] * mb + oth[1]);
    if (bad || !(t_step > 0.0 && t_step < 3.0e38)) {
        return infeasible(REASON_NO_COMPUTE, head);
    }
    // The operating point under the power limit (`cpu::Demand::operate`): bisection on the
    // clock, power rising with it; below the lowest clock, duty-cycling at its energy.
    let clock_bound = comp[0] * (mb + pr.bubble) + comp[1];
    let d = vec4<f32>(clock_bound, t_step - clock_bound, flop_energy, dyn_energy);
    let cap = power_limit();
    var dev_power = demand_power(d, 1.0);
    if (dev_power > cap) {
        var lo = clamp(X[F_DVFS_MIN_CLOCK], 0.0, 1.0);
        if (lo <= 0.0 || demand_power(d, lo) > cap) {
            let idle = X[F_IDLE_POWER];
            if (cap <= idle) {
                return infeasible(REASON_POWER_CAP, head);
            }
            if (lo <= 0.0) {
                lo = 1.0;
            }
            let v = voltage(lo);
            t_step = (d.z * v * v + d.w) / (cap - idle);
        } else {
            var hi = 1.0;
            for (var k = 0u; k < 24u; k++) {
                let mid = 0.5 * (lo + hi);
                if (demand_power(d, mid) <= cap) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            t_step = d.x / lo + d.y;
        }
        // the limit set the operating point: power = limit (`cpu::Demand::power_at`)
        dev_power = cap;
    }
    let power = pr.devices * system_power(dev_power, wt);
    let energy = power * t_step;
    let peak = X[F_MATRIX_PEAK + pr.mfu_prec] * pr.devices;
    var mfu = 0.0;
    if (peak > 0.0) {
        mfu = pr.model_flops / (t_step * peak);
    }
    return Point(
        vec4<f32>(t_step, energy, power, pr.units / t_step),
        vec4<f32>(mfu, head, f32(REASON_OK), energy / pr.units),
    );
}

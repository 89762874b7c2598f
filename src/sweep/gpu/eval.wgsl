// The cost program interpreted on one machine vector, in f32: the kernel's port of
// `engine/cpu/` (`place`, `op_time`, `collective_links`, `eval_traced`), in the same sections
// (links in `links.wgsl`, then roofline, clock, the stage loops, `evaluate`); every `cpu::` name
// below is the counterpart of the function it comments, and `tests/it/kernel_counterparts.rs`
// checks that each CPU function has one here and each function here one there. It holds no
// physics of its own: an operator's record names the machine slots its rate, efficiency and
// energy read (its efficiency class), a collective's record carries its alpha-beta coefficients
// per link class, and the tiers' slots are generated constants. `tests/it/gpu_parity.rs` checks
// it against the f64 CPU evaluator. Where the CPU divides by a zero bandwidth (an infinite time,
// an infeasible point) the kernel sets `bad` instead of producing an infinity.

// A division that flags a zero divisor as an infeasible point (the CPU gets an infinity and
// tests it with `is_finite`): kernel only.
fn div(a: f32, b: f32) -> f32 {
    if (b <= 0.0) {
        bad = true;
        return 0.0;
    }
    return a / b;
}

// One point's figures: a = (step time, energy per step, power, throughput),
// b = (MFU, memory headroom, reason, energy per unit).
struct Point {
    a: vec4<f32>,
    b: vec4<f32>,
}

// An infeasible point with its reason (`cpu::eval_traced` returns `Eval` with its reason code).
fn infeasible(reason: u32, head: f32) -> Point {
    return Point(vec4<f32>(0.0), vec4<f32>(0.0, head, f32(reason), 0.0));
}

// What tier `q` (SRAM or HBM) holds of the run's data (`cpu::usable_capacity`): its capacity,
// less the software stack's reserve on the main tier (HBM where the device has it, else SRAM:
// `cpu::main_tier`).
fn usable_capacity(q: u32) -> f32 {
    let cap = X[TIER_CAPACITY[q]];
    let main = select(TIER_SRAM, TIER_HBM, X[TIER_CAPACITY[TIER_HBM]] > 0.0);
    if (q == main && cap > 0.0) {
        return max(cap - X[F_MEMORY_RESERVE], 0.0);
    }
    return cap;
}

// A tier's bandwidth at its efficiency (`cpu::tier_bandwidth`).
fn tier_bandwidth(t: u32) -> f32 {
    return X[TIER_BANDWIDTH[t]] * X[TIER_EFFICIENCY[t]];
}

// Whether a stage whose state the placement puts in tier `wt` runs its weight-streamed form
// (`cpu::streams`): its state in the weight store, and the store able to run the update.
fn streams(wt: u32) -> bool {
    return wt == TIER_EXTERNAL && X[F_STORE_COMPUTE] > 0.0 && X[F_STORE_MEMORY_BANDWIDTH] > 0.0;
}

// Whether a record of form `form` runs in a stage that streams its weights (`s`) or keeps them
// on its devices: kernel only.
fn runs(form: u32, s: bool) -> bool {
    // FORM_ON_DEVICE runs where the stage does not stream
    return form == FORM_BOTH || (form == FORM_STREAMED) == s;
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

// The round's parts per stage class (`cpu::Round`): each class's micro-batch and step section,
// clock-bound and the rest, its repeat, whether it is a concurrent pool; filled per point. Its
// clocks (`R_S`) and per-device dynamic energy at full clock (`R_FLOP`, `R_OTHER`), for the
// operating point (`cpu::Demand`).
var<private> R_C0: array<f32, MAX_STAGES>;
var<private> R_R0: array<f32, MAX_STAGES>;
var<private> R_C1: array<f32, MAX_STAGES>;
var<private> R_R1: array<f32, MAX_STAGES>;
var<private> R_REP: array<f32, MAX_STAGES>;
var<private> R_POOL: array<u32, MAX_STAGES>;
var<private> R_S: array<f32, MAX_STAGES>;
// per class, section (micro-batch, step) and ridge bin: memory-bound compute and memory time
var<private> R_H: array<f32, MAX_STAGES * 2 * RIDGE_BINS>;
var<private> R_M: array<f32, MAX_STAGES * 2 * RIDGE_BINS>;
var<private> R_FLOP: array<f32, MAX_STAGES>;
var<private> R_OTHER: array<f32, MAX_STAGES>;
var<private> R_N: u32;
var<private> R_MB: f32;
var<private> R_BUBBLE: f32;
var<private> R_FIXED: f32;

// What class k's memory-bound operators of section `sec` take beyond their memory time at
// clock `s` (`cpu::SectionParts::excess`).
fn ridge_excess(k: u32, sec: u32, s: f32) -> f32 {
    var t = 0.0;
    for (var b = 0u; b < RIDGE_BINS; b++) {
        let i = (k * 2u + sec) * RIDGE_BINS + b;
        t += max(R_H[i] / s - R_M[i], 0.0);
    }
    return t;
}

// The round with class k at relative clock R_S[k] (`cpu::Round::at`): micro-batches × the
// slowest class's micro-batch plus the bubble, or the chain of all stages when longer; plus the
// slowest step section; or a pool's round where longer; plus the software stack's fixed time.
fn round_time() -> f32 {
    var t_max = -1.0;
    var chain = 0.0;
    var t_st = -1.0;
    var t_pool = -1.0;
    for (var k = 0u; k < R_N; k++) {
        let s = R_S[k];
        let t_mb = R_C0[k] / s + R_R0[k] + ridge_excess(k, 0u, s);
        let ts = R_C1[k] / s + R_R1[k] + ridge_excess(k, 1u, s);
        if (R_POOL[k] != 0u) {
            t_pool = max(t_pool, R_MB * t_mb + ts);
            continue;
        }
        t_max = max(t_max, t_mb);
        chain += R_REP[k] * t_mb;
        t_st = max(t_st, ts);
    }
    let pipelined = R_MB * t_max + R_BUBBLE * t_max;
    var t = max(pipelined, chain) + t_st;
    if (t_pool > t) {
        t = t_pool;
    }
    return t + R_FIXED;
}

// The lowest clock a power cap can throttle the device to (`cpu::lowest_clock`): full clock
// where its DVFS line gives no range or no voltage to save.
fn lowest_clock() -> f32 {
    let c0 = X[F_DVFS_MIN_CLOCK];
    if (c0 > 0.0 && c0 < 1.0 && X[F_DVFS_MIN_VOLTAGE] < 1.0) {
        return c0;
    }
    return 1.0;
}

// The highest clock at which a device of class k stays within its limit over a step of `time`
// (`cpu::Demand::clock_at`): the voltage line inverted at the voltage² the FLOPs may spend.
fn clock_at(k: u32, time: f32) -> f32 {
    let f = R_FLOP[k];
    let budget = (power_limit() - X[F_IDLE_POWER]) * time - R_OTHER[k];
    if (f <= budget) {
        return 1.0;
    }
    let lo = lowest_clock();
    if (lo >= 1.0 || budget <= 0.0) {
        return lo;
    }
    let c0 = X[F_DVFS_MIN_CLOCK];
    let v0 = X[F_DVFS_MIN_VOLTAGE];
    let v = sqrt(budget / f);
    return clamp(c0 + (1.0 - c0) * (v - v0) / (1.0 - v0), lo, 1.0);
}

// Every class at its clock for a step of `time` (`cpu::Demand::clocks_at`).
fn set_clocks(time: f32) {
    for (var k = 0u; k < R_N; k++) {
        R_S[k] = clock_at(k, time);
    }
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

// One design point: the program its record names on the machine vector `X` (`cpu::eval_traced`).
fn evaluate(li: u32) -> Point {
    let t = P.start_mi + li;
    let pr = progs[P.start_prog + t / P.points];
    for (var i = 0u; i < NX; i++) {
        X[i] = vals[pr.base + i];
    }
    sample(t % P.points);
    apply();
    bad = false;

    let ext = X[F_EXT_CAPACITY];
    let ko = X[F_KERNEL_OVERHEAD];
    // over the stages (`cpu::eval_traced`): each class's parts of the round (`R_*`, composed by
    // `round_time` at the clock the devices run at) and each stage's energy
    var head = 3.0e38;
    var wt_s = array<u32, MAX_STAGES>();
    let n_st = min(pr.n_stages, MAX_STAGES);
    R_N = n_st;
    R_MB = pr.micro_batches;
    R_BUBBLE = pr.bubble;
    // the software stack's time per optimizer step, outside the devices' work (`cpu::eval_traced`)
    R_FIXED = pr.host_steps * X[F_STEP_OVERHEAD];
    // each stage class in turn (`cpu::eval_stage`)
    for (var k = 0u; k < n_st; k++) {
        let st = read_StageRec(pr.stage_start + k * StageRec_RECS);
        // Placement (`cpu::place`): the fastest tier that holds everything, else state in the
        // weight store and working data in that tier.
        if (st.offloaded > X[F_HOST_CAPACITY]) {
            return infeasible(REASON_MEMORY, X[F_HOST_CAPACITY] - st.offloaded);
        }
        var wt = TIER_NONE;
        var at = TIER_NONE;
        // a streamed state stays in the store wherever the store holds it
        let resident = !(st.streamed != 0u && ext > 0.0 && st.state <= ext);
        for (var q = 0u; q < TIER_EXTERNAL && wt == TIER_NONE; q++) {
            let cap = usable_capacity(q);
            if (resident && cap > 0.0 && st.total <= cap) {
                wt = q;
                at = q;
                head = min(head, cap - st.total);
            } else if (cap > 0.0 && ext > 0.0 && st.state <= ext && st.working <= cap) {
                wt = TIER_EXTERNAL;
                at = q;
                head = min(head, cap - st.working);
            }
        }
        if (wt == TIER_NONE) {
            return infeasible(REASON_MEMORY, max(usable_capacity(TIER_SRAM), usable_capacity(TIER_HBM)) - st.total);
        }
        // the form of the stage's program the placement selects (`cpu::streams`)
        let st_streams = streams(wt);
        let bw_w = tier_bandwidth(wt);
        let bw_a = tier_bandwidth(at);
        // each tier's energy per byte (`cpu::tier_energy`)
        let e_w = X[TIER_ENERGY[wt]];
        let e_a = X[TIER_ENERGY[at]];

        // per section, indexed by SECTION_MICRO_BATCH and SECTION_STEP
        var comp = array<f32, 2>(0.0, 0.0);
        var mem = array<f32, 2>(0.0, 0.0);
        var comm = array<f32, 2>(0.0, 0.0);
        var oth = array<f32, 2>(0.0, 0.0);
        var busy = array<f32, 2>(0.0, 0.0);
        // the memory-bound operators' compute and memory time per section and ridge bin
        // (`cpu::ridge_bins`, which the CPU gathers only for a throttled point)
        var hid = array<f32, 2 * RIDGE_BINS>();
        var mmb = array<f32, 2 * RIDGE_BINS>();
        var mult = array<f32, 2>(pr.micro_batches, 1.0);
        var bwd_mb = 0.0;
        var fwd_mb = 0.0;
        var flop_energy = 0.0;
        var dyn_energy = 0.0;
        // the stage's operators, each at its roofline (`cpu::stage_ops`, `cpu::op_time`)
        for (var i = 0u; i < st.n_ops; i++) {
            let op = read_OpRec(st.op_start + i * OpRec_RECS);
            if (!runs(op.form, st_streams)) {
                continue;
            }
            if (op.phase == PHASE_STORE || op.phase == PHASE_HOST) {
                // inside the weight store, or on the host (`cpu::off_device_time`): off the
                // device's clock and power; the host has no FLOP rate (its ops carry no FLOPs)
                var s_rate = X[F_STORE_COMPUTE];
                var s_bw = X[F_STORE_MEMORY_BANDWIDTH];
                if (op.phase == PHASE_HOST) {
                    s_rate = 0.0;
                    s_bw = X[F_HOST_MEMORY_BANDWIDTH];
                }
                if ((op.flops > 0.0 && s_rate <= 0.0) || (op.weight_bytes > 0.0 && s_bw <= 0.0)) {
                    return infeasible(REASON_NO_COMPUTE, head);
                }
                var s_c = 0.0;
                if (op.flops > 0.0) {
                    s_c = op.flops / s_rate;
                }
                var s_m = 0.0;
                if (op.weight_bytes > 0.0) {
                    s_m = op.weight_bytes / s_bw;
                }
                oth[op.section] += max(s_c, s_m) * op.count;
                continue;
            }
            var eff = X[op.eff];
            if (op.eff2 < NX) {
                eff *= X[op.eff2];
            }
            if (op.eff3 < NX) {
                eff *= X[op.eff3];
            }
            let rate = X[op.rate] * eff;
            if (op.flops > 0.0 && rate <= 0.0) {
                return infeasible(REASON_NO_COMPUTE, head);
            }
            var t_c = 0.0;
            if (op.flops > 0.0) {
                t_c = op.flops / (rate * op.occupancy);
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
                // its ridge bin (`cpu::ridge_bin`): compute / memory in quarters, compared
                var rb = s * RIDGE_BINS;
                for (var q = 1u; q < RIDGE_BINS; q++) {
                    if (t_c * f32(RIDGE_BINS) >= f32(q) * t_m) {
                        rb += 1u;
                    }
                }
                hid[rb] += t_c * op.count;
                mmb[rb] += t_m * op.count;
            }
            oth[s] += ko * op.count;
            let tt = (max(t_c, t_m) + ko) * op.count;
            busy[s] += tt;
            if (s == SECTION_MICRO_BATCH && op.phase == PHASE_BACKWARD) {
                bwd_mb += tt;
            }
            if (s == SECTION_MICRO_BATCH && op.phase == PHASE_FORWARD) {
                fwd_mb += tt;
            }
            flop_energy += mult[s] * op.count * op.flops * X[op.epf];
            dyn_energy += mult[s] * op.count * (op.weight_bytes * e_w + op.act_bytes * e_a);
        }
        // the stack's hand-off of each micro-batch the stage passes on (`cpu::eval_traced`)
        let hand_off = st.hands_on * X[F_PIPELINE_STAGE_TIME];
        oth[0] += hand_off;
        busy[0] += hand_off;
        // what the overlapped collectives take from the compute beside them (`cpu::collective_tax`)
        let tax = collective_tax(st, st_streams, vec4<f32>(fwd_mb, bwd_mb, busy[0], busy[1]));
        comp[0] += tax.x;
        busy[0] += tax.x;
        comp[1] += tax.w;
        busy[1] += tax.w;
        fwd_mb += tax.y;
        bwd_mb += tax.z;
        // link timelines per link class (`cpu::stage_links`, `cpu::schedule`): the micro-batch's,
        // the step section's, and the first micro-batch's (its forward's collectives, the step's
        // behind that forward, then its backward's again), and the copies of a micro-batch's the
        // spread collectives' calls run on; passes as `cpu::PASSES`: 0 the collectives released
        // at their section's start, 1 those behind a micro-batch's backward, 2 the step's spread
        // over forwards, 3 the backward ones again on that copy, 4 the step's spread over earlier
        // backwards, 5 the step's behind the first forward, 6 the first micro-batch's backward
        // ones again on its timeline, 7 the step's behind the last backward (`Booking::pass`)
        var free = array<f32, 5>(0.0, 0.0, 0.0, 0.0, 0.0);
        var free_st = array<f32, 5>(0.0, 0.0, 0.0, 0.0, 0.0);
        var first = array<f32, 5>(0.0, 0.0, 0.0, 0.0, 0.0);
        var head = array<f32, 5>(0.0, 0.0, 0.0, 0.0, 0.0);
        var tail = array<f32, 5>(0.0, 0.0, 0.0, 0.0, 0.0);
        var end_head = 0.0;
        var end_tail = 0.0;
        var late_head = 0.0;
        var head_windows = 0.0;
        var any_head = false;
        var release_head = 0.0;
        var end_mb = busy[0];
        var end_st = busy[1];
        var end_last = 0.0;
        var end_first = 0.0;
        var late_fwd = 0.0;
        var late_first = 0.0;
        var release_bwd = 0.0;
        var release_first = 0.0;
        var any_fwd_step = false;
        // the pass of `Booking::pass` each pass books (`cpu::PASSES`)
        var passes = array<u32, 8>(0u, 1u, 5u, 1u, 4u, 2u, 1u, 3u);
        for (var ps = 0u; ps < 8u; ps++) {
            if (ps == 1u) {
                first = free;
                release_bwd = busy[0] - bwd_mb + late_fwd;
            }
            if (ps == 2u) {
                head = first;
                end_head = end_mb;
                late_head = late_fwd;
            }
            if (ps == 3u) {
                if (!any_head) {
                    continue;
                }
                release_head = busy[0] - bwd_mb + late_head;
            }
            if (ps == 4u) {
                tail = free;
                end_tail = end_mb;
            }
            if (ps == 5u) {
                end_last = end_mb;
                end_first = end_mb;
                late_first = late_fwd;
            }
            if (ps == 6u) {
                if (!any_fwd_step) {
                    continue;
                }
                release_first = busy[0] - bwd_mb + late_first;
            }
            if (ps == 7u && pr.micro_batches <= 1.0 && any_fwd_step) {
                free = first;
                release_bwd = release_first;
                end_last = end_first;
            }
            let books = passes[ps];
            for (var i = 0u; i < st.n_comms; i++) {
                let c = read_CommRec(st.comm_start + i * CommRec_RECS);
                let s = c.section;
                if (booking_pass(c.booking) != books || !runs(c.form, st_streams)) {
                    continue;
                }
                var lt = collective_links(c);
                // a spread collective's calls each run behind their own micro-batch
                let spread = c.booking == BOOKING_STEP_TAIL_BACKWARD || c.booking == BOOKING_STEP_HEAD_FORWARD;
                if (!spread) {
                    for (var j = 0u; j < 5u; j++) {
                        lt[j] *= c.count;
                    }
                }
                if (ps == 3u) {
                    // a head window's backward collectives again, on its copy, after the head's
                    // calls: what they add is the head's doing, once per window
                    comm[1] += head_windows * extend(&end_head, schedule(lt, c.overlapped, release_head, &head));
                    continue;
                }
                if (ps == 6u) {
                    // what the first micro-batch's backward collectives add to its end: the
                    // step's collectives' doing; their energy counts once, in pass 1
                    comm[1] += extend(&end_first, schedule(lt, c.overlapped, release_first, &first));
                    continue;
                }
                var exposed = 0.0;
                if (c.booking == BOOKING_EXPOSED) {
                    exposed = combine(lt, c.overlapped);
                } else if (c.booking == BOOKING_MICRO_BATCH_FORWARD) {
                    let f = schedule(lt, c.overlapped, 0.0, &free);
                    late_fwd = max(late_fwd, f - fwd_mb);
                    exposed = extend(&end_mb, f - fwd_mb + busy[0]);
                } else if (c.booking == BOOKING_MICRO_BATCH) {
                    exposed = extend(&end_mb, schedule(lt, c.overlapped, 0.0, &free));
                } else if (c.booking == BOOKING_STEP) {
                    exposed = extend(&end_st, schedule(lt, c.overlapped, 0.0, &free_st));
                } else if (c.booking == BOOKING_MICRO_BATCH_BACKWARD) {
                    exposed = extend(&end_mb, schedule(lt, c.overlapped, release_bwd, &free));
                } else if (c.booking == BOOKING_STEP_BACKWARD) {
                    exposed = extend(&end_last, schedule(lt, c.overlapped, release_bwd, &free));
                } else if (c.booking == BOOKING_STEP_TAIL_BACKWARD) {
                    let f = schedule(lt, c.overlapped, release_bwd, &tail);
                    exposed = c.count * extend(&end_tail, f);
                } else if (c.booking == BOOKING_STEP_HEAD_FORWARD) {
                    let f = schedule(lt, c.overlapped, 0.0, &head);
                    late_head = max(late_head, f - fwd_mb);
                    head_windows = max(head_windows, c.count);
                    any_head = true;
                    exposed = c.count * extend(&end_head, f - fwd_mb + busy[0]);
                } else {
                    let f = schedule(lt, c.overlapped, 0.0, &first);
                    late_first = max(late_first, f - fwd_mb);
                    any_fwd_step = true;
                    exposed = extend(&end_first, f + busy[0] - fwd_mb);
                }
                comm[s] += exposed;
                // the traffic's energy per call (`cpu::traffic_energy`)
                dyn_energy += mult[s] * c.count
                    * (up_bytes(c) * X[F_UP_ENERGY] + out_bytes(c) * X[F_OUT_ENERGY] + c.host_bytes * X[F_HOST_ENERGY]
                       + c.mesh_hop_bytes * X[F_MESH_ENERGY]);
            }
        }
        R_OTHER[k] = dyn_energy;
        R_FLOP[k] = flop_energy;
        R_S[k] = 1.0;
        wt_s[k] = wt;
        let b0 = vec4<f32>(comp[0], mem[0], comm[0], oth[0]);
        let b1 = vec4<f32>(comp[1], mem[1], comm[1], oth[1]);
        R_C0[k] = b0.x;
        R_R0[k] = b0.y + b0.z + b0.w;
        R_C1[k] = b1.x;
        R_R1[k] = b1.y + b1.z + b1.w;
        R_REP[k] = st.repeat;
        R_POOL[k] = st.pool;
        for (var i = 0u; i < 2u * RIDGE_BINS; i++) {
            R_H[k * 2u * RIDGE_BINS + i] = hid[i];
            R_M[k * 2u * RIDGE_BINS + i] = mmb[i];
        }
    }
    let t_full = round_time();
    if (bad || !(t_full > 0.0 && t_full < 3.0e38)) {
        return infeasible(REASON_NO_COMPUTE, head);
    }
    // The operating point under the power limit (`cpu::under_limit`, `cpu::Demand::operate`):
    // each class at the
    // highest clock its devices' limit allows over the step; the step the least T with
    // T ≥ the round at the clocks T allows (bisection in THROTTLE_STEPS steps, `cpu::throttle_steps`
    // of f32, where the CPU runs `cpu::least_fixed_point`), and no shorter than the class
    // needing the most energy at its lowest clock needs (it duty-cycles).
    let cap = power_limit();
    let idle = X[F_IDLE_POWER];
    var throttled = false;
    for (var k = 0u; k < n_st; k++) {
        // the class's demand at full clock (`cpu::Demand::demand`, `cpu::demand_at_full`)
        throttled = throttled || idle + (R_FLOP[k] + R_OTHER[k]) / t_full > cap;
    }
    var t_step = t_full;
    var t_e = 0.0;
    var least = 0.0;
    if (throttled) {
        if (cap <= idle) {
            return infeasible(REASON_POWER_CAP, head);
        }
        let lo = lowest_clock();
        let v_lo = voltage(lo);
        for (var k = 0u; k < n_st; k++) {
            // the energy a class needs at its lowest clock (`cpu::Demand::least_energy`)
            least = max(least, R_FLOP[k] * v_lo * v_lo + R_OTHER[k]);
        }
        t_e = least / (cap - idle);
        set_clocks(t_e);
        if (t_e >= round_time()) {
            t_step = t_e;
        } else {
            var a = max(t_e, t_full);
            for (var k = 0u; k < n_st; k++) {
                R_S[k] = lo;
            }
            var b = round_time();
            for (var i = 0u; i < THROTTLE_STEPS; i++) {
                let mid = 0.5 * (a + b);
                set_clocks(mid);
                if (mid >= round_time()) {
                    b = mid;
                } else {
                    a = mid;
                }
            }
            t_step = b;
        }
        set_clocks(t_step);
    }
    let v_lo = voltage(lowest_clock());
    var power = 0.0;
    for (var k = 0u; k < n_st; k++) {
        let st = read_StageRec(pr.stage_start + k * StageRec_RECS);
        let v = voltage(R_S[k]);
        var dev_power = idle + (R_FLOP[k] * v * v + R_OTHER[k]) / t_step;
        if (throttled && (R_S[k] < 1.0 || (t_step == t_e && R_FLOP[k] * v_lo * v_lo + R_OTHER[k] == least))) {
            // the limit set the class's clock or the step: power = limit (`cpu::Demand::power`)
            dev_power = cap;
        }
        power += st.repeat * st.devices * system_power(dev_power, wt_s[k]);
    }
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

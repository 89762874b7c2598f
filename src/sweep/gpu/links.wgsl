// The link section of the cost program's interpreter: collectives on the link classes, their
// alpha-beta time per class, the link timelines that schedule them and what overlapped ones take
// from the compute beside them; the port of `engine/cpu/links.rs` (every `cpu::` name below is the
// counterpart of the function it comments). `eval.wgsl` runs them in its stage loops.

// A collective on the mesh (`cpu::mesh_link`): its hops, and its bytes streamed at the slower of
// the link and the software's relay of each element.
fn mesh_link(c: CommRec) -> f32 {
    let streamed = max(link(c.mesh_bytes, X[F_MESH_LINK_BANDWIDTH], 0.0, 0.0),
                       c.mesh_relayed * X[F_MESH_RELAY_TIME]);
    return streamed + c.mesh_lat * X[F_MESH_HOP_LATENCY];
}

// Time on one link class (`cpu::link`): latencies × latency + bytes / bandwidth.
fn link(bytes: f32, bw: f32, lats: f32, lat: f32) -> f32 {
    var t = lats * lat;
    if (bytes > 0.0) {
        t += div(bytes, bw);
    }
    return t;
}

// A collective's time from its time per link class (`cpu::combine`): the classes add, or the
// slower of scale-up and scale-out bounds an all-to-all driving both at once.
fn combine(l: array<f32, 5>, overlapped: u32) -> f32 {
    if (overlapped != 0u) {
        return max(l[0], l[1]) + l[3] + l[4];
    }
    return l[0] + l[1] + l[2] + l[3] + l[4];
}

// One phase of a collective on the link timelines (`cpu::schedule`): on the links among `k0`,
// `k1` it sends over, once they are free and the previous phase is done; returns its end.
fn phase(time: array<f32, 5>, k0: u32, k1: u32, d: f32, at: f32, free: ptr<function, array<f32, 5>>) -> f32 {
    if (d <= 0.0) {
        return at;
    }
    var start = at;
    if (time[k0] > 0.0) {
        start = max(start, (*free)[k0]);
    }
    if (time[k1] > 0.0) {
        start = max(start, (*free)[k1]);
    }
    let e = start + d;
    if (time[k0] > 0.0) {
        (*free)[k0] = e;
    }
    if (time[k1] > 0.0) {
        (*free)[k1] = e;
    }
    return e;
}

// A collective's phases on the link timelines from `release` (`cpu::schedule`): in link-class
// order, or an all-to-all holding scale-up and scale-out at once; returns when it finishes.
fn schedule(time: array<f32, 5>, overlapped: u32, release: f32, free: ptr<function, array<f32, 5>>) -> f32 {
    var at = release;
    if (overlapped != 0u) {
        at = phase(time, 0u, 1u, max(time[0], time[1]), at, free);
        at = phase(time, 3u, 3u, time[3], at, free);
        return phase(time, 4u, 4u, time[4], at, free);
    }
    for (var k = 0u; k < 5u; k++) {
        at = phase(time, k, k, time[k], at, free);
    }
    return at;
}

// The scale-up and scale-out bytes of a collective, with in-network reduction where the
// switches offer it (`cpu::collective`, which reports them; the CPU indexes them in place).
fn up_bytes(c: CommRec) -> f32 {
    return select(c.up_bytes, c.up_bytes_inr, X[F_UP_INR] != 0.0);
}

// The scale-out bytes (`cpu::collective`), as `up_bytes`.
fn out_bytes(c: CommRec) -> f32 {
    return select(c.out_bytes, c.out_bytes_inr, X[F_OUT_INR] != 0.0);
}

// One call of a collective on each link class (`cpu::collective_links`).
fn collective_links(c: CommRec) -> array<f32, 5> {
    let net = X[F_EFF_NETWORK];
    let up_lat = select(c.up_lat, c.up_lat_inr, X[F_UP_INR] != 0.0);
    let out_lat = select(c.out_lat, c.out_lat_inr, X[F_OUT_INR] != 0.0);
    return array<f32, 5>(
        link(up_bytes(c), X[F_UP_BANDWIDTH] * net * c.share, up_lat, X[F_UP_LATENCY]),
        link(out_bytes(c), X[F_OUT_BANDWIDTH] * net, out_lat, X[F_OUT_LATENCY]),
        link(c.ext_bytes, X[F_EXT_BANDWIDTH] * net, c.ext_lat, X[F_EXT_LATENCY]),
        mesh_link(c),
        link(c.host_bytes, X[F_HOST_BANDWIDTH] * net, c.host_lat, X[F_HOST_LATENCY]),
    );
}

// What a stage's overlapped collectives take from the compute they hide behind
// (`cpu::collective_tax`): (per micro-batch in all, of it its forward's and its backward's part,
// once per step), from the windows (forward, backward, micro-batch, step section).
fn collective_tax(st: StageRec, st_streams: bool, w: vec4<f32>) -> vec4<f32> {
    let share = X[F_COMM_SHARE];
    if (share <= 0.0) {
        return vec4<f32>(0.0);
    }
    var d = array<f32, 8>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    // the most windows a spread group's collectives take (`cpu::collective_tax`)
    var spread = vec2<f32>(0.0, 0.0);
    for (var i = 0u; i < st.n_comms; i++) {
        let c = read_CommRec(st.comm_start + i * CommRec_RECS);
        if (c.booking == BOOKING_EXPOSED || c.cores <= 0.0 || !runs(c.form, st_streams)) {
            continue;
        }
        let g = tax_group(c.booking);
        let l = collective_links(c);
        var t = l[0] + l[1];
        if (c.overlapped != 0u) {
            t = max(l[0], l[1]);
        }
        d[g] += t * c.count * c.cores;
        if (g == 6u) {
            spread.x = max(spread.x, c.count);
        } else if (g == 7u) {
            spread.y = max(spread.y, c.count);
        }
    }
    let f = share * min(d[0], w.x);
    let b = share * min(d[1], w.y);
    let cm = share * min(d[2], w.z);
    let step = share * min(d[3], w.w) + share * min(d[4], w.x) + share * min(d[5], w.y)
        + share * min(d[6], spread.x * w.y) + share * min(d[7], spread.y * w.x);
    return vec4<f32>(f + b + cm, f + cm / 3.0, b + 2.0 * cm / 3.0, step);
}

// The group whose compute window an overlapped collective takes cores from
// (`Booking::tax_group`): 0 a micro-batch's forward, 1 its backward, 2 the whole micro-batch,
// 3 the step section, 4 and 5 the forward and backward a step's collective rides, 6 and 7 the
// backwards and forwards a step's collective is spread over.
fn tax_group(b: u32) -> u32 {
    switch b {
        case BOOKING_MICRO_BATCH_FORWARD: { return 0u; }
        case BOOKING_MICRO_BATCH_BACKWARD: { return 1u; }
        case BOOKING_MICRO_BATCH: { return 2u; }
        case BOOKING_STEP: { return 3u; }
        case BOOKING_STEP_FORWARD: { return 4u; }
        case BOOKING_STEP_TAIL_BACKWARD: { return 6u; }
        case BOOKING_STEP_HEAD_FORWARD: { return 7u; }
        default: { return 5u; }
    }
}

// The pass of the link timelines that books a collective (`Booking::pass`).
fn booking_pass(b: u32) -> u32 {
    switch b {
        case BOOKING_MICRO_BATCH_BACKWARD: { return 1u; }
        case BOOKING_STEP_FORWARD: { return 2u; }
        case BOOKING_STEP_BACKWARD: { return 3u; }
        case BOOKING_STEP_TAIL_BACKWARD: { return 4u; }
        case BOOKING_STEP_HEAD_FORWARD: { return 5u; }
        default: { return 0u; }
    }
}

// Move a section's end to `at` if later; returns by how much (`cpu::extend`).
fn extend(end: ptr<function, f32>, at: f32) -> f32 {
    if (at > *end) {
        let d = at - *end;
        *end = at;
        return d;
    }
    return 0.0;
}

//! The records the host packs and the kernel reads, declared once in Rust (`#[repr(C)]`, Pod)
//! and generated into the shader source: the WGSL struct of each, and for those stored in the
//! shared record array a reader that reassembles it from 8-word `Rec`s. A field cannot drift
//! between host and kernel, because neither side writes the layout by hand.
//!
//! Records in the array are multiples of 8 words: words 0-3 of each 8 are read as `vec4<u32>`,
//! words 4-7 as `vec4<f32>`; a field of the other type is bitcast, so any order of u32 and f32
//! fields works.

/// Words in one `Rec` of the shared record array (a `vec4<u32>` and a `vec4<f32>`).
pub const REC_WORDS: usize = 8;

/// A record whose WGSL form is generated from its Rust definition.
pub trait Layout: bytemuck::Pod {
    const NAME: &'static str;
    /// (field, `u32` | `f32`) in memory order.
    const FIELDS: &'static [(&'static str, &'static str)];

    /// The WGSL struct.
    fn wgsl_struct() -> String {
        let fields: Vec<String> = Self::FIELDS
            .iter()
            .map(|(n, t)| format!("    {n}: {t},"))
            .collect();
        format!("struct {} {{\n{}\n}}\n", Self::NAME, fields.join("\n"))
    }

    /// Records of the shared array this one occupies.
    fn recs() -> usize {
        Self::FIELDS.len().div_ceil(REC_WORDS)
    }

    /// `fn read_<Name>(i: u32) -> <Name>`: the record starting at `recs[i]`.
    fn wgsl_reader() -> String {
        assert_eq!(
            Self::FIELDS.len() % REC_WORDS,
            0,
            "{} is not a whole number of records",
            Self::NAME
        );
        let comp = ["x", "y", "z", "w"];
        let args: Vec<String> = Self::FIELDS
            .iter()
            .enumerate()
            .map(|(k, (_, t))| {
                let (r, w) = (k / REC_WORDS, k % REC_WORDS);
                let (half, native) = if w < 4 { ("u", "u32") } else { ("f", "f32") };
                let e = format!("r{r}.{half}.{}", comp[w % 4]);
                if *t == native {
                    e
                } else {
                    format!("bitcast<{t}>({e})")
                }
            })
            .collect();
        let loads: String = (0..Self::recs())
            .map(|r| format!("    let r{r} = recs[i + {r}u];\n"))
            .collect();
        format!(
            "const {n}_RECS: u32 = {k}u;\nfn read_{n}(i: u32) -> {n} {{\n{loads}    return {n}({});\n}}\n",
            args.join(", "),
            n = Self::NAME,
            k = Self::recs(),
        )
    }

    /// This record as words of the shared array.
    fn words(&self) -> &[u32] {
        bytemuck::cast_slice(std::slice::from_ref(self))
    }

    /// This record as bytes (a uniform buffer's contents).
    fn bytes(&self) -> &[u8] {
        bytemuck::bytes_of(self)
    }
}

macro_rules! gpu_record {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $field:ident : $ty:ident),* $(,)? }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
        pub struct $name { $($(#[$fm])* pub $field: $ty),* }
        impl Layout for $name {
            const NAME: &'static str = stringify!($name);
            const FIELDS: &'static [(&'static str, &'static str)] =
                &[$((stringify!($field), stringify!($ty))),*];
        }
    };
}

gpu_record! {
    /// One operator: the machine slots its rate and energy read, and its work per call.
    OpRec {
        /// Slot of its peak (peak row + precision).
        rate: u32,
        /// Slot of its efficiency, and of a second and third factor (`NX` = none).
        eff: u32,
        eff2: u32,
        /// Slot of its energy per FLOP.
        epf: u32,
        flops: f32,
        weight_bytes: f32,
        act_bytes: f32,
        count: f32,
        section: u32,
        phase: u32,
        eff3: u32,
        /// The form of the program it belongs to (`program::Form`).
        form: u32,
        /// Share of the units' time doing useful work (`Op::occupancy`).
        occupancy: f32,
        pad3: f32,
        pad4: f32,
        pad5: f32,
    }
}

gpu_record! {
    /// One collective as alpha-beta coefficients per link class (`engine::coeffs`).
    CommRec {
        section: u32,
        overlap: u32,
        /// 1: the slowest link class bounds it (all-to-all), else the classes add.
        overlapped: u32,
        /// The part of the cores' share it takes while overlapped (`Coeffs::cores`).
        cores: f32,
        share: f32,
        count: f32,
        ext_lat: f32,
        ext_bytes: f32,
        up_lat: f32,
        up_bytes: f32,
        up_lat_inr: f32,
        up_bytes_inr: f32,
        out_lat: f32,
        out_bytes: f32,
        out_lat_inr: f32,
        out_bytes_inr: f32,
        mesh_lat: f32,
        mesh_bytes: f32,
        host_lat: f32,
        host_bytes: f32,
        mesh_relayed: f32,
        /// Bytes × hops on the mesh (`Link::hop_bytes`), for its energy per bit-hop.
        mesh_hop_bytes: f32,
        /// Where it is booked on the link timelines (`program::Booking`, settled when packed).
        booking: u32,
        /// The form of the program it belongs to (`program::Form`).
        form: u32,
    }
}

gpu_record! {
    /// One sweep axis: kind 0 list (`count` values at `offset` of `vals`), 1 linear, 2 log.
    AxisRec {
        kind: u32,
        count: u32,
        offset: u32,
        pad0: u32,
        lo: f32,
        hi: f32,
        ln_ratio: f32,
        pad1: f32,
    }
}

gpu_record! {
    /// One axis target: op 0 sets `field = max(v × scale + offset, floor)`, op 1 divides
    /// `field = field × scale / v`.
    TargetRec {
        axis: u32,
        field: u32,
        op: u32,
        pad0: u32,
        scale: f32,
        offset: f32,
        floor: f32,
        pad1: f32,
    }
}

gpu_record! {
    /// One program: where its records and base machine are, and its scalars.
    ProgRec {
        op_start: u32,
        n_ops: u32,
        comm_start: u32,
        n_comms: u32,
        base: u32,
        mfu_prec: u32,
        /// Its stage records (`StageRec`) in the shared array: at least one.
        stage_start: u32,
        n_stages: u32,
        micro_batches: f32,
        bubble: f32,
        devices: f32,
        units: f32,
        model_flops: f32,
        state: f32,
        working: f32,
        total: f32,
        /// `Program::host_steps`.
        host_steps: f32,
        pad0: f32,
        pad1: f32,
        pad2: f32,
    }
}

gpu_record! {
    /// One class of identical pipeline stages (`engine::program::Stage`): its operators and
    /// collectives (absolute record positions), how many stages, their devices and footprint.
    StageRec {
        op_start: u32,
        n_ops: u32,
        comm_start: u32,
        n_comms: u32,
        repeat: f32,
        devices: f32,
        state: f32,
        working: f32,
        total: f32,
        /// Activations offloaded to host memory (`Footprint::offloaded`).
        offloaded: f32,
        /// `Stage::hands_on`.
        hands_on: f32,
        pad2: f32,
        /// 1: a concurrent pool outside the pipeline's chain (`Stage::pool`).
        pool: u32,
        /// 1: the state stays in the weight store wherever it holds it (`Footprint::streamed`).
        streamed: u32,
        pad5: u32,
        pad6: u32,
    }
}

gpu_record! {
    /// The uniform parameters of one dispatch.
    Params {
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
        /// 0: every point's figures; 1: screening.
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
}

/// Codes the host writes into records and parameters and the kernel tests for.
pub mod code {
    pub const SAMPLING_GRID: u32 = 0;
    pub const SAMPLING_RANDOM: u32 = 1;
    pub const SAMPLING_LATIN_HYPERCUBE: u32 = 2;
    pub const AXIS_LIST: u32 = 0;
    pub const AXIS_LINEAR: u32 = 1;
    pub const AXIS_LOG: u32 = 2;
    pub const TARGET_SET: u32 = 0;
    pub const TARGET_DIV: u32 = 1;
    /// `Params::mode`: every point's figures, or screening.
    pub const MODE_FULL: u32 = 0;
    pub const MODE_SCREEN: u32 = 1;
}

/// The codes above, the cost program's enums (sections, phases, bookings, forms) and the metric
/// codes, as WGSL constants.
pub(super) fn codes() -> String {
    use crate::engine::program::{Form, Phase, Section};
    use code::*;
    let mut v: Vec<(String, u32)> = [
        ("SAMPLING_GRID", SAMPLING_GRID),
        ("SAMPLING_RANDOM", SAMPLING_RANDOM),
        ("SAMPLING_LATIN_HYPERCUBE", SAMPLING_LATIN_HYPERCUBE),
        ("AXIS_LIST", AXIS_LIST),
        ("AXIS_LINEAR", AXIS_LINEAR),
        ("AXIS_LOG", AXIS_LOG),
        ("TARGET_SET", TARGET_SET),
        ("TARGET_DIV", TARGET_DIV),
        ("MODE_FULL", MODE_FULL),
        ("MODE_SCREEN", MODE_SCREEN),
        ("SECTION_MICRO_BATCH", Section::MicroBatch as u32),
        ("SECTION_STEP", Section::Step as u32),
        ("PHASE_FORWARD", Phase::Forward as u32),
        ("PHASE_BACKWARD", Phase::Backward as u32),
        ("PHASE_STORE", Phase::Store as u32),
        ("PHASE_HOST", Phase::Host as u32),
        ("FORM_BOTH", Form::Both as u32),
        ("FORM_ON_DEVICE", Form::OnDevice as u32),
        ("FORM_STREAMED", Form::Streamed as u32),
    ]
    .iter()
    .map(|(n, c)| (n.to_string(), *c))
    .collect();
    for b in crate::engine::program::Booking::ALL {
        v.push((
            format!("BOOKING_{}", upper_snake(&format!("{b:?}"))),
            b as u32,
        ));
    }
    for m in crate::sweep::metric::Metric::ALL {
        v.push((format!("METRIC_{}", m.name().to_uppercase()), m.code()));
    }
    v.iter()
        .map(|(n, c)| format!("const {n}: u32 = {c}u;\n"))
        .collect()
}

/// `MicroBatchForward` → `MICRO_BATCH_FORWARD`.
fn upper_snake(name: &str) -> String {
    let mut s = String::new();
    for (i, ch) in name.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            s.push('_');
        }
        s.push(ch.to_ascii_uppercase());
    }
    s
}

/// The generated part of the shader: every record's struct, the readers of those in the shared
/// record array, and the shared `Rec` shape.
pub fn wgsl() -> String {
    let mut s = codes();
    s += &format!(
        "const MAX_STAGES: u32 = {}u;\nconst RIDGE_BINS: u32 = {}u;\nconst THROTTLE_STEPS: u32 = {}u;\n",
        crate::engine::program::MAX_STAGES,
        crate::engine::cpu::RIDGE_BINS,
        crate::engine::cpu::throttle_steps(f32::MANTISSA_DIGITS)
    );
    s += "struct Rec {\n    u: vec4<u32>,\n    f: vec4<f32>,\n}\n";
    s += &Params::wgsl_struct();
    s += &ProgRec::wgsl_struct();
    for (st, rd) in [
        (OpRec::wgsl_struct(), OpRec::wgsl_reader()),
        (CommRec::wgsl_struct(), CommRec::wgsl_reader()),
        (StageRec::wgsl_struct(), StageRec::wgsl_reader()),
        (AxisRec::wgsl_struct(), AxisRec::wgsl_reader()),
        (TargetRec::wgsl_struct(), TargetRec::wgsl_reader()),
    ] {
        s += &st;
        s += &rd;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_bitcast_fields_outside_their_half() {
        let r = OpRec::wgsl_reader();
        assert!(r.contains("const OpRec_RECS: u32 = 2u;"));
        // word 8 (section) sits in the u half of the second record; word 12 (occupancy) in its f half
        assert!(r.contains("r1.u.x"), "{r}");
        let c = CommRec::wgsl_reader();
        assert!(c.contains("bitcast<f32>(r1.u.x)"), "{c}");
        assert_eq!(std::mem::size_of::<Params>(), 24 * 4);
        assert_eq!(std::mem::size_of::<ProgRec>(), 20 * 4);
    }
}

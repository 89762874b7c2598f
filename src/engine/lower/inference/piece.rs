//! One class of identical stages as a serving program gets it ([`Piece`]): its layers, its
//! devices (or share of a wafer's), what it holds, its sends and the phases it runs. A leaf: the
//! stage classes (`stages`, `regions`) make pieces, the rest of the inference lowering reads them.

/// One class of stages as the program gets it: a class of the placement (`stages`), or on a mesh device one stage per
/// layer on a region (a share of a device).
#[derive(Clone, Copy, Debug)]
pub(super) struct Piece {
    pub repeat: u64,
    pub layers: u64,
    /// Devices of its tensor-parallel group.
    pub devices: u64,
    /// Devices it occupies (below `devices` for a region of a wafer).
    pub share: f64,
    pub embed: bool,
    pub head: bool,
    /// Cores along a row of its region (0: not on a mesh).
    pub side: f64,
    /// Its sends per micro-batch: to the neighbouring region, back across the wafer to the
    /// first region, to a device in its domain, to a device in another domain.
    pub sends: [f64; 4],
    /// The phases it runs: decode (the round's micro-batches) and prefill (the prompts). A
    /// wafer's mapping may give each phase its own core regions (`Mapping::regions`): then a
    /// phase's stages are apart from the other's.
    pub decode: bool,
    pub prefill: bool,
    /// Its region's cores (columns, rows) where a mapping states them; (0, 0) otherwise.
    pub region: (f64, f64),
}

impl Piece {
    /// The stage class's name in the program: the head alone, a phase's region of cores, or its
    /// layers on its devices (a share of one on a wafer).
    pub fn label(&self) -> String {
        if self.head && self.layers == 0 {
            "head".into()
        } else if self.decode != self.prefill {
            format!(
                "{}: {} layer(s) on {:.0} × {:.0} cores",
                if self.decode { "decode" } else { "prefill" },
                self.layers,
                self.region.0,
                self.region.1
            )
        } else if self.share < self.devices as f64 {
            format!("{} layer(s) on {:.4} device(s)", self.layers, self.share)
        } else {
            format!("{} layer(s) on {} device(s)", self.layers, self.devices)
        }
    }
}

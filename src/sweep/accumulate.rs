//! Streaming reductions of a sweep: a top-K heap and an incremental two-objective Pareto front,
//! both bounded in memory and independent of the order points arrive in (ties are broken by the
//! point's index), so shards, rayon tasks and GPU batches merge into exactly the answer one
//! sequential pass would give.
//!
//! [`Screen`] is the f32 counterpart used by the GPU backend: it keeps every point that could be
//! in the exact answer once the f32 rounding (bounded by a relative `margin`) is accounted for;
//! the survivors are re-evaluated in f64 and reduced exactly.

use super::metric::Metric;
use super::outcome::Outcome;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A point with the score it is ranked by (larger is better).
#[derive(Clone, Copy, Debug)]
struct Ranked {
    score: f64,
    o: Outcome,
}

impl Ranked {
    /// Better first: higher score, then lower index.
    fn cmp_better(&self, other: &Ranked) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then(self.o.index.cmp(&other.o.index))
    }
}

/// Heap order: the worst point is the greatest, so it sits on top and is evicted first.
struct Worst(Ranked);
impl PartialEq for Worst {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Worst {}
impl PartialOrd for Worst {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Worst {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.cmp_better(&o.0)
    }
}

/// The best `k` feasible points by one metric.
pub struct TopK {
    k: usize,
    metric: Metric,
    heap: BinaryHeap<Worst>,
}

impl TopK {
    pub fn new(k: usize, metric: Metric) -> Self {
        TopK {
            k,
            metric,
            // a `--top` far beyond the points a sweep has grows the heap as points come, rather
            // than reserving it all up front (`--top 1000000000` reserved 80 GB and aborted)
            heap: BinaryHeap::with_capacity(k.saturating_add(1).min(1 << 16)),
        }
    }
    pub fn push(&mut self, o: &Outcome) {
        if self.k == 0 {
            return;
        }
        let score = self.metric.score(o);
        if !score.is_finite() {
            return;
        }
        let r = Ranked { score, o: *o };
        if self.heap.len() < self.k {
            self.heap.push(Worst(r));
        } else if let Some(w) = self.heap.peek() {
            if r.cmp_better(&w.0) == Ordering::Less {
                self.heap.pop();
                self.heap.push(Worst(r));
            }
        }
    }
    pub fn merge(&mut self, other: TopK) {
        for w in other.heap {
            self.push(&w.0.o);
        }
    }
    /// Best first.
    pub fn into_sorted(self) -> Vec<Outcome> {
        let mut v: Vec<Ranked> = self.heap.into_iter().map(|w| w.0).collect();
        v.sort_by(|a, b| a.cmp_better(b));
        v.into_iter().map(|r| r.o).collect()
    }
    pub fn len(&self) -> usize {
        self.heap.len()
    }
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
    /// The score a point must beat to enter, once the heap is full.
    pub fn entry_score(&self) -> Option<f64> {
        (self.k > 0 && self.heap.len() == self.k)
            .then(|| self.heap.peek().map(|w| w.0.score))
            .flatten()
    }
}

#[derive(Clone, Copy, Debug)]
struct FP {
    a: f64,
    b: f64,
    o: Outcome,
}

/// The exact Pareto front of two metrics: points no other point is at least as good as in both
/// and better in one. Of exact duplicates the lowest index is kept. Stored as a staircase:
/// `a` strictly decreasing, `b` strictly increasing, so insertion is a binary search.
pub struct Front {
    ma: Metric,
    mb: Metric,
    pts: Vec<FP>,
}

impl Front {
    pub fn new(ma: Metric, mb: Metric) -> Self {
        Front {
            ma,
            mb,
            pts: Vec::new(),
        }
    }

    fn fp(&self, o: &Outcome) -> Option<FP> {
        let (a, b) = (self.ma.score(o), self.mb.score(o));
        (a.is_finite() && b.is_finite()).then_some(FP { a, b, o: *o })
    }

    pub fn push(&mut self, o: &Outcome) {
        if let Some(p) = self.fp(o) {
            self.insert(p);
        }
    }

    fn insert(&mut self, p: FP) {
        let pos = self.pts.partition_point(|f| f.a >= p.a);
        if pos > 0 {
            let f = &self.pts[pos - 1];
            if f.b >= p.b {
                if f.a == p.a && f.b == p.b && p.o.index < f.o.index {
                    self.pts[pos - 1] = p;
                }
                return;
            }
        }
        let start = if pos > 0 && self.pts[pos - 1].a == p.a {
            pos - 1
        } else {
            pos
        };
        let mut end = start;
        while end < self.pts.len() && self.pts[end].b <= p.b {
            end += 1;
        }
        self.pts.splice(start..end, [p]);
    }

    /// Whether some point of the front is better than `p` by more than the relative `margin` in
    /// both metrics, or equal in one and better by the margin in the other. Not where it equals
    /// `p` in both: points the f32 screen cannot tell apart may differ in the exact evaluation,
    /// where either may be on the front (two machine points of a sweep a few parts in 1e8 apart
    /// in throughput and power, one better in each), so both stay candidates.
    fn screens_out(&self, p: &FP, margin: f64) -> bool {
        let ta = p.a + margin * p.a.abs();
        let tb = p.b + margin * p.b.abs();
        let k = self.pts.partition_point(|f| f.a >= ta);
        if k > 0 {
            let f = &self.pts[k - 1];
            if f.b >= tb && f.o.index != p.o.index {
                return true;
            }
            let j = self.pts[..k].partition_point(|f| f.b < p.b);
            if j < k && self.pts[j].b == p.b && self.pts[j].o.index != p.o.index {
                return true;
            }
        }
        let j = self.pts.partition_point(|f| f.a > p.a);
        if j < self.pts.len() && self.pts[j].a == p.a {
            let f = &self.pts[j];
            if f.o.index != p.o.index && f.b >= tb {
                return true;
            }
        }
        false
    }

    pub fn merge(&mut self, other: Front) {
        for p in other.pts {
            self.insert(p);
        }
    }

    /// The front, best in the first metric first.
    pub fn into_sorted(self) -> Vec<Outcome> {
        self.pts.into_iter().map(|p| p.o).collect()
    }
    pub fn len(&self) -> usize {
        self.pts.len()
    }
    pub fn is_empty(&self) -> bool {
        self.pts.is_empty()
    }
}

/// A superset of the top-K and the Pareto front under values known only to within a relative
/// `margin` (f32 results): the K + `slack` best, and every point no front point beats by more
/// than the margin.
pub struct Screen {
    margin: f64,
    top: TopK,
    front: Front,
    band: Vec<FP>,
    pruned_at: usize,
}

impl Screen {
    pub fn new(
        k: usize,
        slack: usize,
        metric: Metric,
        pareto: (Metric, Metric),
        margin: f64,
    ) -> Self {
        Screen {
            margin,
            top: TopK::new(k + slack, metric),
            front: Front::new(pareto.0, pareto.1),
            band: Vec::new(),
            pruned_at: 0,
        }
    }

    pub fn push(&mut self, o: &Outcome) {
        self.top.push(o);
        let Some(p) = self.front.fp(o) else { return };
        if self.front.screens_out(&p, self.margin) {
            return;
        }
        self.front.insert(p);
        self.band.push(p);
        if self.band.len() > 2 * self.pruned_at + 4096 {
            self.prune();
        }
    }

    fn prune(&mut self) {
        let band = std::mem::take(&mut self.band);
        self.band = band
            .into_iter()
            .filter(|p| !self.front.screens_out(p, self.margin))
            .collect();
        self.pruned_at = self.band.len();
    }

    pub fn merge(&mut self, other: Screen) {
        self.top.merge(other.top);
        self.front.merge(other.front);
        self.band.extend(other.band);
        self.prune();
    }

    /// Indices of every candidate, deduplicated and sorted.
    pub fn candidates(mut self) -> Vec<u64> {
        self.prune();
        let mut v: Vec<u64> = self
            .top
            .into_sorted()
            .iter()
            .map(|o| o.index)
            .chain(self.band.iter().map(|p| p.o.index))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    pub fn band_len(&self) -> usize {
        self.band.len()
    }

    /// What a point must reach to be a candidate, for the GPU's own screening: the entry score of
    /// the top heap, and the front's (a, b) scores (a descending). Both lowered by the margin
    /// (and a little more for the conversion to f32), so the GPU lets through everything this
    /// screen would keep.
    pub fn bounds(&self) -> (f32, Vec<[f32; 2]>) {
        let down = |x: f64| (x - 1e-6 * x.abs()) as f32;
        let thr = match self.top.entry_score() {
            Some(t) => down(t - self.margin * t.abs()),
            None => f32::MIN,
        };
        let front = self
            .front
            .pts
            .iter()
            .map(|p| [down(p.a), down(p.b)])
            .collect();
        (thr, front)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(index: u64, throughput: f64, power: f64) -> Outcome {
        Outcome {
            index,
            reason: 0,
            step_time: 1.0 / throughput,
            energy_per_step: power / throughput,
            power,
            throughput,
            mfu: 0.5,
            headroom: 0.0,
            energy_per_unit: power / throughput,
        }
    }

    fn brute_front(pts: &[Outcome]) -> Vec<u64> {
        let mut keep = Vec::new();
        for p in pts {
            let dominated = pts.iter().any(|q| {
                let ge = q.throughput >= p.throughput && q.power <= p.power;
                let gt = q.throughput > p.throughput || q.power < p.power;
                (ge && gt)
                    || (q.throughput == p.throughput && q.power == p.power && q.index < p.index)
            });
            if !dominated {
                keep.push(p.index);
            }
        }
        keep.sort();
        keep
    }

    #[test]
    fn front_matches_brute_force_in_any_order() {
        let mut pts = Vec::new();
        let mut s = 7u32;
        for i in 0..3000u64 {
            s = super::super::space::mix(s.wrapping_add(1));
            let t = (s % 50) as f64 + 1.0;
            let p = ((s >> 8) % 40) as f64 + 1.0;
            pts.push(o(i, t, p));
        }
        let want = brute_front(&pts);
        for rev in [false, true] {
            let mut f = Front::new(Metric::Throughput, Metric::Power);
            let it: Vec<&Outcome> = if rev {
                pts.iter().rev().collect()
            } else {
                pts.iter().collect()
            };
            for p in it {
                f.push(p);
            }
            let mut got: Vec<u64> = f.into_sorted().iter().map(|o| o.index).collect();
            got.sort();
            assert_eq!(got, want);
        }
        // split into halves and merged
        let mut a = Front::new(Metric::Throughput, Metric::Power);
        let mut b = Front::new(Metric::Throughput, Metric::Power);
        for p in &pts[..1500] {
            a.push(p);
        }
        for p in &pts[1500..] {
            b.push(p);
        }
        a.merge(b);
        let mut got: Vec<u64> = a.into_sorted().iter().map(|o| o.index).collect();
        got.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn top_k_breaks_ties_by_index() {
        let mut t = TopK::new(3, Metric::Throughput);
        for (i, v) in [5.0, 7.0, 7.0, 1.0, 7.0, 6.0].iter().enumerate() {
            t.push(&o(i as u64, *v, 1.0));
        }
        let idx: Vec<u64> = t.into_sorted().iter().map(|o| o.index).collect();
        assert_eq!(idx, vec![1, 2, 4]);
    }

    #[test]
    fn screen_keeps_points_equal_in_f32_that_the_exact_front_tells_apart() {
        // two machine points 1.4e-8 apart in throughput and 7e-9 in power, one better in each
        // (as two points of a Mixtral sweep on 64 H100 are): both on the exact front, the same
        // in f32, where the screen once kept only the lower index
        let (a, b) = (
            o(240, 454164.426915167, 78394.5297188323),
            o(1658, 454164.4334267782, 78394.53026059906),
        );
        assert_eq!(brute_front(&[a, b]), vec![240, 1658]);
        let f32 = |x: Outcome| Outcome {
            throughput: x.throughput as f32 as f64,
            power: x.power as f32 as f64,
            ..x
        };
        assert_eq!(f32(a).throughput, f32(b).throughput);
        assert_eq!(f32(a).power, f32(b).power);
        let mut sc = Screen::new(
            1,
            0,
            Metric::Throughput,
            (Metric::Throughput, Metric::Power),
            4e-4,
        );
        for p in [f32(a), f32(b)] {
            sc.push(&p);
        }
        assert_eq!(sc.candidates(), vec![240, 1658]);
    }

    #[test]
    fn screen_drops_points_equal_in_one_metric_and_far_behind_in_the_other() {
        // every point at the same power (a cap pins them): only those within the margin of the
        // best throughput stay candidates
        let mut sc = Screen::new(
            1,
            0,
            Metric::Throughput,
            (Metric::Throughput, Metric::Power),
            4e-4,
        );
        for i in 0..10_000u64 {
            sc.push(&o(i, 1000.0 + i as f64, 500.0));
        }
        // the best, 10,999, and those within 4e-4 of it: 10,995 to 10,998
        assert_eq!(sc.candidates(), vec![9995, 9996, 9997, 9998, 9999]);
    }

    #[test]
    fn screen_keeps_the_exact_front_under_perturbation() {
        let mut pts = Vec::new();
        let mut s = 3u32;
        for i in 0..5000u64 {
            s = super::super::space::mix(s.wrapping_add(17));
            let t = 1.0 + (s % 100_000) as f64 / 1000.0;
            let p = 1.0 + ((s >> 7) % 100_000) as f64 / 1000.0;
            pts.push(o(i, t, p));
        }
        let want = brute_front(&pts);
        // perturb by up to 1e-6 relative, screen with margin 1e-5
        let mut sc = Screen::new(
            5,
            5,
            Metric::Throughput,
            (Metric::Throughput, Metric::Power),
            1e-5,
        );
        for p in &pts {
            let e = (super::super::space::mix(p.index as u32) % 2001) as f64 / 1000.0 - 1.0;
            let mut q = *p;
            q.throughput *= 1.0 + 1e-6 * e;
            q.power *= 1.0 - 1e-6 * e;
            sc.push(&q);
        }
        let c = sc.candidates();
        for w in want {
            assert!(c.binary_search(&w).is_ok(), "front point {w} screened out");
        }
    }
}

//! `sweep merge`: join shard summaries into the summary one run over all their points gives, and
//! refuse what would make that answer silently wrong — a summary edited after it was written, a
//! shard of another sweep, a range that is not the shard it claims, overlaps, and (unless asked
//! for) gaps.

use super::accumulate::{Front, TopK};
use super::report::{PointReport, Shard, Summary, FORMAT};
use super::run::shard_range;
use std::collections::BTreeMap;

/// How to merge.
#[derive(Clone, Copy, Debug, Default)]
pub struct MergeOptions {
    /// Keep this many best points (fewer than the shards kept, never more).
    pub top: Option<usize>,
    /// Join a set that does not cover the sweep; the result says `complete: false` and lists
    /// the `missing` ranges.
    pub allow_partial: bool,
}

/// Check one summary on its own: its format and version, its checksum, and that its counts,
/// ranges and points agree with each other. `Err` says what is wrong.
pub fn verify(s: &Summary) -> Result<(), String> {
    if s.format != FORMAT {
        return Err(format!(
            "not a sweep summary: format `{}`, expected `{FORMAT}`",
            s.format
        ));
    }
    if s.version != 1 {
        return Err(format!(
            "summary version {} is not one this tessera reads (1)",
            s.version
        ));
    }
    if s.checksum.is_empty() {
        return Err(
            "the summary has no checksum (written by an older tessera, or edited)\n\
             hint: run its shard again with this tessera"
                .into(),
        );
    }
    let want = s.compute_checksum();
    if s.checksum != want {
        return Err(format!(
            "the summary's figures do not match its checksum ({} written, {want} computed): it was \
             edited or damaged after it was written\nhint: run its shard again",
            s.checksum
        ));
    }
    let mut covered: u64 = 0;
    for x in &s.shards {
        let ok = x.count > 0
            && x.index < x.count
            && (x.start, x.end) == shard_range(s.total_points, x.index, x.count);
        if !ok {
            return Err(format!(
                "shard {}/{} claims points {}..{}, which is not that shard of {} points",
                x.index, x.count, x.start, x.end, s.total_points
            ));
        }
        covered += x.end - x.start;
    }
    let infeasible: u64 = s.infeasible.values().sum();
    if s.evaluated != covered || s.feasible.checked_add(infeasible) != Some(s.evaluated) {
        return Err(format!(
            "counts disagree: {} evaluated, {} feasible + {infeasible} infeasible, {covered} points \
             in its ranges",
            s.evaluated, s.feasible
        ));
    }
    let inside = |p: &PointReport| {
        s.shards.iter().any(|x| (x.start..x.end).contains(&p.index))
            && p.program < s.programs.len()
            && p.values.len() == s.axes.len()
    };
    if let Some(p) = s
        .top
        .iter()
        .chain(&s.front)
        .chain(&s.sample)
        .find(|p| !inside(p))
    {
        return Err(format!(
            "point {} is outside the summary's ranges, programs or axes",
            p.index
        ));
    }
    if s.top.len() > s.top_k {
        return Err(format!(
            "{} best points for a top_k of {}",
            s.top.len(),
            s.top_k
        ));
    }
    Ok(())
}

fn ranges(r: &[super::report::PointRange]) -> String {
    let v: Vec<String> = r
        .iter()
        .map(|r| format!("{}..{}", r.start, r.end))
        .collect();
    v.join(", ")
}

/// Join shard summaries, each with a label for its errors (its file name). Every part is
/// [`verify`]-ed; parts of different sweeps, overlapping ranges and (without
/// `allow_partial`) gaps are refused. Returns warnings beside the summary.
pub fn merge(
    parts: Vec<(String, Summary)>,
    opts: MergeOptions,
) -> Result<(Summary, Vec<String>), String> {
    for (label, s) in &parts {
        verify(s).map_err(|e| format!("{label}: {e}"))?;
    }
    let mut it = parts.into_iter();
    let Some((first_label, first)) = it.next() else {
        return Err("nothing to merge".into());
    };
    let rest: Vec<(String, Summary)> = it.collect();
    for (label, s) in &rest {
        if s.fingerprint != first.fingerprint
            || s.total_points != first.total_points
            || s.programs != first.programs
            || s.axes != first.axes
        {
            return Err(format!(
                "{label}: a shard of another sweep: fingerprint {} (`{}`), but {first_label} has {} \
                 (`{}`)",
                s.fingerprint, s.name, first.fingerprint, first.name
            ));
        }
        if s.objective != first.objective || s.pareto != first.pareto {
            return Err(format!(
                "{label}: ranked differently: objective {} / pareto {}, {}; {first_label}: {} / {}, {}",
                s.objective, s.pareto[0], s.pareto[1], first.objective, first.pareto[0], first.pareto[1]
            ));
        }
    }
    let mut shards: Vec<Shard> = first.shards.clone();
    for (_, s) in &rest {
        shards.extend(s.shards.iter().copied());
    }
    shards.sort();
    for w in shards.windows(2) {
        if w[1].start < w[0].end {
            return Err(format!(
                "shards overlap: points {}..{} and {}..{} (shard {}/{} given twice?)",
                w[0].start, w[0].end, w[1].start, w[1].end, w[1].index, w[1].count
            ));
        }
    }
    let mut warnings = Vec::new();
    let min_k = rest
        .iter()
        .map(|(_, s)| s.top_k)
        .fold(first.top_k, usize::min);
    let k = match opts.top {
        Some(t) if t > min_k => {
            warnings.push(format!(
                "the shards kept only their {min_k} best points; reporting {min_k}, not {t}"
            ));
            min_k
        }
        Some(t) => t,
        None => min_k,
    };
    let mut best = TopK::new(k, first.objective);
    let mut front = Front::new(first.pareto[0], first.pareto[1]);
    let mut points: BTreeMap<u64, PointReport> = BTreeMap::new();
    let mut out = first.clone();
    let mut backends = vec![first.backend.clone()];
    for s in std::iter::once(&first).chain(rest.iter().map(|(_, s)| s)) {
        for p in s.top.iter().chain(s.front.iter()) {
            points.insert(p.index, p.clone());
        }
        for p in &s.top {
            best.push(&p.outcome());
        }
        for p in &s.front {
            front.push(&p.outcome());
        }
        if !backends.contains(&s.backend) {
            backends.push(s.backend.clone());
        }
    }
    for (_, s) in &rest {
        out.sample.extend(s.sample.iter().cloned());
        out.evaluated += s.evaluated;
        out.feasible += s.feasible;
        for (r, n) in &s.infeasible {
            *out.infeasible.entry(r.clone()).or_default() += n;
        }
        for (r, n) in &s.infeasible_by_code {
            *out.infeasible_by_code.entry(r.clone()).or_default() += n;
        }
    }
    out.sample.sort_by_key(|p| p.index);
    out.sample.dedup_by_key(|p| p.index);
    out.shards = shards;
    out.backend = backends.join(" + ");
    out.top_k = k;
    out.top = best
        .into_sorted()
        .iter()
        .map(|o| points[&o.index].clone())
        .collect();
    out.front = front
        .into_sorted()
        .iter()
        .map(|o| points[&o.index].clone())
        .collect();
    out.seal();
    if !out.complete {
        let covered: u64 = out.shards.iter().map(|s| s.end - s.start).sum();
        let msg = format!(
            "the shards cover {covered} of {} points; missing points {}",
            out.total_points,
            ranges(&out.missing)
        );
        if !opts.allow_partial {
            return Err(format!(
                "{msg}\nhint: run the missing shards, or pass --allow-partial to join these \
                 (the result then says `complete: false`)"
            ));
        }
        warnings.push(format!(
            "{msg}; the result is for those only (complete: false)"
        ));
    }
    Ok((out, warnings))
}

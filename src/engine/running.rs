//! Which records of a cost program run on one machine ([`Running`]): a program lowered in both
//! its forms (`program::Form`) runs, per stage, the one its placement selects; the readers of a
//! program's records outside the evaluators see only those, through `cpu::running`.

use super::program::{Comm, Op, Program, Stage};

/// The records of a program that run on one machine: in each stage class, those of the form
/// the stage runs there (`Form::runs`). Built by `cpu::running`, where the placement selects
/// each stage's form; every reader of a program's operators and collectives outside the
/// evaluators reads them through it, so none sees both forms of a program lowered in two.
#[derive(Clone, Debug)]
pub struct Running {
    ops: Vec<bool>,
    comms: Vec<bool>,
}

impl Running {
    /// The records of `p` that run where `streams` says which stages stream their weights.
    pub fn of(p: &Program, streams: impl Fn(&Stage) -> bool) -> Running {
        let mut r = Running {
            ops: vec![false; p.ops.len()],
            comms: vec![false; p.comms.len()],
        };
        for st in p.stage_list().iter() {
            let s = streams(st);
            for i in st.ops.clone() {
                r.ops[i] = p.ops[i].form.runs(s);
            }
            for i in st.comms.clone() {
                r.comms[i] = p.comms[i].form.runs(s);
            }
        }
        r
    }

    /// Whether operator `i` runs.
    pub fn op(&self, i: usize) -> bool {
        self.ops.get(i).copied().unwrap_or(false)
    }

    /// Whether collective `i` runs.
    pub fn comm(&self, i: usize) -> bool {
        self.comms.get(i).copied().unwrap_or(false)
    }

    /// Whether record `i` of a trace (`cpu::eval_traced`: the operators, then the collectives)
    /// runs.
    pub fn record(&self, i: usize) -> bool {
        match i.checked_sub(self.ops.len()) {
            None => self.op(i),
            Some(j) => self.comm(j),
        }
    }

    /// The operators that run, with their index in the program.
    pub fn ops<'a>(&'a self, p: &'a Program) -> impl Iterator<Item = (usize, &'a Op)> + 'a {
        p.ops.iter().enumerate().filter(|(i, _)| self.op(*i))
    }

    /// The collectives that run, with their index in the program.
    pub fn comms<'a>(&'a self, p: &'a Program) -> impl Iterator<Item = (usize, &'a Comm)> + 'a {
        p.comms.iter().enumerate().filter(|(i, _)| self.comm(*i))
    }
}

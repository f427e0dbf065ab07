//! The walker: yields the steps of a build whose upstream steps have all settled, in the
//! build's order (ties broken by position, so output is stable).

use std::collections::{BTreeSet, HashMap};

use crate::pipeline::PipelineSet;

pub struct Walker {
    /// Position in the build order -> step index.
    order: Vec<usize>,
    /// Step index -> upstream steps not settled yet.
    waiting_on: HashMap<usize, usize>,
    /// Step index -> its dependants within the build.
    users: HashMap<usize, Vec<usize>>,
    position: HashMap<usize, usize>,
    ready: BTreeSet<usize>,
}

impl Walker {
    /// `order` must hold every upstream step of every step in it (see `closure_in_order`).
    pub fn new(set: &PipelineSet, order: &[usize]) -> Walker {
        let position: HashMap<usize, usize> =
            order.iter().enumerate().map(|(p, &i)| (i, p)).collect();
        let mut waiting_on = HashMap::new();
        let mut users: HashMap<usize, Vec<usize>> = HashMap::new();
        let mut ready = BTreeSet::new();
        for (p, &i) in order.iter().enumerate() {
            let deps: Vec<usize> = set.steps[i]
                .deps
                .iter()
                .copied()
                .filter(|d| position.contains_key(d))
                .collect();
            for &d in &deps {
                users.entry(d).or_default().push(i);
            }
            if deps.is_empty() {
                ready.insert(p);
            }
            waiting_on.insert(i, deps.len());
        }
        Walker {
            order: order.to_vec(),
            waiting_on,
            users,
            position,
            ready,
        }
    }

    /// The next step whose upstream steps have all settled.
    pub fn next_ready(&mut self) -> Option<usize> {
        self.ready.pop_first().map(|p| self.order[p])
    }

    /// `idx` settled: its dependants may become ready.
    pub fn settled(&mut self, idx: usize) {
        for &u in self.users.get(&idx).map(Vec::as_slice).unwrap_or(&[]) {
            let n = self.waiting_on.get_mut(&u).expect("user in build");
            *n -= 1;
            if *n == 0 {
                self.ready.insert(self.position[&u]);
            }
        }
    }
}

//! What a rank measured of its clerk's storage operations: the inputs of
//! the cost model ([`crate::cost`]).

use crate::cost::{Costs, slot};
use crate::params::Params;
use crate::protocol::Level;

/// Moving averages of the seconds a storage operation took on each board,
/// and a look at an SOS at each distance.
#[derive(Debug, Default)]
pub(super) struct Timings {
    /// Seconds per storage operation on the shared board and the host's.
    op: [f64; 2],
    /// Seconds a look at an SOS at distance 0, 1, 2 took in searches.
    look: [f64; 3],
}

impl Timings {
    /// A request took `seconds` and made `ops` storage operations (shared
    /// board, host's board): moving averages of the seconds per operation on
    /// each board, which every threshold follows ([`crate::cost`]). A search
    /// that looked at `looks.1` SOS, the farthest at distance `looks.0`,
    /// measures a steal that far, which sizes the shares taken that far.
    pub(super) fn observe(&mut self, seconds: f64, ops: [u64; 2], looks: (u8, u32)) {
        let average = |c: f64, x: f64| if c == 0.0 { x } else { 0.75 * c + 0.25 * x };
        let seconds = seconds.max(0.0);
        let n = ops[0] + ops[1];
        if n > 0 {
            // (The time goes to the boards in proportion to their ops.)
            for (cost, k) in self.op.iter_mut().zip(ops) {
                if k > 0 {
                    *cost = average(*cost, seconds / n as f64);
                }
            }
        }
        if let (d, n @ 1..) = looks {
            let c = &mut self.look[d.min(2) as usize];
            *c = average(*c, seconds / f64::from(n));
        }
    }

    /// The cost model's figures now, with the settings of `params`.
    pub(super) fn costs(&self, params: &Params) -> Costs {
        Costs {
            op: self.op,
            check_interval: params.check_interval,
            late_threshold: params.late_threshold,
            poll: params.poll_interval,
        }
    }

    /// Seconds a steal from the SOS of a rank at distance `d` costs on the
    /// shared board (`costs` from [`Timings::costs`]): its operations, or
    /// more where looks that far were measured to take longer.
    pub(super) fn steal_cost(&self, costs: &Costs, d: u8) -> f64 {
        costs.steal(Level::Shared).max(self.look[d.min(2) as usize])
    }

    /// Seconds per operation on `level`'s board.
    pub(super) fn op(&self, level: Level) -> f64 {
        self.op[slot(level)]
    }
}

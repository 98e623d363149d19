//! A rank's host transfers ([`crate::transfer`]) as state: the sends a
//! wave's plan asked for, those ready, the shedding between plans, and a
//! transfer received to offer. The steps are [`super::Rank`]'s (`trade`).

use crate::ids::IdSet;
use crate::params::Params;
use crate::topology::Topology;
use crate::transfer::Shedding;

/// A rank's part in host transfers.
#[derive(Debug)]
pub(super) struct Transfers {
    /// This job's hosts trade through MPI ([`crate::transfer::on`]).
    pub(super) trading: bool,
    /// Ranks on this rank's host.
    pub(super) host_ranks: usize,
    /// Host transfers this rank is to send (to rank, ids), from the last
    /// wave's plan, and those ready to go.
    pub(super) sends: Vec<(usize, u64)>,
    pub(super) outgoing: Vec<(usize, IdSet)>,
    /// Between two plans: what this rank sheds to the last plan's receivers.
    pub(super) shedding: Shedding,
    /// Received a host transfer not yet offered on the host's board.
    pub(super) offer: bool,
}

impl Transfers {
    /// Rank `me`'s, in a job of `topology` with the settings `params`.
    pub(super) fn new(me: usize, topology: &Topology, params: &Params) -> Transfers {
        Transfers {
            trading: crate::transfer::on(topology, params),
            host_ranks: topology.members(topology.host_index(me)).len(),
            sends: Vec::new(),
            outgoing: Vec::new(),
            shedding: Shedding::default(),
            offer: false,
        }
    }
}

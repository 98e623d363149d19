//! A rank's state as a helper: since when it is idle, when to search
//! again, the share it took. Its choices are [`super::helper`]'s, pure.

/// A rank as a helper of others' SOS.
#[derive(Debug)]
pub(super) struct Helper {
    /// Since when the rank has had no work (a helper looking for an SOS).
    pub(super) idle_since: Option<f64>,
    /// When an idle rank should search for help again, as its clerk's last
    /// search (which found nothing) said.
    pub(super) search_at: Option<f64>,
    /// Done with its own quota: a helper since (see
    /// [`super::Rank::is_free`]).
    pub(super) free: bool,
    /// When the work of the last share taken ends at the speed it was
    /// taken at.
    pub(super) share_end: f64,
    /// When the rank last looked ahead for its next share.
    pub(super) looked_ahead: f64,
}

impl Default for Helper {
    fn default() -> Helper {
        Helper {
            idle_since: None,
            search_at: None,
            free: false,
            share_end: f64::NEG_INFINITY,
            looked_ahead: f64::NEG_INFINITY,
        }
    }
}

impl Helper {
    /// True once the rank took a share.
    pub(super) fn took_share(&self) -> bool {
        self.share_end.is_finite()
    }

    /// A search took a share sized to end at `ends`.
    pub(super) fn took(&mut self, ends: f64) {
        self.idle_since = None;
        self.share_end = ends;
    }

    /// Work came by a host transfer: the rank is no longer idle, and
    /// searches afresh when it is again.
    pub(super) fn got_work(&mut self) {
        self.idle_since = None;
        self.search_at = None;
    }
}

//! Configuration: a RON file (`soslb.ron`) whose every field has a default,
//! overridden field by field by `SOSLB_<FIELD>` environment variables.
//!
//! ```ron
//! (
//!     mode: Full,               // Static | Warmup | Full
//!     warmup: 1.0,              // warm-up window t_l, seconds
//!     check_interval: 0.25,
//!     help_policy: Balanced,    // Proportional | Half | Balanced
//!     signal_dir: "/shared/scratch/soslb",
//! )
//! ```
//!
//! Unknown fields, bad values and unreadable files are errors naming the
//! field and the file (or variable).

use crate::error::{Error, Result};
use crate::plan::HelpPolicy;
pub use crate::topology::Sites;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What the balancer does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// Equal blocks, no balancing: the baseline.
    Static,
    /// Algorithm 1 only: rescale once after the warm-up.
    Warmup,
    /// Algorithms 1 and 2: warm-up rescaling, then SOS/AID help.
    #[default]
    Full,
}

/// How idle helpers learn that an SOS opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Discovery {
    /// Watch `open.ron` with the native watcher on local file systems, poll on
    /// shared ones (NFS, Lustre, ...), as `statfs` tells.
    #[default]
    Auto,
    /// Always the native watcher (only sees writes made on this host).
    Watch,
    /// Always poll by opening `open.ron` every `poll_interval`.
    Poll,
}

/// What the ranks do when the job's forecast end passes the walltime minus
/// `deadline_margin` (DESIGN §11).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OnDeadline {
    /// Rank 0 warns (stderr and its monitor log) with the forecast and the
    /// walltime; the job runs on.
    #[default]
    Warn,
    /// Warn, and stop taking new realisations at the walltime minus the
    /// margin, so that the job ends cleanly before it; the statistics cover
    /// exactly the realisations completed (and a journal, with `job_name`,
    /// lets a later run with `resume` compute the rest).
    Stop,
}

/// The default of the config's `large_job`: ranks from which on a job is
/// large, and its hosts trade their drift through MPI ([`crate::transfer`])
/// instead of SOS files on the shared storage (DESIGN §6: at scale the
/// shared server's load matters more than a helper's latency).
pub const LARGE_JOB: usize = 1000;

/// Every setting of the library. See the field docs for defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `Static`, `Warmup` or `Full` (default `Full`).
    pub mode: Mode,
    /// Warm-up window `t_l` in seconds (default 1.0); ignored when
    /// `warmup_fraction` is set.
    pub warmup: f64,
    /// Warm-up as a fraction of `walltime` (the paper uses 0.05).
    pub warmup_fraction: Option<f64>,
    /// The declared walltime `t_f` of the job, seconds from the first
    /// `init` of the process. The batch system's end time counts too
    /// (`SLURM_JOB_END_TIME`, else asked of Slurm or PBS, see
    /// [`crate::batch`]): the earlier one is the deadline.
    pub walltime: Option<f64>,
    /// Seconds before the walltime that the job should be over by (default
    /// 60, or a tenth of the time left to the walltime at init when that is
    /// less): the forecast is compared with the walltime minus this margin,
    /// and `on_deadline: Stop` stops there. It must cover the last
    /// realisations under way, `finalize` and the program's own output.
    pub deadline_margin: Option<f64>,
    /// `Warn` (default) or `Stop`, see [`OnDeadline`].
    pub on_deadline: OnDeadline,
    /// The name of a job whose completions are journalled on the signal
    /// directory, `<signal_dir>/<job_name>/`, so that a later run with
    /// `resume` computes only the missing realisations (default none: no
    /// journal).
    pub job_name: Option<String>,
    /// Continue the journal of `job_name`: compute only the ids it does not
    /// hold, and merge its sums into the statistics (default false; without
    /// a journal yet, a run with `resume` starts one).
    pub resume: bool,
    /// Seconds of computing over which speed is measured (default 2.0).
    pub speed_window: f64,
    /// Seconds between two checks of the forecast (default 0.25, at least 0.1).
    pub check_interval: f64,
    /// `δτ`: a forecast this many seconds past the horizon opens an SOS
    /// (default 0.25).
    pub late_threshold: f64,
    /// How helpers size their share (default `Balanced`).
    pub help_policy: HelpPolicy,
    /// Target seconds of computing per chunk returned by `next` (default
    /// 0.001): realisations shorter than this are handed out several at a time.
    pub chunk_time: f64,
    /// Directory on storage shared by all ranks (default `soslb-signals`).
    pub signal_dir: PathBuf,
    /// Job id naming the job's directory (default `SLURM_JOB_ID.SLURM_STEP_ID`,
    /// `PBS_JOBID`, else made by rank 0).
    pub job_id: Option<String>,
    /// How idle helpers discover SOS files (default `Auto`).
    pub discovery: Discovery,
    /// Seconds between two reads of `open.ron` when polling (default 0.1).
    pub poll_interval: f64,
    /// Seconds between two reads of `open.ron` at most: idle polls that find
    /// nothing new back off, doubling their interval up to this (default
    /// 0.8, eight poll intervals), and a new SOS resets them.
    pub poll_max: f64,
    /// A helper at distance d takes from an SOS only after it has been open
    /// `d·grace` seconds (default 0.5).
    pub grace: f64,
    /// Sites (default one site).
    pub sites: Sites,
    /// Balance within each host first, on node-local files under the
    /// temporary directory (`$TMPDIR`, else `/tmp`): an SOS goes on the
    /// shared storage only when its host as a whole will be late, so that
    /// the load on the shared storage grows with the late hosts, not the
    /// ranks (default true; false: every SOS on the shared storage).
    pub host_board: bool,
    /// Ranks from which on a job is large (default 1000): its hosts trade
    /// their drift from the plan in MPI messages planned from the
    /// termination waves, every SOS stays on its host's board, and the
    /// shared storage carries no balancing (see [`crate::transfer`] and
    /// [`LARGE_JOB`]). Needs `host_board` and more than one
    /// host.
    pub large_job: usize,
    /// Write the monitor logs `log/<host>.<rank>.log` (default true).
    pub log: bool,
    /// Print a per-rank summary on rank 0 at finalize (default false).
    pub summary: bool,
    /// Keep every file of the run directory after a clean finalize (default
    /// false: the signal files are removed, the monitor logs kept).
    pub keep: bool,
    /// Seconds a rank waits for other ranks before it prints a warning
    /// naming them (default 10; repeated with a doubling back-off).
    pub wait_warning: f64,
    /// Seconds between two progress lines of rank 0 on stderr (default 5;
    /// 0: none). See [`crate::progress`].
    pub progress: f64,
    /// Emulation: emulated speeds, hosts, sites and storage delays (builds
    /// with the `emulate` feature only; see [`crate::emulate`]).
    #[cfg(feature = "emulate")]
    pub emulate: crate::emulate::Emulate,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::Full,
            warmup: 1.0,
            warmup_fraction: None,
            walltime: None,
            deadline_margin: None,
            on_deadline: OnDeadline::Warn,
            job_name: None,
            resume: false,
            speed_window: 2.0,
            check_interval: 0.25,
            late_threshold: 0.25,
            help_policy: HelpPolicy::Balanced,
            chunk_time: 0.001,
            signal_dir: PathBuf::from("soslb-signals"),
            job_id: None,
            discovery: Discovery::Auto,
            poll_interval: 0.1,
            poll_max: 0.8,
            grace: 0.5,
            sites: Sites::Single,
            host_board: true,
            large_job: LARGE_JOB,
            log: true,
            summary: false,
            keep: false,
            wait_warning: 10.0,
            progress: 5.0,
            #[cfg(feature = "emulate")]
            emulate: Default::default(),
        }
    }
}

/// The environment variable naming the config file when none is given.
pub const CONFIG_VAR: &str = "SOSLB_CONFIG";

macro_rules! fields {
    ($($name:ident),* $(,)?) => {
        /// The names of the fields, as in the file (`SOSLB_` + upper case in the environment).
        pub const FIELDS: &[&str] = &[$(stringify!($name),)* #[cfg(feature = "emulate")] "emulate"];

        impl Config {
            fn set_field(&mut self, field: &str, text: &str) -> std::result::Result<bool, String> {
                match field {
                    $(stringify!($name) => self.$name = parse_value(text)?,)*
                    #[cfg(feature = "emulate")]
                    "emulate" => self.emulate = parse_value(text)?,
                    _ => return Ok(false),
                }
                Ok(true)
            }
        }
    };
}

fields!(
    mode,
    warmup,
    warmup_fraction,
    walltime,
    deadline_margin,
    on_deadline,
    job_name,
    resume,
    speed_window,
    check_interval,
    late_threshold,
    help_policy,
    chunk_time,
    signal_dir,
    job_id,
    discovery,
    poll_interval,
    poll_max,
    grace,
    sites,
    host_board,
    large_job,
    log,
    summary,
    keep,
    wait_warning,
    progress,
);

/// The fields that moved into the `emulate` section, and their names there.
const MOVED: [(&str, &str); 4] = [
    ("emulate_speed", "speed"),
    ("hosts", "hosts"),
    ("storage_delay", "storage_delay"),
    ("emulate_grid", "grid"),
];

/// What an unknown field `found` is, when it is one soslb knows of: the
/// `emulate` section of another build, or a field that moved into it.
fn unknown_field(found: &str) -> Option<String> {
    #[cfg(not(feature = "emulate"))]
    if found == "emulate" {
        return Some(
            "this build of soslb has no emulation: the `emulate` section (emulated speeds, \
             hosts, sites and storage delays, for tests and benchmarks) needs soslb built with \
             the cargo feature `emulate` (cargo build --release --features emulate)"
                .into(),
        );
    }
    let (_, new) = MOVED.iter().find(|(old, _)| *old == found)?;
    Some(format!(
        "no field `{found}`: it is `{new}` of the `emulate` section now, \
         `emulate: ({new}: ...)`, in builds with the `emulate` feature"
    ))
}

pub(crate) fn ron_options() -> ron::Options {
    ron::Options::default().with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME)
}

/// Parse a value of one field as RON; a bare word is also accepted where a
/// string is expected (`SOSLB_SIGNAL_DIR=/scratch/x`).
fn parse_value<T: DeserializeOwned>(text: &str) -> std::result::Result<T, String> {
    let text = text.trim();
    ron_options().from_str(text).or_else(|e| {
        ron_options()
            .from_str(&format!("{text:?}"))
            .map_err(|_| e.code.to_string())
    })
}

impl Config {
    /// Read a config file. Every field is optional.
    pub fn from_file(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Config {
            origin: path.display().to_string(),
            reason: format!("cannot read the file: {e}"),
        })?;
        let config: Config = ron_options().from_str(&text).map_err(|e| Error::Config {
            origin: format!(
                "{}:{}:{}",
                path.display(),
                e.span.start.line,
                e.span.start.col
            ),
            reason: match &e.code {
                ron::Error::NoSuchStructField { found, .. } => unknown_field(found),
                _ => None,
            }
            .unwrap_or_else(|| e.code.to_string()),
        })?;
        config.validate(&path.display().to_string())?;
        Ok(config)
    }

    /// The configuration a run uses: the file `path` if given, else
    /// `$SOSLB_CONFIG`, else `./soslb.ron` if it exists, else the defaults;
    /// then the `SOSLB_*` variables of the environment.
    pub fn load(path: Option<&Path>) -> Result<Config> {
        let from_env = std::env::var_os(CONFIG_VAR).map(PathBuf::from);
        let path = path.map(Path::to_path_buf).or(from_env).or_else(|| {
            let local = PathBuf::from("soslb.ron");
            local.is_file().then_some(local)
        });
        let mut config = match &path {
            Some(p) => Config::from_file(p)?,
            None => Config::default(),
        };
        config.apply_env(soslb_vars(std::env::vars_os())?)?;
        Ok(config)
    }

    /// Override fields from `SOSLB_<FIELD>` variables. An unknown `SOSLB_`
    /// variable is an error, so that a typing mistake does not go unnoticed.
    pub fn apply_env(&mut self, vars: impl IntoIterator<Item = (String, String)>) -> Result<()> {
        let mut set = false;
        for (name, value) in vars {
            let Some(field) = name.strip_prefix("SOSLB_") else {
                continue;
            };
            if name == CONFIG_VAR {
                continue;
            }
            let field = field.to_ascii_lowercase();
            let bad = |reason: String| Error::Config {
                origin: format!("environment variable {name}={value}"),
                reason,
            };
            match self.set_field(&field, &value) {
                Ok(true) => set = true,
                Ok(false) => {
                    return Err(bad(unknown_field(&field).unwrap_or_else(|| {
                        format!("no field `{field}`; the fields are {}", FIELDS.join(", "))
                    })));
                }
                Err(e) => return Err(bad(format!("field `{field}`: {e}"))),
            }
        }
        if set {
            self.validate("from the environment")?;
        }
        Ok(())
    }

    /// Check the values; `origin` says where they came from.
    pub fn validate(&self, origin: &str) -> Result<()> {
        #[cfg(feature = "emulate")]
        let emulate = || self.emulate.invalid(&self.sites);
        #[cfg(not(feature = "emulate"))]
        let emulate = || None;
        let wrong = (self.invalid_seconds())
            .or_else(|| self.invalid_walltime())
            .or_else(emulate)
            .or_else(|| self.invalid_job());
        match wrong {
            Some((field, reason)) => Err(Error::Config {
                origin: origin.to_string(),
                reason: format!("field `{field}`: {reason}"),
            }),
            None => Ok(()),
        }
    }

    /// The first field of seconds out of its range, and why.
    fn invalid_seconds(&self) -> Option<(&'static str, String)> {
        let seconds = [
            ("warmup", self.warmup, true),
            ("speed_window", self.speed_window, false),
            ("check_interval", self.check_interval, false),
            ("late_threshold", self.late_threshold, true),
            ("chunk_time", self.chunk_time, true),
            ("poll_interval", self.poll_interval, false),
            ("poll_max", self.poll_max, false),
            ("grace", self.grace, true),
            ("wait_warning", self.wait_warning, false),
            ("progress", self.progress, true),
            ("deadline_margin", self.deadline_margin.unwrap_or(0.0), true),
        ];
        for (field, v, zero_ok) in seconds {
            if !v.is_finite() || v < 0.0 || (v == 0.0 && !zero_ok) {
                let need = if zero_ok {
                    "zero or more"
                } else {
                    "more than zero"
                };
                let why = format!("{v} seconds: must be a finite number of seconds, {need}");
                return Some((field, why));
            }
        }
        if self.poll_max < self.poll_interval {
            let why = format!(
                "{} s is below `poll_interval` ({} s): polls back off from `poll_interval` up \
                 to `poll_max`",
                self.poll_max, self.poll_interval
            );
            return Some(("poll_max", why));
        }
        (self.check_interval < 0.1).then(|| {
            let why = format!(
                "{} s is below 0.1 s, the least interval at which checking pays",
                self.check_interval
            );
            ("check_interval", why)
        })
    }

    /// What is wrong with the walltime, the warm-up fraction of it and the
    /// deadline's margin, if anything.
    fn invalid_walltime(&self) -> Option<(&'static str, String)> {
        if let Some(t) = self.walltime
            && (!t.is_finite() || t <= 0.0)
        {
            return Some((
                "walltime",
                format!("{t}: must be a positive number of seconds"),
            ));
        }
        if let Some(f) = self.warmup_fraction {
            if !(f > 0.0 && f < 1.0) {
                let why = format!("{f}: must be between 0 and 1 (the paper uses 0.05)");
                return Some(("warmup_fraction", why));
            }
            if self.walltime.is_none() {
                let why = "needs `walltime`, the declared walltime in seconds".into();
                return Some(("warmup_fraction", why));
            }
        }
        match (self.walltime, self.deadline_margin) {
            (Some(t), Some(m)) if m >= t => Some((
                "deadline_margin",
                format!(
                    "{m} s is not less than the walltime, {t} s: the job would stop or warn \
                     before it starts"
                ),
            )),
            _ => None,
        }
    }

    /// What is wrong with the job's names and directory, if anything.
    fn invalid_job(&self) -> Option<(&'static str, String)> {
        for (field, name) in [("job_id", &self.job_id), ("job_name", &self.job_name)] {
            if let Some(id) = name
                && (id.is_empty() || id.contains(['/', '\\']) || id == "." || id == "..")
            {
                let why = format!("{id:?}: must be a non-empty name without path separators");
                return Some((field, why));
            }
        }
        if self.resume && self.job_name.is_none() {
            let why = "needs `job_name`, the name of the job whose journal to continue".into();
            return Some(("resume", why));
        }
        self.signal_dir
            .as_os_str()
            .is_empty()
            .then(|| ("signal_dir", "is empty".to_string()))
    }

    /// The warm-up window `t_l` in seconds.
    pub fn warmup_seconds(&self) -> f64 {
        match (self.warmup_fraction, self.walltime) {
            (Some(f), Some(t)) => f * t,
            _ => self.warmup,
        }
    }

    /// A digest of every setting, to check that all ranks use the same.
    pub fn digest(&self) -> u64 {
        let text = ron::to_string(self).unwrap_or_default();
        text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
        })
    }
}

/// The `SOSLB_*` variables of `vars` (the environment's), whose names and
/// values must be UTF-8; the others, whatever their bytes, are not ours.
fn soslb_vars(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> Result<Vec<(String, String)>> {
    let ours = vars
        .into_iter()
        .filter(|(name, _)| name.as_encoded_bytes().starts_with(b"SOSLB_"));
    ours.map(
        |(name, value)| match (name.into_string(), value.into_string()) {
            (Ok(name), Ok(value)) => Ok((name, value)),
            (name, _) => Err(Error::Config {
                origin: format!(
                    "environment variable {}",
                    name.unwrap_or_else(|n| n.to_string_lossy().into_owned())
                ),
                reason: "its name or value is not UTF-8".into(),
            }),
        },
    )
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    fn temp_file(name: &str, text: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("soslb-config-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn every_field_has_a_default_and_the_defaults_are_valid() {
        let c: Config = ron_options().from_str("()").unwrap();
        assert_eq!(c, Config::default());
        c.validate("test").unwrap();
        assert_eq!(
            FIELDS.len(),
            if cfg!(feature = "emulate") { 28 } else { 27 }
        );
    }

    #[cfg(feature = "emulate")]
    #[test]
    fn the_emulate_section_is_read_from_the_file_or_the_environment_and_checked() {
        let p = temp_file(
            "emulate.ron",
            "(summary: true, emulate: (speed: [1.0, 0.5], hosts: Virtual(4), storage_delay: 0.05))",
        );
        let mut c = Config::from_file(&p).unwrap();
        assert_eq!(c.emulate.speed, [1.0, 0.5]);
        assert_eq!(c.emulate.storage_delay, 0.05);
        // The variable replaces the section whole.
        c.apply_env(env(&[(
            "SOSLB_EMULATE",
            "(grid: (ranks_per_host: 4, hosts_per_site: 2, distance_delay: 0.02))",
        )]))
        .unwrap();
        assert_eq!(c.emulate.grid.as_ref().map(|g| g.distance(0, 9)), Some(2));
        assert!(c.emulate.speed.is_empty() && c.emulate.hosts.is_none());
        let e = c
            .apply_env(env(&[(
                "SOSLB_EMULATE",
                "(grid: (ranks_per_host: 0, hosts_per_site: 2, distance_delay: 0.02))",
            )]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("emulate.grid") && e.contains("ranks per host"),
            "{e}"
        );
        std::fs::write(&p, "(emulate: (speed: [1.0, 0.0]))").unwrap();
        let msg = Config::from_file(&p).unwrap_err().to_string();
        assert!(
            msg.contains("emulate.speed") && msg.contains("entry 1"),
            "{msg}"
        );
        std::fs::remove_file(p).unwrap();
    }

    #[cfg(not(feature = "emulate"))]
    #[test]
    fn a_build_without_emulation_refuses_the_emulate_section() {
        let p = temp_file(
            "no-emulate.ron",
            "(\n  summary: true,\n  emulate: (speed: [1.0]),\n)",
        );
        let msg = Config::from_file(&p).unwrap_err().to_string();
        assert!(
            msg.contains(&format!("{}:3:", p.display())) && msg.contains("has no emulation"),
            "{msg}"
        );
        std::fs::remove_file(p).unwrap();
        let msg = Config::default()
            .apply_env(env(&[("SOSLB_EMULATE", "(speed: [1.0])")]))
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("SOSLB_EMULATE") && msg.contains("feature `emulate`"),
            "{msg}"
        );
    }

    #[test]
    fn the_fields_that_moved_into_the_emulate_section_say_where() {
        let p = temp_file("moved.ron", "(emulate_speed: [1.0, 0.5])");
        let msg = Config::from_file(&p).unwrap_err().to_string();
        assert!(msg.contains("`speed` of the `emulate` section"), "{msg}");
        std::fs::remove_file(p).unwrap();
        let msg = Config::default()
            .apply_env(env(&[("SOSLB_STORAGE_DELAY", "0.05")]))
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("SOSLB_STORAGE_DELAY") && msg.contains("emulate: (storage_delay"),
            "{msg}"
        );
    }

    #[test]
    fn a_file_sets_fields_and_env_overrides_them() {
        let p = temp_file(
            "ok.ron",
            "// comment\n(mode: Warmup, walltime: 100.0, warmup_fraction: 0.05, help_policy: Half, \
             sites: Patterns([(\"node*\", \"east\")]))",
        );
        let mut c = Config::from_file(&p).unwrap();
        assert_eq!(c.mode, Mode::Warmup);
        assert_eq!(c.warmup_seconds(), 5.0);
        c.apply_env(env(&[
            ("SOSLB_MODE", "Static"),
            ("SOSLB_CHECK_INTERVAL", "0.5"),
            ("SOSLB_SIGNAL_DIR", "/scratch/x y"),
            ("SOSLB_JOB_ID", "1234.0"),
            ("SOSLB_CONFIG", "ignored.ron"),
            ("OTHER", "x"),
        ]))
        .unwrap();
        assert_eq!(c.mode, Mode::Static);
        assert_eq!(c.check_interval, 0.5);
        assert_eq!(c.signal_dir, PathBuf::from("/scratch/x y"));
        assert_eq!(c.job_id.as_deref(), Some("1234.0"));
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn an_unknown_field_names_the_field_the_file_and_the_line() {
        let p = temp_file("unknown.ron", "(\n  mode: Full,\n  chek_interval: 0.5,\n)");
        let msg = Config::from_file(&p).unwrap_err().to_string();
        assert!(msg.contains("chek_interval"), "{msg}");
        assert!(msg.contains(&format!("{}:3:", p.display())), "{msg}");
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn bad_values_and_unreadable_files_are_named() {
        let p = temp_file("bad.ron", "(check_interval: 0.01)");
        let e = Config::from_file(&p).unwrap_err();
        assert_eq!(e.code(), crate::error::code::CONFIG);
        let msg = e.to_string();
        assert!(
            msg.contains("check_interval") && msg.contains(&p.display().to_string()),
            "{msg}"
        );
        std::fs::remove_file(&p).unwrap();

        let msg = Config::from_file(Path::new("/nonexistent/soslb.ron"))
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("/nonexistent/soslb.ron") && msg.contains("cannot read"),
            "{msg}"
        );

        let p = temp_file("frac.ron", "(warmup_fraction: 0.05)");
        let msg = Config::from_file(&p).unwrap_err().to_string();
        assert!(msg.contains("walltime"), "{msg}");
        std::fs::remove_file(&p).unwrap();

        let p = temp_file("poll.ron", "(poll_interval: 0.5, poll_max: 0.2)");
        let msg = Config::from_file(&p).unwrap_err().to_string();
        assert!(
            msg.contains("poll_max") && msg.contains("0.2 s is below `poll_interval` (0.5 s)"),
            "{msg}"
        );
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn bad_environment_variables_are_named() {
        let mut c = Config::default();
        let msg = c
            .apply_env(env(&[("SOSLB_CHECK_INTERVALL", "1")]))
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("SOSLB_CHECK_INTERVALL") && msg.contains("no field"),
            "{msg}"
        );
        let msg = c
            .apply_env(env(&[("SOSLB_MODE", "Fast")]))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("SOSLB_MODE") && msg.contains("mode"), "{msg}");
        let msg = c
            .apply_env(env(&[("SOSLB_GRACE", "-1")]))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("grace"), "{msg}");
    }

    #[test]
    fn only_soslb_variables_must_be_utf8() {
        use std::os::unix::ffi::OsStringExt;
        let raw = |s: &[u8]| OsString::from_vec(s.to_vec());
        let vars = [
            (raw(b"FOO"), raw(b"a\xffb")),
            (raw(b"\xff"), raw(b"1")),
            (raw(b"SOSLB_GRACE"), raw(b"2")),
        ];
        assert_eq!(
            soslb_vars(vars).unwrap(),
            [("SOSLB_GRACE".to_string(), "2".to_string())]
        );
        let msg = soslb_vars([(raw(b"SOSLB_MODE"), raw(b"F\xffst"))])
            .unwrap_err()
            .to_string();
        assert!(msg.contains("SOSLB_MODE") && msg.contains("UTF-8"), "{msg}");
    }

    #[test]
    fn deadline_and_journal_fields() {
        let mut c = Config::default();
        assert_eq!((c.on_deadline, c.deadline_margin), (OnDeadline::Warn, None));
        c.apply_env(env(&[
            ("SOSLB_WALLTIME", "3600"),
            ("SOSLB_ON_DEADLINE", "Stop"),
            ("SOSLB_JOB_NAME", "count-experiment"),
            ("SOSLB_RESUME", "true"),
        ]))
        .unwrap();
        assert_eq!(c.walltime, Some(3600.0));
        assert_eq!(c.on_deadline, OnDeadline::Stop);
        assert_eq!(c.job_name.as_deref(), Some("count-experiment"));
        assert!(c.resume);
        let err = |pairs: &[(&str, &str)]| {
            let mut c = Config::default();
            c.apply_env(env(pairs)).unwrap_err().to_string()
        };
        let msg = err(&[("SOSLB_RESUME", "true")]);
        assert!(
            msg.contains("`resume`") && msg.contains("job_name"),
            "{msg}"
        );
        let msg = err(&[("SOSLB_JOB_NAME", "a/b")]);
        assert!(
            msg.contains("`job_name`") && msg.contains("path separators"),
            "{msg}"
        );
        let msg = err(&[("SOSLB_WALLTIME", "30"), ("SOSLB_DEADLINE_MARGIN", "30")]);
        assert!(
            msg.contains("`deadline_margin`") && msg.contains("30 s"),
            "{msg}"
        );
        let msg = err(&[("SOSLB_ON_DEADLINE", "Kill")]);
        assert!(msg.contains("SOSLB_ON_DEADLINE"), "{msg}");
    }

    #[test]
    fn the_digest_sees_every_change() {
        let a = Config::default();
        let mut b = a.clone();
        assert_eq!(a.digest(), b.digest());
        b.grace = 0.6;
        assert_ne!(a.digest(), b.digest());
    }
}

//! The one error type of the library, and the codes the C and Fortran
//! interfaces return for it.

use std::path::PathBuf;

/// Everything that can go wrong, each variant saying what and where.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An argument of an API call is wrong.
    #[error("invalid argument `{name}`: {reason}")]
    InvalidArgument {
        /// The argument's name.
        name: &'static str,
        /// What is wrong with it and what to do.
        reason: String,
    },
    /// The configuration is wrong.
    #[error("config {origin}: {reason}")]
    Config {
        /// Where: `path:line:column`, `path`, an environment variable, or `field`.
        origin: String,
        /// What is wrong, naming the field.
        reason: String,
    },
    /// MPI is not usable as required, or another rank failed.
    #[error("MPI: {0}")]
    Mpi(String),
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A file on the signal directory does not hold what it should.
    #[error("{path}: corrupt signal file: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What was found.
        reason: String,
    },
    /// The signal directory holds files of an earlier job.
    #[error("{path}: {reason}")]
    StaleJob {
        /// The job directory.
        path: PathBuf,
        /// What was found and what to do.
        reason: String,
    },
    /// A lock that must be this run's is held: another run of the same
    /// `job_name` holds its journal.
    #[error("{path}: {reason}")]
    Locking {
        /// The locked file.
        path: PathBuf,
        /// What failed and what to change.
        reason: String,
    },
    /// A call made in the wrong state (after finalize, ...).
    #[error("{0}")]
    State(String),
    /// A bug in soslb: a panic caught at the C boundary, or a broken invariant.
    #[error("internal error (please report): {0}")]
    Internal(String),
    /// The job failed on a rank (maybe this one): every rank returns this
    /// error, with the failed rank's code and message.
    #[error("rank {rank} failed: {message}")]
    Rank {
        /// The (lowest) rank that failed.
        rank: usize,
        /// The code of its error.
        code: i32,
        /// Its error message.
        message: String,
    },
    /// The audit at finalize found ids computed twice or not at all.
    #[error("audit: {0}")]
    Audit(String),
}

/// Print `soslb: warning: rank <rank>: <text>` on stderr as one whole line
/// (one `write`), so that lines of ranks sharing a terminal never mix.
pub(crate) fn warn(rank: usize, text: &str) {
    use std::io::Write;
    let line = format!("soslb: warning: rank {rank}: {text}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// A `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

// The codes of the C and Fortran interfaces: one table with their names in
// `soslb.h` and `soslb.f90`, which a test checks against both files.
macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = $value:literal, $c:literal;)*) => {
        /// The codes of the C and Fortran interfaces (0 is success).
        pub mod code {
            $($(#[$doc])* pub const $name: i32 = $value;)*
            /// Every code with its name in `soslb.h` and `soslb.f90`.
            #[cfg(test)]
            pub(crate) const NAMES: &[(i32, &str)] = &[$(($value, $c)),*];
        }
    };
}

codes! {
    /// Success.
    OK = 0, "SOSLB_OK";
    /// [`super::Error::InvalidArgument`].
    INVALID_ARGUMENT = 1, "SOSLB_ERR_ARGUMENT";
    /// [`super::Error::Config`].
    CONFIG = 2, "SOSLB_ERR_CONFIG";
    /// [`super::Error::Mpi`].
    MPI = 3, "SOSLB_ERR_MPI";
    /// [`super::Error::Io`].
    IO = 4, "SOSLB_ERR_IO";
    /// [`super::Error::Corrupt`].
    CORRUPT = 5, "SOSLB_ERR_CORRUPT";
    /// [`super::Error::StaleJob`].
    STALE_JOB = 6, "SOSLB_ERR_STALE_JOB";
    /// [`super::Error::Locking`].
    LOCKING = 7, "SOSLB_ERR_LOCKING";
    /// [`super::Error::State`].
    STATE = 8, "SOSLB_ERR_STATE";
    /// [`super::Error::Internal`].
    INTERNAL = 9, "SOSLB_ERR_INTERNAL";
    /// [`super::Error::Audit`].
    AUDIT = 10, "SOSLB_ERR_AUDIT";
}

impl Error {
    /// An internal error from a caught panic: `what` panicked, and why.
    pub fn from_panic(what: &str, panic: &(dyn std::any::Any + Send)) -> Error {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Error::Internal(format!("{what}{why}"))
    }

    /// The code the C and Fortran interfaces return for this error.
    pub fn code(&self) -> i32 {
        match self {
            Error::InvalidArgument { .. } => code::INVALID_ARGUMENT,
            Error::Config { .. } => code::CONFIG,
            Error::Mpi(_) => code::MPI,
            Error::Io { .. } => code::IO,
            Error::Corrupt { .. } => code::CORRUPT,
            Error::StaleJob { .. } => code::STALE_JOB,
            Error::Locking { .. } => code::LOCKING,
            Error::State(_) => code::STATE,
            Error::Internal(_) => code::INTERNAL,
            Error::Rank { code, .. } => *code,
            Error::Audit(_) => code::AUDIT,
        }
    }

    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// An [`Error::InvalidArgument`].
    pub fn argument(name: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            name,
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::code::NAMES;

    /// `(name, value)` of every `SOSLB_*` constant on the lines of `text`
    /// that start with `prefix`, `between` separating name and value.
    fn defined(text: &str, prefix: &str, between: &str) -> Vec<(String, i32)> {
        text.lines()
            .filter_map(|l| l.trim_start().strip_prefix(prefix))
            .filter_map(|l| {
                let (name, rest) = l.split_once(between)?;
                let value = rest.split_whitespace().next()?.parse().ok()?;
                Some((name.trim().to_string(), value))
            })
            .filter(|(name, _)| name.starts_with("SOSLB_"))
            .collect()
    }

    fn same_codes(file: &str, found: Vec<(String, i32)>) {
        let want: Vec<(String, i32)> = NAMES.iter().map(|&(v, n)| (n.to_string(), v)).collect();
        assert_eq!(found, want, "the codes of {file} differ from `error::code`");
    }

    #[test]
    fn the_header_and_the_fortran_module_define_the_same_codes() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fortran/");
        let header = std::fs::read_to_string(format!("{dir}soslb.h")).unwrap();
        same_codes("soslb.h", defined(&header, "#define ", " "));
        let module = std::fs::read_to_string(format!("{dir}soslb.f90")).unwrap();
        same_codes(
            "soslb.f90",
            defined(&module, "integer, parameter, public :: ", " = "),
        );
    }
}

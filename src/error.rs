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

/// The codes of the C and Fortran interfaces (0 is success).
pub mod code {
    /// Success.
    pub const OK: i32 = 0;
    /// [`super::Error::InvalidArgument`].
    pub const INVALID_ARGUMENT: i32 = 1;
    /// [`super::Error::Config`].
    pub const CONFIG: i32 = 2;
    /// [`super::Error::Mpi`].
    pub const MPI: i32 = 3;
    /// [`super::Error::Io`].
    pub const IO: i32 = 4;
    /// [`super::Error::Corrupt`].
    pub const CORRUPT: i32 = 5;
    /// [`super::Error::StaleJob`].
    pub const STALE_JOB: i32 = 6;
    /// [`super::Error::Locking`].
    pub const LOCKING: i32 = 7;
    /// [`super::Error::State`].
    pub const STATE: i32 = 8;
    /// [`super::Error::Internal`].
    pub const INTERNAL: i32 = 9;
    /// [`super::Error::Audit`].
    pub const AUDIT: i32 = 10;
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

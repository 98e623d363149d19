//! Signal-file bodies: RON behind a one-line header carrying the format
//! version, a checksum and the body's length (DESIGN §6).
//!
//! ```text
//! // soslb-signal 1 fnv1a64=0123456789abcdef len=345
//! (rank:3,seq:2,state:Closed,aids:[])
//! ```
//!
//! Files are rewritten in place, so a reader that does not hold the lock may
//! catch a write midway: the length or checksum then disagrees and
//! [`decode`] answers [`Decoded::Torn`] instead of guessing.

use crate::error::{Error, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::Path;

/// The version of the signal-file format written by this build.
pub const FORMAT_VERSION: u32 = 1;

const MAGIC: &str = "// soslb-signal ";

/// FNV-1a, 64 bits.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The full text of a signal file holding `body`: header line, then compact RON.
///
/// # Panics
///
/// Only if RON cannot represent `T`, which never happens for the board's records.
pub fn encode<T: Serialize>(body: &T) -> String {
    let mut ron = ron::to_string(body).expect("the board's records are representable in RON");
    ron.push('\n');
    format!(
        "{MAGIC}{FORMAT_VERSION} fnv1a64={:016x} len={}\n{ron}",
        fnv1a64(ron.as_bytes()),
        ron.len()
    )
}

/// What a signal file held.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoded<T> {
    /// A complete body.
    Body(T),
    /// The header is missing or disagrees with the body: a write caught
    /// midway (why, in words). Under the file's lock this is corruption.
    Torn(String),
}

/// Decode the text of the signal file at `path` (named in errors).
///
/// A missing header, an empty file, or a length or checksum mismatch is
/// [`Decoded::Torn`]; another format version, or a body whose checksum is
/// right but which is not the expected RON, is [`Error::Corrupt`].
pub fn decode<T: DeserializeOwned>(text: &str, path: &Path) -> Result<Decoded<T>> {
    let torn = |reason: String| Ok(Decoded::Torn(reason));
    if text.is_empty() {
        return torn("empty file".into());
    }
    let Some((header, body)) = text.split_once('\n') else {
        return torn("no complete header line".into());
    };
    let Some(fields) = header.strip_prefix(MAGIC) else {
        return torn(format!("no `{}` header", MAGIC.trim_end()));
    };
    let mut fields = fields.split(' ');
    let Some(Ok(version)) = fields.next().map(str::parse::<u32>) else {
        return torn("unreadable format version in the header".into());
    };
    if version != FORMAT_VERSION {
        return Err(Error::Corrupt {
            path: path.to_owned(),
            reason: format!(
                "format version {version}, but this soslb reads version {FORMAT_VERSION}: \
                 files of another soslb version (remove the job directory or use another job_id)"
            ),
        });
    }
    let sum = fields.next().and_then(|f| f.strip_prefix("fnv1a64="));
    let len = fields.next().and_then(|f| f.strip_prefix("len="));
    let (Some(Ok(sum)), Some(Ok(len))) = (
        sum.map(|s| u64::from_str_radix(s, 16)),
        len.map(str::parse::<usize>),
    ) else {
        return torn("unreadable checksum or length in the header".into());
    };
    if body.len() != len {
        return torn(format!(
            "body has {} bytes, the header says {len}",
            body.len()
        ));
    }
    if fnv1a64(body.as_bytes()) != sum {
        return torn("checksum mismatch".into());
    }
    match ron::from_str(body) {
        Ok(value) => Ok(Decoded::Body(value)),
        Err(e) => Err(Error::Corrupt {
            path: path.to_owned(),
            reason: format!(
                "line {}:{}: {} (the checksum is valid: written by another soslb build?)",
                e.span.start.line + 1, // the body starts on the file's second line
                e.span.start.col,
                e.code
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::{Post, Sos, SosState};
    use crate::ids::IdSet;

    fn sample() -> Sos {
        Sos {
            rank: 3,
            seq: 2,
            state: SosState::Open(Post {
                speed: 12.5,
                remaining: 40,
                forecast: f64::INFINITY,
                host: "node-7 \"ä\"".into(),
                site: "b".into(),
                opened_at: 1.0,
                updated_at: 2.0,
                tail: IdSet::from_range(10..50),
            }),
            aids: vec![],
        }
    }

    fn path() -> &'static Path {
        Path::new("/x/sos/3.ron")
    }

    #[test]
    fn round_trip() {
        let text = encode(&sample());
        assert!(text.starts_with("// soslb-signal 1 fnv1a64="));
        assert_eq!(
            decode::<Sos>(&text, path()).unwrap(),
            Decoded::Body(sample())
        );
    }

    #[test]
    fn truncated_and_empty_are_torn() {
        let text = encode(&sample());
        for cut in [0, 10, text.len() / 2, text.len() - 1] {
            let got = decode::<Sos>(&text[..cut], path()).unwrap();
            assert!(matches!(got, Decoded::Torn(_)), "cut {cut}: {got:?}");
        }
        // A longer old body left behind a shorter new one.
        let stale = format!("{text}old tail");
        assert!(matches!(
            decode::<Sos>(&stale, path()).unwrap(),
            Decoded::Torn(_)
        ));
    }

    #[test]
    fn flipped_byte_is_torn() {
        let mut bytes = encode(&sample()).into_bytes();
        let i = bytes.len() - 5;
        bytes[i] ^= 0x01;
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            matches!(decode::<Sos>(&text, path()).unwrap(), Decoded::Torn(r) if r.contains("checksum"))
        );
    }

    #[test]
    fn other_version_is_corrupt() {
        let text = encode(&sample()).replacen("signal 1 ", "signal 7 ", 1);
        let err = decode::<Sos>(&text, path()).unwrap_err().to_string();
        assert!(
            err.contains("/x/sos/3.ron") && err.contains("version 7") && err.contains("version 1"),
            "{err}"
        );
    }

    #[test]
    fn valid_checksum_over_invalid_ron_is_corrupt() {
        let body = "(rank: 3, seq: 2,\n state: Half, aids: [])\n";
        let text = format!(
            "// soslb-signal 1 fnv1a64={:016x} len={}\n{body}",
            fnv1a64(body.as_bytes()),
            body.len()
        );
        let err = decode::<Sos>(&text, path()).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }));
        let msg = err.to_string();
        assert!(
            msg.contains("/x/sos/3.ron") && msg.contains("line 3:"),
            "{msg}"
        );
    }
}

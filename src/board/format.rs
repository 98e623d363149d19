//! Signal-file bodies: RON behind a one-line header carrying the format
//! version, a checksum, the body's length and the file's write sequence
//! number (DESIGN §6), then padding.
//!
//! ```text
//! // soslb-signal 2 fnv1a64=0123456789abcdef len=39 wseq=17
//! (rank:3,seq:2,state:Closed,aids:[])
//! <spaces up to the file's size>
//! ```
//!
//! - The checksum covers the write sequence number and the body.
//! - Files are padded with spaces to a multiple of [`BLOCK`] bytes and never
//!   shrink, so the size a client has cached (FUSE and NFS clients may serve
//!   a file's size from a cache) is nearly always the true one; where it is
//!   not, the body comes out short and [`decode`] says so.
//! - Every write increments `wseq`: a reader that remembers a higher number
//!   than the file holds has found an older copy of the file put in place.
//!
//! Files are rewritten in place, so a reader that does not hold the lock may
//! catch a write midway: the length or checksum then disagrees and
//! [`decode`] answers [`Decoded::Torn`] instead of guessing.

use crate::error::{Error, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::Path;

/// The version of the signal-file format written by this build.
pub const FORMAT_VERSION: u32 = 2;

/// Signal files are padded to a multiple of this many bytes.
pub const BLOCK: usize = 4096;

const MAGIC: &str = "// soslb-signal ";

/// The padding byte after the body.
const PAD: u8 = b' ';

/// FNV-1a, 64 bits, over the concatenation of `parts`.
fn fnv1a64(parts: &[&[u8]]) -> u64 {
    parts
        .iter()
        .flat_map(|p| p.iter())
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
}

fn checksum(wseq: u64, ino: u64, body: &[u8]) -> u64 {
    if ino == 0 {
        fnv1a64(&[wseq.to_string().as_bytes(), b"\n", body])
    } else {
        let ino = ino.to_string();
        fnv1a64(&[
            wseq.to_string().as_bytes(),
            b"\n",
            ino.as_bytes(),
            b"\n",
            body,
        ])
    }
}

/// The text of a signal file holding `body` with write sequence number 0,
/// unpadded: header line, then compact RON.
///
/// # Panics
///
/// Only if RON cannot represent `T`, which never happens for the board's records.
pub fn encode<T: Serialize>(body: &T) -> String {
    encode_record(body, 0)
}

/// The text of a signal file holding `body` as its write number `wseq`,
/// unpadded (see [`pad`]).
///
/// # Panics
///
/// Only if RON cannot represent `T`, which never happens for the board's records.
pub fn encode_record<T: Serialize>(body: &T, wseq: u64) -> String {
    encode_stamped(body, wseq, 0)
}

/// [`encode_record`], stamped with the inode number `ino` of the file it
/// is written to (0: no stamp). A copy of the file put in place by rename
/// has another inode than its stamp says: even a rank that never saw the
/// original before can tell it is not the job's file.
///
/// # Panics
///
/// Only if RON cannot represent `T`, which never happens for the board's records.
pub fn encode_stamped<T: Serialize>(body: &T, wseq: u64, ino: u64) -> String {
    let mut ron = ron::to_string(body).expect("the board's records are representable in RON");
    ron.push('\n');
    let stamp = if ino == 0 {
        String::new()
    } else {
        format!(" ino={ino}")
    };
    format!(
        "{MAGIC}{FORMAT_VERSION} fnv1a64={:016x} len={} wseq={wseq}{stamp}\n{ron}",
        checksum(wseq, ino, ron.as_bytes()),
        ron.len()
    )
}

/// The size a file holding `text` is written with, when it is `current`
/// bytes long now: `text` rounded up to [`BLOCK`], and never less than
/// `current` (a file never shrinks, so no cached size can cut it), unless
/// `current` is absurdly large (garbage written into it).
pub fn padded_len(text_len: usize, current: u64) -> usize {
    let rounded = text_len.div_ceil(BLOCK).max(1) * BLOCK;
    match usize::try_from(current) {
        Ok(c) if c > rounded && c <= 64 * BLOCK => c.div_ceil(BLOCK) * BLOCK,
        _ => rounded,
    }
}

/// `text` padded with spaces to `len` bytes (at least its own length).
pub fn pad(text: &str, len: usize) -> Vec<u8> {
    let mut bytes = text.as_bytes().to_vec();
    if bytes.len() < len {
        bytes.resize(len, PAD);
    }
    bytes
}

/// A complete record read from a signal file.
#[derive(Clone, Debug, PartialEq)]
pub struct Record<T> {
    /// The body.
    pub body: T,
    /// The file's write sequence number when it was written.
    pub wseq: u64,
    /// The inode number of the file it was written to (0: not stamped).
    pub ino: u64,
}

/// What a signal file held.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoded<T> {
    /// A complete body.
    Body(T),
    /// The header is missing or disagrees with the body: a write caught
    /// midway, a size cached by the client, or garbage (why, in words).
    /// Under the file's lock, and again after fresh reads, this is corruption.
    Torn(String),
}

/// Decode the bytes of the signal file at `path` (named in errors).
///
/// A missing header, an empty file, a short body, bytes other than padding
/// after the body, or a checksum mismatch is [`Decoded::Torn`]; another
/// format version, or a body whose checksum is right but which is not the
/// expected RON, is [`Error::Corrupt`].
pub fn decode<T: DeserializeOwned>(text: &str, path: &Path) -> Result<Decoded<T>> {
    Ok(match decode_record(text.as_bytes(), path)? {
        Decoded::Body(r) => Decoded::Body(r.body),
        Decoded::Torn(why) => Decoded::Torn(why),
    })
}

/// [`decode`], with the write sequence number.
pub fn decode_record<T: DeserializeOwned>(bytes: &[u8], path: &Path) -> Result<Decoded<Record<T>>> {
    let torn = |reason: String| Ok(Decoded::Torn(reason));
    if bytes.is_empty() {
        return torn("empty file".into());
    }
    if bytes.iter().all(|&b| b == PAD || b == 0) {
        return torn(format!("{} bytes of padding and no header", bytes.len()));
    }
    let Some(nl) = bytes.iter().position(|&b| b == b'\n') else {
        return torn("no complete header line".into());
    };
    let (header, rest) = (&bytes[..nl], &bytes[nl + 1..]);
    let Some(fields) = std::str::from_utf8(header)
        .ok()
        .and_then(|h| h.strip_prefix(MAGIC))
    else {
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
    let wseq = fields.next().and_then(|f| f.strip_prefix("wseq="));
    let ino = match fields.next() {
        None => Some(Ok(0)),
        Some(f) => f.strip_prefix("ino=").map(str::parse::<u64>),
    };
    let (Some(Ok(sum)), Some(Ok(len)), Some(Ok(wseq)), Some(Ok(ino)), None) = (
        sum.map(|s| u64::from_str_radix(s, 16)),
        len.map(str::parse::<usize>),
        wseq.map(str::parse::<u64>),
        ino,
        fields.next(),
    ) else {
        return torn("unreadable checksum, length or write number in the header".into());
    };
    if rest.len() < len {
        return torn(format!(
            "body has {} bytes, the header says {len}",
            rest.len()
        ));
    }
    let (body, padding) = rest.split_at(len);
    if let Some(k) = padding.iter().position(|&b| b != PAD) {
        return torn(format!(
            "{} bytes that are not padding after the body of {len} bytes (at byte {})",
            padding.len() - k,
            nl + 1 + len + k
        ));
    }
    if checksum(wseq, ino, body) != sum {
        return torn("checksum mismatch".into());
    }
    let body = match std::str::from_utf8(body) {
        Ok(b) => b,
        Err(e) => {
            return Err(Error::Corrupt {
                path: path.to_owned(),
                reason: format!("the body is not UTF-8 ({e}) although its checksum is valid"),
            });
        }
    };
    match ron::from_str(body) {
        Ok(value) => Ok(Decoded::Body(Record {
            body: value,
            wseq,
            ino,
        })),
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
        assert!(text.starts_with("// soslb-signal 2 fnv1a64="));
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
        let text = encode(&sample()).replacen("signal 2 ", "signal 7 ", 1);
        let err = decode::<Sos>(&text, path()).unwrap_err().to_string();
        assert!(
            err.contains("/x/sos/3.ron") && err.contains("version 7") && err.contains("version 2"),
            "{err}"
        );
    }

    #[test]
    fn valid_checksum_over_invalid_ron_is_corrupt() {
        let body = "(rank: 3, seq: 2,\n state: Half, aids: [])\n";
        let text = format!(
            "// soslb-signal 2 fnv1a64={:016x} len={} wseq=4\n{body}",
            checksum(4, 0, body.as_bytes()),
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

    #[test]
    fn padded_record_round_trips_with_its_write_number() {
        let text = encode_record(&sample(), 41);
        let len = padded_len(text.len(), 0);
        assert_eq!(len, BLOCK);
        let bytes = pad(&text, len);
        assert_eq!(bytes.len(), BLOCK);
        let got = decode_record::<Sos>(&bytes, path()).unwrap();
        assert_eq!(
            got,
            Decoded::Body(Record {
                body: sample(),
                wseq: 41,
                ino: 0
            })
        );
        // Stamped with its inode: read back; a forged stamp breaks the checksum.
        let text = encode_stamped(&sample(), 41, 977);
        assert!(text.lines().next().unwrap().ends_with("wseq=41 ino=977"));
        match decode_record::<Sos>(text.as_bytes(), path()).unwrap() {
            Decoded::Body(r) => assert_eq!((r.wseq, r.ino), (41, 977)),
            other => panic!("{other:?}"),
        }
        let forged = text.replacen("ino=977", "ino=978", 1);
        assert!(matches!(
            decode_record::<Sos>(forged.as_bytes(), path()).unwrap(),
            Decoded::Torn(_)
        ));
        // A file never shrinks, unless it holds a lot of garbage.
        assert_eq!(padded_len(10, 3 * BLOCK as u64 - 7), 3 * BLOCK);
        assert_eq!(padded_len(10, 1 << 30), BLOCK);
        assert_eq!(padded_len(BLOCK + 1, 0), 2 * BLOCK);
    }

    #[test]
    fn cut_padded_or_garbage_after_the_body_is_torn() {
        let bytes = pad(&encode_record(&sample(), 3), BLOCK);
        let text_len = encode_record(&sample(), 3).len();
        // A size cached by the client cuts the body.
        let got = decode_record::<Sos>(&bytes[..text_len - 9], path()).unwrap();
        assert!(
            matches!(&got, Decoded::Torn(r) if r.contains("body has")),
            "{got:?}"
        );
        // Garbage in the padding, or padding only.
        let mut dirty = bytes.clone();
        dirty[BLOCK - 2] = b'x';
        let got = decode_record::<Sos>(&dirty, path()).unwrap();
        assert!(
            matches!(&got, Decoded::Torn(r) if r.contains("not padding")),
            "{got:?}"
        );
        let blank = vec![b' '; BLOCK];
        assert!(matches!(
            decode_record::<Sos>(&blank, path()).unwrap(),
            Decoded::Torn(_)
        ));
        // The write number is covered by the checksum.
        let forged = String::from_utf8(bytes)
            .unwrap()
            .replacen("wseq=3", "wseq=9", 1);
        let got = decode_record::<Sos>(forged.as_bytes(), path()).unwrap();
        assert!(
            matches!(&got, Decoded::Torn(r) if r.contains("checksum")),
            "{got:?}"
        );
    }
}

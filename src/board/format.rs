//! Signal-file bodies: RON behind a one-line header carrying the format
//! version, a checksum, the body's length and a write sequence number
//! (DESIGN §6); [`read`] reads a signal file and checks its body.
//!
//! ```text
//! // soslb-signal 3 fnv1a64=0123456789abcdef len=31 wseq=0
//! (rank:3,seq:2,state:Closed)
//! ```
//!
//! - The checksum covers the write sequence number and the body: a body cut
//!   short, or garbage, is [`Decoded::Torn`], never read as something else.
//! - The board's files are replaced whole by rename (wseq 0, no padding).
//!   The completion journal ([`crate::resume`]) rewrites its slots in
//!   place: padded with spaces to a multiple of [`BLOCK`] bytes, so that a
//!   file never shrinks, and numbered by `wseq`.

use crate::cost::TRIES;
use crate::error::{Error, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The version of the signal-file format written by this build.
pub const FORMAT_VERSION: u32 = 3;

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

fn checksum(wseq: u64, body: &[u8]) -> u64 {
    fnv1a64(&[wseq.to_string().as_bytes(), b"\n", body])
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
    let mut ron = ron::to_string(body).expect("the board's records are representable in RON");
    ron.push('\n');
    format!(
        "{MAGIC}{FORMAT_VERSION} fnv1a64={:016x} len={} wseq={wseq}\n{ron}",
        checksum(wseq, ron.as_bytes()),
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
}

/// What a signal file held.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoded<T> {
    /// A complete body.
    Body(T),
    /// The header is missing or disagrees with the body: a write caught
    /// midway, a size cached by the client, or garbage (why, in words).
    Torn(String),
}

/// What stands at a signal file's path.
enum Found {
    Missing,
    /// A regular file's bytes.
    Bytes(Vec<u8>),
    /// Something else, in words.
    Not(&'static str),
}

/// The bytes at `path`, if a regular file stands there.
fn read_bytes(path: &Path) -> io::Result<Found> {
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path);
    let mut file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Found::Missing),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Ok(Found::Not("a symbolic link"));
        }
        Err(e) => return Err(e),
    };
    let kind = file.metadata()?.file_type();
    if kind.is_dir() {
        return Ok(Found::Not("a directory"));
    }
    if !kind.is_file() {
        return Ok(Found::Not("a FIFO, socket or device"));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(Found::Bytes(bytes))
}

/// Whether a read failed because the file it opened was replaced: `ESTALE`
/// (NFSv3), or `ENOENT` after the open found it (a FUSE view that looks the
/// open file up by its path).
fn gone_while_open(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ESTALE) || e.kind() == io::ErrorKind::NotFound
}

/// Whether `e` is a [`read`] that met its file replaced while open every
/// time it tried: a file that other ranks keep replacing, not a broken one.
pub fn replaced(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if gone_while_open(source))
}

/// Read and decode the file at `path`: `None` when there is none. Only a
/// regular file is read: a FIFO, a device or a symbolic link in its place
/// is corruption, not a file to wait on. A read that fails because the
/// file was replaced while open here (`ESTALE` on NFSv3, `ENOENT` on a FUSE
/// view that looks the open file up by its path), or
/// finds a size its header disagrees with (a body cut short, or bytes after
/// it: the size of the file that stood there before, cached by libfuse's
/// path-based views), reads the file again, up to [`TRIES`] times in all.
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    read_again(path, || ())
}

/// [`read`], calling `again` before each read again (a storage operation
/// more, for the board that counts them).
pub fn read_again<T: DeserializeOwned>(path: &Path, mut again: impl FnMut()) -> Result<Option<T>> {
    let mut tries = 1;
    loop {
        if tries > 1 {
            again();
        }
        let found = match read_bytes(path) {
            Err(e) if gone_while_open(&e) && tries < TRIES => {
                tries += 1;
                continue;
            }
            found => found.map_err(|e| Error::io(path, e))?,
        };
        let bytes = match found {
            Found::Missing => return Ok(None),
            Found::Bytes(b) => b,
            Found::Not(what) => {
                return Err(Error::Corrupt {
                    path: path.to_owned(),
                    reason: format!("{what}, not a signal file"),
                });
            }
        };
        match decode_bytes::<T>(&bytes, path)? {
            Cut::Whole(r) => return Ok(Some(r.body)),
            Cut::Size(_) if tries < TRIES => tries += 1,
            Cut::Size(why) | Cut::Torn(why) => {
                return Err(Error::Corrupt {
                    path: path.to_owned(),
                    reason: why,
                });
            }
        }
    }
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
    Ok(match decode_bytes(bytes, path)? {
        Cut::Whole(r) => Decoded::Body(r),
        Cut::Size(why) | Cut::Torn(why) => Decoded::Torn(why),
    })
}

/// What a signal file's bytes hold: a size that disagrees with the header
/// (a body cut short, or bytes after it) is told apart from other tears,
/// since it may be a size the client cached, and a new read find it whole.
enum Cut<T> {
    Whole(Record<T>),
    Size(String),
    Torn(String),
}

fn decode_bytes<T: DeserializeOwned>(bytes: &[u8], path: &Path) -> Result<Cut<T>> {
    let torn = |reason: String| Ok(Cut::Torn(reason));
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
    let (Some(Ok(sum)), Some(Ok(len)), Some(Ok(wseq)), None) = (
        sum.map(|s| u64::from_str_radix(s, 16)),
        len.map(str::parse::<usize>),
        wseq.map(str::parse::<u64>),
        fields.next(),
    ) else {
        return torn("unreadable checksum, length or write number in the header".into());
    };
    if rest.len() < len {
        let why = format!("body has {} bytes, the header says {len}", rest.len());
        return Ok(Cut::Size(why));
    }
    let (body, padding) = rest.split_at(len);
    if let Some(k) = padding.iter().position(|&b| b != PAD) {
        return Ok(Cut::Size(format!(
            "{} bytes that are not padding after the body of {len} bytes (at byte {})",
            padding.len() - k,
            nl + 1 + len + k
        )));
    }
    if checksum(wseq, body) != sum {
        return torn("checksum mismatch".into());
    }
    read_body(body, wseq, path).map(Cut::Whole)
}

/// The record of a `body` whose checksum is valid: not UTF-8 or not the
/// expected RON is [`Error::Corrupt`].
fn read_body<T: DeserializeOwned>(body: &[u8], wseq: u64, path: &Path) -> Result<Record<T>> {
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
        Ok(value) => Ok(Record { body: value, wseq }),
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
    use crate::ids::IdSet;
    use crate::protocol::{Post, Sos, SosState, cut};

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
                at: 2.0,
                slots: cut(&IdSet::from_range(10..50), 2, 0, &[8, 8, 16]),
                helped: vec![],
            }),
        }
    }

    fn path() -> &'static Path {
        Path::new("/x/sos/3.ron")
    }

    #[test]
    fn round_trip() {
        let text = encode(&sample());
        assert!(text.starts_with("// soslb-signal 3 fnv1a64="));
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
    fn a_file_that_stays_short_is_corrupt_after_its_tries() {
        let dir = std::env::temp_dir().join(format!("soslb-format-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("open.ron");
        let text = encode(&sample());
        std::fs::write(&file, &text[..text.len() - 3]).unwrap();
        let mut again = 0;
        let got = read_again::<Sos>(&file, || again += 1);
        assert!(
            matches!(&got, Err(Error::Corrupt { reason, .. }) if reason.contains("the header says")),
            "{got:?}"
        );
        assert_eq!(again, TRIES - 1, "reads again");
        std::fs::write(&file, &text).unwrap();
        again = 0;
        assert_eq!(
            read_again::<Sos>(&file, || again += 1).unwrap(),
            Some(sample())
        );
        assert_eq!(again, 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_a_file_replaced_at_every_read_is_replaced() {
        let io = |code| Error::io(path(), io::Error::from_raw_os_error(code));
        assert!(replaced(&io(libc::ESTALE)));
        assert!(replaced(&io(libc::ENOENT)));
        assert!(!replaced(&io(libc::EACCES)));
        let torn = Error::Corrupt {
            path: path().to_owned(),
            reason: "cut short".into(),
        };
        assert!(!replaced(&torn));
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
        let text = encode(&sample()).replacen("signal 3 ", "signal 7 ", 1);
        let err = decode::<Sos>(&text, path()).unwrap_err().to_string();
        assert!(
            err.contains("/x/sos/3.ron") && err.contains("version 7") && err.contains("version 3"),
            "{err}"
        );
    }

    #[test]
    fn valid_checksum_over_invalid_ron_is_corrupt() {
        let body = "(rank: 3, seq: 2,\n state: Half, aids: [])\n";
        let text = format!(
            "// soslb-signal 3 fnv1a64={:016x} len={} wseq=4\n{body}",
            checksum(4, body.as_bytes()),
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
            })
        );
        // A forged write number breaks the checksum.
        let forged = text.replacen("wseq=41", "wseq=42", 1);
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

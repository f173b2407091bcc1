//! Header encoding per STOMP version: escaping, unescaping and what each version can carry.
//!
//! Which rules apply to a frame ([`Rules::for_frame`]):
//!
//! * STOMP 1.0 ([`Rules::V10`]): no escaping at all. A name cannot contain `:` or LF, a
//!   value cannot contain LF. When decoding, leading spaces and tabs of a value are dropped,
//!   as Artemis's 1.0 decoder does (`StompDecoder.TRIM_LEADING_HEADER_VALUE_WHITESPACE`;
//!   `ActiveMQ` Classic trims too): the 1.0 spec is silent and its examples read `name: value`.
//! * CONNECT, STOMP and CONNECTED frames are never escaped in any version, so that a 1.0 peer
//!   can read them (STOMP 1.1/1.2 "Value Encoding"). They decode with [`Rules::Raw`] (no
//!   trimming) unless they are themselves 1.0 frames: a CONNECT without `accept-version` or a
//!   CONNECTED without a `version` above 1.0 is read with the 1.0 rules, trimming included.
//! * STOMP 1.1 ([`Rules::V11`]): `\n` (LF), `\c` (`:`), `\\` (`\`).
//! * STOMP 1.2 ([`Rules::V12`]): also `\r` (CR).
//!
//! In 1.1 and 1.2 an undefined escape (`\t`, a lone trailing `\`, `\r` in 1.1) is a fatal
//! protocol error, as both specs require. A raw `:` inside a value (after the first colon)
//! is accepted in every version and kept: the 1.1/1.2 grammar forbids it but senders do it,
//! and it is unambiguous.
//!
//! NUL: no version can carry a NUL in a header, and none is accepted (a remote error when
//! decoding, a local one when encoding). The 1.2 grammar does not exclude it, but a frame
//! ends at its NUL for every reader that frames without `content-length`, so a NUL a producer
//! put in a header would end the MESSAGE that carries it to another client early and let the
//! bytes after it be read as a frame of their own (frame injection).
//!
//! Line endings: the decoder accepts CRLF as well as LF in every version, so one CR right
//! before the LF is never part of a value. The encoder therefore refuses a value ending in CR
//! where the version has no `\r` escape (1.0, 1.1, unescaped frames), and a LF (or, in names,
//! a `:`) where there is no escaping at all.

use std::borrow::Cow;

use crate::command::{Command, Version};
use crate::error::{Error, Result};
use crate::show::{py_repr, show_str};

/// A frame's headers: every `(name, value)` line in wire order, repeats included.
pub type Headers = Vec<(String, String)>;

/// How header names and values are written on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rules {
    /// No escaping; decoding trims leading whitespace of values.
    V10,
    /// No escaping, no trimming: CONNECT/STOMP/CONNECTED of a 1.1+ exchange.
    Raw,
    V11,
    V12,
}

impl Rules {
    /// The rules of a version's ordinary frames; None (not negotiated yet) is 1.0.
    pub fn of_version(version: Option<Version>) -> Rules {
        match version {
            None | Some(Version::V10) => Rules::V10,
            Some(Version::V11) => Rules::V11,
            Some(Version::V12) => Rules::V12,
        }
    }

    /// The rules for *encoding* `command` once `version` is negotiated (None = not yet).
    pub fn for_frame(command: Command, version: Option<Version>) -> Rules {
        if command.is_unescaped() {
            Rules::Raw
        } else {
            Rules::of_version(version)
        }
    }
}

// --- decoding ----------------------------------------------------------------------------

/// Decodes a header block: header lines joined by LF, each possibly ending in CR; no final
/// EOL and no blank line. Fails on invalid UTF-8, a NUL, a line without `:`, an empty name
/// or an undefined escape.
pub fn decode_headers(block: &[u8], rules: Rules) -> Result<Headers> {
    let text = std::str::from_utf8(block).map_err(|error| {
        Error::remote(format!(
            "frame headers are not valid UTF-8 (byte {} of the header block)",
            error.valid_up_to()
        ))
    })?;
    if let Some(nul) = text.find('\0') {
        let before = &text[..nul];
        let line = before.rfind('\n').map_or(before, |lf| &before[lf + 1..]);
        return Err(Error::remote(format!(
            "NUL in a header ({} before it)",
            show_str(line)
        )));
    }
    let text: Cow<'_, str> = if text.contains('\r') {
        // A CR right before a LF belongs to the EOL (the block's last LF was cut off).
        let mut joined = text.replace("\r\n", "\n");
        if joined.ends_with('\r') {
            joined.pop();
        }
        Cow::Owned(joined)
    } else {
        Cow::Borrowed(text)
    };
    let table = match rules {
        Rules::V11 | Rules::V12 if text.contains('\\') => Some(rules),
        _ => None,
    };
    let mut headers = Vec::with_capacity(8);
    for line in text.split('\n') {
        let Some(colon) = line.find(':') else {
            return Err(Error::remote(format!(
                "header line without ':' ({})",
                show_str(line)
            )));
        };
        if colon == 0 {
            return Err(Error::remote(format!(
                "header line with an empty name ({})",
                show_str(line)
            )));
        }
        let name = &line[..colon];
        let mut value = &line[colon + 1..];
        if rules == Rules::V10 {
            value = value.trim_start_matches([' ', '\t']);
        }
        headers.push((name, value));
    }
    match table {
        None => Ok(headers
            .into_iter()
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect()),
        Some(rules) => headers
            .into_iter()
            .map(|(name, value)| Ok((unescape(name, rules)?, unescape(value, rules)?)))
            .collect(),
    }
}

fn unescape(text: &str, rules: Rules) -> Result<String> {
    if !text.contains('\\') {
        return Ok(text.to_owned());
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let next = chars.next();
        match next {
            Some('n') => out.push('\n'),
            Some('c') => out.push(':'),
            Some('\\') => out.push('\\'),
            Some('r') if rules == Rules::V12 => out.push('\r'),
            _ => {
                let sequence = match next {
                    Some(c) => format!("\\{c}"),
                    None => "a trailing \\".to_owned(),
                };
                let version = if rules == Rules::V12 { "1.2" } else { "1.1" };
                return Err(Error::remote(format!(
                    "undefined escape sequence {} in a header (STOMP {version})",
                    py_repr(&sequence)
                )));
            }
        }
    }
    Ok(out)
}

// --- encoding ----------------------------------------------------------------------------

fn escape_into(out: &mut Vec<u8>, text: &str, cr: bool) {
    let bytes = text.as_bytes();
    if !bytes
        .iter()
        .any(|&b| matches!(b, b'\\' | b'\n' | b':' | b'\r'))
    {
        out.extend_from_slice(bytes);
        return;
    }
    for &b in bytes {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b':' => out.extend_from_slice(b"\\c"),
            b'\r' if cr => out.extend_from_slice(b"\\r"),
            _ => out.push(b),
        }
    }
}

/// Appends the header lines of a frame (`name:value` LF each) to `out`. Fails for what
/// `rules` cannot carry (see the module doc); `out` may then hold part of the lines.
pub fn encode_headers<N: AsRef<str>, V: AsRef<str>>(
    out: &mut Vec<u8>,
    headers: &[(N, V)],
    rules: Rules,
) -> Result<()> {
    for (name, value) in headers {
        let (name, value) = (name.as_ref(), value.as_ref());
        if name.contains('\0') || value.contains('\0') {
            return Err(Error::local(format!(
                "header {}: no STOMP version can carry a NUL",
                show_str(name)
            )));
        }
    }
    for (name, value) in headers {
        let (name, value) = (name.as_ref(), value.as_ref());
        match rules {
            Rules::V12 | Rules::V11 => {
                if name.is_empty() {
                    return Err(Error::local("a header name must not be empty"));
                }
                if rules == Rules::V11 && value.ends_with('\r') {
                    return Err(Error::local(format!(
                        "header {}: STOMP 1.1 cannot carry a value ending in CR",
                        show_str(name)
                    )));
                }
                let cr = rules == Rules::V12;
                escape_into(out, name, cr);
                out.push(b':');
                escape_into(out, value, cr);
            }
            Rules::V10 | Rules::Raw => {
                if name.is_empty() || name.contains([':', '\n']) {
                    return Err(Error::local(format!(
                        "header name {} must be non-empty without ':' or LF (no escaping in \
                         STOMP 1.0 and in CONNECT/CONNECTED frames)",
                        show_str(name)
                    )));
                }
                if value.contains('\n') || value.ends_with('\r') {
                    return Err(Error::local(format!(
                        "header {}: value must not contain LF or end in CR (no escaping in \
                         STOMP 1.0 and in CONNECT/CONNECTED frames)",
                        show_str(name)
                    )));
                }
                out.extend_from_slice(name.as_bytes());
                out.push(b':');
                out.extend_from_slice(value.as_bytes());
            }
        }
        out.push(b'\n');
    }
    Ok(())
}

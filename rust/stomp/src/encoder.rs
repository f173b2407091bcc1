//! Frame encoder: a frame to bytes under a version's header rules.
//!
//! Strict in what it sends: a body on a frame that may not have one, a `content-length` that
//! does not match the body, a NUL in a body without `content-length`, or a header the rules
//! cannot carry (a NUL in any header, in every version) is a local error, never a corrupt
//! frame. The headers are written in the frame's order; nothing is added (in particular no
//! automatic `content-length`: for STOMP 1.0 its presence tells Artemis a bytes message from
//! a text one).

use crate::command::Command;
use crate::decoder::header;
use crate::error::{Error, Result};
use crate::headers::{encode_headers, Rules};
use crate::scan::find_byte;
use crate::show::show_str;

/// A frame to encode, borrowed: what [`encode_frame`] and [`crate::Connection::send`] take.
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a, N, V> {
    pub command: Command,
    pub headers: &'a [(N, V)],
    pub body: &'a [u8],
    /// The caller sends the body (that long) and the closing NUL itself, after the encoded
    /// bytes (a MESSAGE whose body is streamed from a file): `body` must then be empty and
    /// `content-length` given.
    pub body_length: Option<i64>,
    /// Set when some header text could not be represented as UTF-8 (a lone surrogate in a
    /// Python `str`): the frame fails, after every other check, as the Python codec's UTF-8
    /// encoding failed.
    pub unencodable: bool,
}

impl<'a, N: AsRef<str>, V: AsRef<str>> Outgoing<'a, N, V> {
    /// A frame with its body.
    pub fn new(command: Command, headers: &'a [(N, V)], body: &'a [u8]) -> Self {
        Self {
            command,
            headers,
            body,
            body_length: None,
            unencodable: false,
        }
    }
}

/// Appends the wire bytes of `frame` to `out`: command, headers, blank line, body, NUL (no
/// trailing EOL); with `body_length`, only up to the blank line. On error `out` is as before.
pub fn encode_frame<N: AsRef<str>, V: AsRef<str>>(
    out: &mut Vec<u8>,
    frame: &Outgoing<'_, N, V>,
    rules: Rules,
) -> Result<()> {
    let mark = out.len();
    let result = encode_into(out, frame, rules);
    if result.is_err() {
        out.truncate(mark);
    }
    result
}

fn encode_into<N: AsRef<str>, V: AsRef<str>>(
    out: &mut Vec<u8>,
    frame: &Outgoing<'_, N, V>,
    rules: Rules,
) -> Result<()> {
    let command = frame.command;
    let body = frame.body;
    let content_length = header(frame.headers, "content-length");
    if frame.body_length.is_some()
        && (!body.is_empty() || !command.may_have_body() || content_length.is_none())
    {
        return Err(Error::local(
            "a body sent apart needs an empty body and content-length",
        ));
    }
    let length = frame.body_length.unwrap_or(body.len() as i64);
    if length != 0 && !command.may_have_body() {
        return Err(Error::local(format!(
            "{} frames cannot have a body (only SEND, MESSAGE, ERROR)",
            command.as_str()
        )));
    }
    if let Some(content_length) = content_length {
        if content_length != length.to_string() {
            return Err(Error::local(format!(
                "content-length {} does not match the {length}-byte body",
                show_str(content_length)
            )));
        }
    } else if find_byte(body, 0).is_some() {
        return Err(Error::local(
            "a body containing NUL needs a content-length header",
        ));
    }
    out.reserve(command.as_str().len() + 64 * frame.headers.len() + body.len() + 3);
    out.extend_from_slice(command.as_str().as_bytes());
    out.push(b'\n');
    encode_headers(out, frame.headers, rules)?;
    if frame.unencodable {
        return Err(Error::local(
            "frame headers are not encodable as UTF-8 (surrogates not allowed)",
        ));
    }
    out.push(b'\n');
    if frame.body_length.is_none() {
        out.extend_from_slice(body);
        out.push(0);
    }
    Ok(())
}

//! Incremental frame decoder: bytes in, frames and heart-beats out.
//!
//! All unconsumed input lives in one buffer; `pos` is the first byte of the event being
//! decoded (a frame or a heart-beat EOL) and every other offset is counted from there.
//! Finished events advance `pos`; the consumed front is dropped when new bytes arrive and it
//! is at least half the buffer (amortized O(1) per byte, and a batch of pipelined frames is
//! decoded without moving any bytes). Once everything is decoded, a buffer that grew past
//! [`KEEP_CAPACITY`] (a large frame) is freed: a connection that sent one 10 MiB frame
//! does not hold 10 MiB for the rest of its life. Small frames read in chunks of up to
//! 64 KiB never grow it that far, so they never pay for it.
//!
//! A frame is decoded in three phases; each only *searches* (eight bytes at a time) and
//! remembers in `scan` where its last unsuccessful search stopped, so bytes that trickle in
//! one at a time are searched once, not re-scanned from the start of the frame (no O(n²) on
//! slow senders):
//!
//! * **command**: between frames. A LF or CRLF here is a heart-beat (STOMP 1.1+; also the
//!   optional EOLs after a 1.2 frame's NUL, and the stray LF some 1.0 clients send). A CR
//!   followed by anything else is an error. Otherwise search LF; the line (minus one trailing
//!   CR) must be a command this side may receive.
//! * **headers**: search LF line by line, only *counting*: each line's length, the number of
//!   lines and their total size are checked against [`FrameLimits`] as soon as they are
//!   known, and an unfinished line is checked against the line and total limits while it
//!   grows. An empty line ends the block; only then is the whole block decoded at once under
//!   the rules of the negotiated version ([`crate::headers`]), because those rules may depend
//!   on headers of the frame itself (a CONNECT without `accept-version` is a 1.0 frame).
//! * **body**: with `content-length` (the first one, if repeated): wait for that many bytes
//!   plus one, which must be NUL. Without it: search the first NUL. Either way the body is
//!   bounded by `max_body_size`, checked on the header value or while bytes arrive.
//!
//! Any violation is a remote error; the decoder keeps no error state (the
//! [`crate::Connection`] does), it just must not be used again until [`Decoder::clear`].

use crate::command::{Command, Role, Version};
use crate::error::{Error, Result};
use crate::headers::{decode_headers, Headers, Rules};
use crate::limits::FrameLimits;
use crate::scan::{contains, find, find_byte};
use crate::show::{show_bytes, show_str};

const LF: u8 = b'\n';
const CR: u8 = b'\r';
/// Consumed bytes are dropped at the latest when there are this many.
const COMPACT_AT: usize = 64 * 1024;
/// A drained buffer with more capacity than this is freed. Twice a 64 KiB read (the data
/// plane's and the socket shell's): the tail of a small frame plus the next read fit, so a
/// steady stream of small frames keeps its buffer instead of freeing and regrowing it.
const KEEP_CAPACITY: usize = 128 * 1024;

/// One STOMP frame: the command, every header line in wire order (repeats included) and
/// the body, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub command: Command,
    pub headers: Headers,
    pub body: Vec<u8>,
}

impl Frame {
    pub fn new(command: Command, headers: Headers, body: Vec<u8>) -> Self {
        Self {
            command,
            headers,
            body,
        }
    }

    /// The value of the first `name` header (STOMP 1.2: the first entry wins).
    pub fn get(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
}

/// The value of the first `name` header of `headers`.
pub fn header<'a, N: AsRef<str>, V: AsRef<str>>(
    headers: &'a [(N, V)],
    name: &str,
) -> Option<&'a str> {
    headers
        .iter()
        .find(|(key, _)| key.as_ref() == name)
        .map(|(_, value)| value.as_ref())
}

/// What [`Decoder::next_item`] decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Frame(Frame),
    /// A bare EOL between frames.
    Heartbeat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Command,
    Headers,
    Body,
}

/// Decodes frames from bytes fed in arbitrary pieces (see the module doc).
#[derive(Debug)]
pub struct Decoder {
    buf: Vec<u8>,
    pos: usize,
    limits: FrameLimits,
    /// Who sends what we decode: only its commands are accepted (None: every command).
    peer: Option<Role>,
    phase: Phase,
    // Offsets from `pos`:
    scan: usize,
    line_start: usize,
    headers_start: usize,
    body_start: usize,
    header_count: usize,
    header_bytes: usize,
    command: Command,
    headers: Headers,
    content_length: Option<usize>,
}

impl Decoder {
    /// A decoder of what `peer` sends.
    pub fn new(limits: FrameLimits, peer: Role) -> Self {
        Self::accepting(limits, Some(peer))
    }

    /// A decoder of every command, whoever may send it (round-trip tests, tools).
    pub fn any(limits: FrameLimits) -> Self {
        Self::accepting(limits, None)
    }

    fn accepting(limits: FrameLimits, peer: Option<Role>) -> Self {
        Self {
            buf: Vec::new(),
            pos: 0,
            limits,
            peer,
            phase: Phase::Command,
            scan: 0,
            line_start: 0,
            headers_start: 0,
            body_start: 0,
            header_count: 0,
            header_bytes: 0,
            command: Command::Send,
            headers: Vec::new(),
            content_length: None,
        }
    }

    pub fn limits(&self) -> &FrameLimits {
        &self.limits
    }

    /// Appends received bytes.
    pub fn feed(&mut self, data: &[u8]) {
        if self.pos > 0 {
            if self.pos == self.buf.len() {
                self.buf.clear();
                self.pos = 0;
            } else if self.pos >= COMPACT_AT || self.pos * 2 >= self.buf.len() {
                self.buf.drain(..self.pos);
                self.pos = 0;
            }
        }
        self.buf.extend_from_slice(data);
    }

    /// Drops everything buffered (after an error).
    pub fn clear(&mut self) {
        self.buf = Vec::new();
        self.pos = 0;
        self.reset();
    }

    /// Bytes received but not yet returned as events.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn reset(&mut self) {
        self.phase = Phase::Command;
        self.scan = 0;
        self.header_count = 0;
        self.header_bytes = 0;
        self.content_length = None;
        self.headers = Vec::new();
    }

    /// The next complete frame or heart-beat, or None if more bytes are needed.
    ///
    /// `version` is the negotiated version (None before negotiation: 1.0 rules) and chooses
    /// how the headers of a frame completed by this call are decoded.
    pub fn next_item(&mut self, version: Option<Version>) -> Result<Option<Item>> {
        if self.phase == Phase::Command {
            let window = &self.buf[self.pos..];
            match window.first() {
                None => {
                    self.drained();
                    return Ok(None);
                }
                Some(&LF) => {
                    self.pos += 1;
                    return Ok(Some(Item::Heartbeat));
                }
                Some(&CR) => {
                    return match window.get(1) {
                        None => Ok(None),
                        Some(&LF) => {
                            self.pos += 2;
                            Ok(Some(Item::Heartbeat))
                        }
                        Some(_) => Err(Error::remote("CR not followed by LF between frames")),
                    };
                }
                Some(_) => {}
            }
            if !self.read_command()? {
                return Ok(None);
            }
        }
        if self.phase == Phase::Headers && !self.read_headers(version)? {
            return Ok(None);
        }
        self.read_body()
    }

    /// Everything fed was decoded: free a buffer a large frame grew (checked once per
    /// read, when the caller has taken every event, not once per frame).
    fn drained(&mut self) {
        if self.buf.capacity() > KEEP_CAPACITY {
            self.buf = Vec::new();
            self.pos = 0;
        }
    }

    fn read_command(&mut self) -> Result<bool> {
        let window = &self.buf[self.pos..];
        let limit = self.limits.max_command_length;
        let too_long = || {
            Error::remote(format!(
                "command line longer than {limit} bytes ({})",
                show_bytes(&window[..window.len().min(20)])
            ))
        };
        let Some(at) = find_byte(&window[self.scan..], LF) else {
            if window.len() > limit + 1 {
                return Err(too_long()); // + 1: the last byte may be the CR of a CRLF
            }
            self.scan = window.len();
            return Ok(false);
        };
        let newline = self.scan + at;
        let end = if newline > 0 && window[newline - 1] == CR {
            newline - 1
        } else {
            newline
        };
        if end > limit {
            return Err(too_long());
        }
        let raw = &window[..end];
        let command = match Command::parse(raw) {
            Some(command) if self.peer.map_or(true, |peer| peer.sends(command)) => command,
            Some(command) => {
                return Err(Error::remote(format!(
                    "{} frames may not be sent to this side",
                    command.as_str()
                )))
            }
            None => {
                return Err(Error::remote(format!(
                    "unknown command {}",
                    show_bytes(raw)
                )))
            }
        };
        self.command = command;
        self.headers_start = newline + 1;
        self.line_start = newline + 1;
        self.scan = newline + 1;
        self.phase = Phase::Headers;
        Ok(true)
    }

    fn read_headers(&mut self, version: Option<Version>) -> Result<bool> {
        let window = &self.buf[self.pos..];
        let max_line = self.limits.max_header_line_length;
        let max_count = self.limits.max_header_count;
        let max_bytes = self.limits.max_header_bytes;
        let too_big = || Error::remote(format!("frame headers larger than {max_bytes} bytes"));
        let mut count = self.header_count;
        let mut total = self.header_bytes;
        let mut line_start = self.line_start;
        let mut scan = self.scan;
        let newline = loop {
            let Some(at) = find_byte(&window[scan..], LF) else {
                let partial = window.len() - line_start; // + 1 below: its last byte may be a CR
                if partial > max_line + 1 {
                    return Err(self.line_too_long(line_start));
                }
                if total + partial > max_bytes + 1 {
                    return Err(too_big());
                }
                self.line_start = line_start;
                self.scan = window.len();
                self.header_count = count;
                self.header_bytes = total;
                return Ok(false);
            };
            let newline = scan + at;
            let mut length = newline - line_start;
            if length > 0 && window[newline - 1] == CR {
                length -= 1;
            }
            if length == 0 {
                break newline;
            }
            count += 1;
            total += length;
            if length > max_line {
                return Err(self.line_too_long(line_start));
            }
            if count > max_count {
                return Err(Error::remote(format!(
                    "more than {max_count} headers in a frame"
                )));
            }
            if total > max_bytes {
                return Err(too_big());
            }
            line_start = newline + 1;
            scan = newline + 1;
        };
        self.end_headers(version, line_start, newline)?;
        Ok(true)
    }

    fn line_too_long(&self, line_start: usize) -> Error {
        let window = &self.buf[self.pos..];
        let end = window.len().min(line_start + 20);
        Error::remote(format!(
            "header line longer than {} bytes ({})",
            self.limits.max_header_line_length,
            show_bytes(&window[line_start..end])
        ))
    }

    /// Decodes the block: `line_start` is the blank line, `newline` its LF.
    fn end_headers(
        &mut self,
        version: Option<Version>,
        line_start: usize,
        newline: usize,
    ) -> Result<()> {
        self.body_start = newline + 1;
        self.scan = newline + 1;
        self.phase = Phase::Body;
        let start = self.headers_start;
        if line_start == start {
            self.headers = Vec::new();
            return Ok(());
        }
        // The block ends with the LF before the blank line.
        let block = &self.buf[self.pos + start..self.pos + line_start - 1];
        let command = self.command;
        let rules = if command.is_unescaped() {
            if is_10_connect(command, block) {
                Rules::V10
            } else {
                Rules::Raw
            }
        } else {
            Rules::of_version(version)
        };
        let headers = decode_headers(block, rules)?;
        if contains(block, b"content-length:") {
            // A cheap pre-check: that name never needs escaping.
            if let Some(value) = header(&headers, "content-length") {
                self.content_length = Some(self.parse_content_length(value)?);
            }
        }
        self.headers = headers;
        Ok(())
    }

    fn parse_content_length(&self, value: &str) -> Result<usize> {
        if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Error::remote(format!(
                "content-length must be a non-negative integer, got {}",
                show_str(value)
            )));
        }
        let digits = value.trim_start_matches('0');
        let digits = if digits.is_empty() { "0" } else { digits };
        let max = self.limits.max_body_size;
        match digits.parse::<usize>() {
            Ok(length) if length <= max => Ok(length),
            _ => Err(Error::remote(format!(
                "content-length {digits} exceeds the maximum frame body size of {max} bytes"
            ))),
        }
    }

    fn read_body(&mut self) -> Result<Option<Item>> {
        let window = &self.buf[self.pos..];
        let start = self.body_start;
        let end = if let Some(length) = self.content_length {
            let end = start + length;
            if window.len() <= end {
                return Ok(None);
            }
            if window[end] != 0 {
                return Err(Error::remote(format!(
                    "frame body not followed by NUL after content-length {length} bytes"
                )));
            }
            end
        } else {
            let limit = self.limits.max_body_size;
            let too_big = || Error::remote(format!("frame body larger than {limit} bytes"));
            let Some(at) = find_byte(&window[self.scan..], 0) else {
                if window.len() - start > limit {
                    return Err(too_big());
                }
                self.scan = window.len();
                return Ok(None);
            };
            let end = self.scan + at;
            if end - start > limit {
                return Err(too_big());
            }
            end
        };
        let body = window[start..end].to_vec();
        let headers = std::mem::take(&mut self.headers);
        self.pos += end + 1;
        self.phase = Phase::Command;
        self.scan = 0;
        self.header_count = 0;
        self.header_bytes = 0;
        self.content_length = None;
        Ok(Some(Item::Frame(Frame {
            command: self.command,
            headers,
            body,
        })))
    }
}

/// Whether an unescaped frame (CONNECT/STOMP/CONNECTED) is itself a STOMP 1.0 frame.
///
/// A CONNECT without `accept-version` and a CONNECTED without a `version` above 1.0 are 1.0
/// frames, read with the 1.0 rules (leading-whitespace trimming). STOMP is 1.1+ only.
fn is_10_connect(command: Command, block: &[u8]) -> bool {
    match command {
        Command::Connect => {
            !(block.starts_with(b"accept-version:") || contains(block, b"\naccept-version:"))
        }
        Command::Connected => {
            // The first version header decides; absent means 1.0.
            let from = if block.starts_with(b"version:") {
                8
            } else if let Some(at) = find(block, b"\nversion:") {
                at + 9
            } else {
                return true;
            };
            let rest = &block[from..];
            let value = &rest[..find_byte(rest, LF).unwrap_or(rest.len())];
            trim(value) == b"1.0"
        }
        _ => false,
    }
}

fn trim(mut value: &[u8]) -> &[u8] {
    while let [b' ' | b'\t' | b'\r', rest @ ..] = value {
        value = rest;
    }
    while let [rest @ .., b' ' | b'\t' | b'\r'] = value {
        value = rest;
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body_size: usize) -> Vec<u8> {
        let mut wire =
            format!("SEND\ndestination:/queue/q\ncontent-length:{body_size}\n\n").into_bytes();
        wire.resize(wire.len() + body_size, b'x');
        wire.extend_from_slice(b"\0\n"); // and a 1.2 EOL, as clients send after the NUL
        wire
    }

    fn decode_all(decoder: &mut Decoder) -> Vec<Item> {
        let mut items = Vec::new();
        while let Some(item) = decoder.next_item(Some(Version::V12)).unwrap() {
            items.push(item);
        }
        items
    }

    fn bodies(items: &[Item]) -> Vec<usize> {
        items
            .iter()
            .filter_map(|item| match item {
                Item::Frame(frame) => Some(frame.body.len()),
                Item::Heartbeat => None,
            })
            .collect()
    }

    #[test]
    fn a_large_frame_does_not_keep_its_buffer_once_decoded() {
        let mut decoder = Decoder::new(FrameLimits::default(), Role::Client);
        let large = frame(10 << 20);
        for chunk in large.chunks(64 * 1024) {
            decoder.feed(chunk);
            decode_all(&mut decoder); // the frame is whole only with the last chunk
        }
        assert!(decoder.buf.capacity() <= KEEP_CAPACITY);
        decoder.feed(&frame(10));
        assert!(decoder.buf.capacity() < 1024);
        assert_eq!(bodies(&decode_all(&mut decoder)), [10]);
        assert!(decoder.buf.capacity() < 1024);
        assert_eq!(decoder.buffered(), 0);
    }

    #[test]
    fn a_large_frame_then_a_small_one_in_the_same_read() {
        let mut decoder = Decoder::new(FrameLimits::default(), Role::Client);
        let mut wire = frame(1 << 20);
        wire.extend_from_slice(&frame(10));
        decoder.feed(&wire);
        assert!(decoder.buf.capacity() > KEEP_CAPACITY);
        assert_eq!(bodies(&decode_all(&mut decoder)), [1 << 20, 10]);
        assert_eq!(decoder.buf.capacity(), 0);
    }

    #[test]
    fn a_partial_frame_keeps_the_buffer_it_needs() {
        let mut decoder = Decoder::new(FrameLimits::default(), Role::Client);
        let large = frame(1 << 20);
        let (head, nul) = large.split_at(large.len() - 2); // all but the NUL and the EOL
        decoder.feed(head);
        assert!(decode_all(&mut decoder).is_empty());
        assert!(decoder.buf.capacity() >= head.len());
        decoder.feed(nul);
        assert_eq!(bodies(&decode_all(&mut decoder)), [1 << 20]);
        assert!(decoder.buf.capacity() <= KEEP_CAPACITY);
    }

    #[test]
    fn small_frames_in_64_kib_reads_keep_their_buffer() {
        let mut decoder = Decoder::new(FrameLimits::default(), Role::Client);
        let wire: Vec<u8> = (0..20_000).flat_map(|i| frame(100 + i % 300)).collect();
        let mut capacity = 0;
        let mut frames = 0;
        for chunk in wire.chunks(64 * 1024) {
            decoder.feed(chunk);
            frames += bodies(&decode_all(&mut decoder)).len();
            assert!(decoder.buf.capacity() <= KEEP_CAPACITY);
            assert!(decoder.buf.capacity() >= capacity, "freed and regrown");
            capacity = decoder.buf.capacity();
        }
        assert_eq!(frames, 20_000);
    }
}

//! A sans-IO STOMP 1.0/1.1/1.2 codec (h11's design): bytes in, events out; frames in, bytes
//! out; the state of each direction of one connection, server or client side. No sockets,
//! no clock, no threads: the node's Python shell, its client library and the data plane to
//! come drive it alike (`artemis_py.protocol.stomp.Connection` is this crate through
//! `rust/bindings`).
//!
//! * [`Connection`]: `receive_data`, `next_event` (or [`Connection::next_events`]: every
//!   complete event of the buffer in one call), `send`, `send_heartbeat`, `accept_connect`;
//!   its module doc has the states.
//! * [`Decoder`] ([`decoder`] has the decoder's theory of operation), [`encode_frame`],
//!   the per-version header rules in [`headers`], the limits in [`FrameLimits`].
//! * [`Error`]: local (we misused the codec) or remote (the peer broke the protocol), with
//!   the messages the Python codec gave, peer data quoted as Python's `repr` does ([`show`]).
//!
//! Frames own their bytes (`Vec<u8>` bodies), so a decoded body can be handed on without a
//! copy.
//!
//! Choices where the specs leave room (lenient in what we accept, strict in what we send):
//!
//! * EOL may be CRLF in every version, not only 1.2. Every EOL between frames is a
//!   heart-beat event, in 1.0 too (some 1.0 clients send a LF after each NUL).
//! * STOMP 1.0 header values lose their leading spaces/tabs, as in Artemis's 1.0 decoder.
//! * A raw `:` inside a header value is kept (the 1.1/1.2 grammar forbids it; senders do it).
//! * Repeated headers: all are kept in order, [`Frame::get`] returns the first (1.2 rule,
//!   applied to every version; Artemis's map keeps the last) and the first `content-length`
//!   frames the body.
//! * `content-length` must be ASCII digits and be followed by NUL (Artemis 1.1+ would skip
//!   to the next NUL); bodies on frames other than SEND/MESSAGE/ERROR are accepted when
//!   received but refused when sent; commands are case-sensitive, with nothing else on their
//!   line.
//! * Before version negotiation an ERROR frame is written and read with the 1.0 rules.
#![forbid(unsafe_code)]

pub mod command;
pub mod connection;
pub mod decoder;
pub mod encoder;
pub mod error;
pub mod headers;
pub mod limits;
mod printable;
mod scan;
pub mod show;

pub use command::{Command, Role, State, Version};
pub use connection::{negotiate_version, parse_versions, Connection, Event, Stop};
pub use decoder::{header, Decoder, Frame, Item};
pub use encoder::{encode_frame, Outgoing};
pub use error::{Error, ErrorKind, Result};
pub use headers::{decode_headers, encode_headers, Headers, Rules};
pub use limits::FrameLimits;

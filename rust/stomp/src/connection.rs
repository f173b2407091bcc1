//! One end of a STOMP connection: its parse buffer, version and the state of each direction.
//!
//! State (h11's model, per direction; [`State`]):
//!
//! * The client's first frame must be CONNECT or STOMP (else a remote error), and only one
//!   is allowed. The server's first frame must be CONNECTED or ERROR.
//! * The version is None until negotiated. The server sets it with
//!   [`Connection::accept_connect`] (or by sending CONNECTED, whose `version` header then
//!   decides); until then [`Connection::next_event`] returns [`Event::Paused`] after the
//!   CONNECT, because the frames a client pipelines behind its CONNECT decode differently in
//!   1.0, 1.1 and 1.2. The client takes the version from the CONNECTED it receives (absent =
//!   1.0) and checks that its CONNECT offered it.
//! * After DISCONNECT (client to server) or ERROR (server to client) nothing but heart-beat
//!   EOLs may follow in that direction. The server may still answer a DISCONNECT (its
//!   RECEIPT).
//! * A remote error from [`Connection::next_event`] puts `their_state` in ERROR for good:
//!   later calls fail again ("connection already failed: ..."), and buffered bytes are
//!   dropped. We may still send (the ERROR frame that reports it). A local error from
//!   [`Connection::send`] puts `our_state` in ERROR: nothing more can be sent.
//! * Before negotiation an ERROR frame is encoded, and decoded, with the STOMP 1.0 rules.

use crate::command::{Command, Role, State, Version};
use crate::decoder::{header, Decoder, Frame, Item};
use crate::encoder::{encode_frame, Outgoing};
use crate::error::{Error, Result};
use crate::headers::Rules;
use crate::limits::FrameLimits;
use crate::show::{py_repr, py_strip, show_str};

/// What [`Connection::next_event`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Frame(Frame),
    /// A bare EOL between frames: a STOMP 1.1+ heart-beat (or a 1.2 EOL after a NUL).
    Heartbeat,
    /// The peer closed its side cleanly, between frames.
    ConnectionClosed,
    /// Nothing complete is buffered: feed more bytes.
    NeedData,
    /// Server side, after a CONNECT/STOMP frame: accept it (or send CONNECTED or ERROR)
    /// first, because how the following frames decode depends on the negotiated version.
    Paused,
}

/// Why [`Connection::next_events`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    NeedData,
    Paused,
    /// The batch ends with [`Event::ConnectionClosed`].
    Closed,
}

/// The versions an `accept-version` value names (None, the header absent, is 1.0).
pub fn parse_versions(accept_version: Option<&str>) -> Vec<String> {
    match accept_version {
        None => vec!["1.0".to_owned()],
        Some(text) => text
            .split(',')
            .map(py_strip)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .collect(),
    }
}

/// The highest version both an `accept-version` value (a CONNECT header; None: 1.0) and
/// this codec speak; None when there is none (answer with an ERROR frame then).
pub fn negotiate_version(accept_version: Option<&str>) -> Option<Version> {
    let offered = parse_versions(accept_version);
    Version::ALL
        .into_iter()
        .rev()
        .find(|v| offered.iter().any(|o| o == v.as_str()))
}

/// One end of a STOMP connection, without I/O (see the module doc).
#[derive(Debug)]
pub struct Connection {
    our_role: Role,
    decoder: Decoder,
    version: Option<Version>,
    our_state: State,
    their_state: State,
    eof: bool,
    paused: bool,
    connect_received: bool,
    /// The versions the CONNECT offered.
    offered: Vec<String>,
    their_error: Option<Error>,
}

impl Connection {
    pub fn new(our_role: Role, limits: FrameLimits) -> Self {
        Self {
            our_role,
            decoder: Decoder::new(limits, our_role.peer()),
            version: None,
            our_state: State::Connecting,
            their_state: State::Connecting,
            eof: false,
            paused: false,
            connect_received: false,
            offered: Vec::new(),
            their_error: None,
        }
    }

    pub fn our_role(&self) -> Role {
        self.our_role
    }

    pub fn limits(&self) -> &FrameLimits {
        self.decoder.limits()
    }

    /// The negotiated version, None until negotiated.
    pub fn version(&self) -> Option<Version> {
        self.version
    }

    /// State of what we send.
    pub fn our_state(&self) -> State {
        self.our_state
    }

    /// State of what the peer sends.
    pub fn their_state(&self) -> State {
        self.their_state
    }

    /// Bytes received but not yet returned as events.
    pub fn buffered(&self) -> usize {
        self.decoder.buffered()
    }

    // --- receiving -----------------------------------------------------------------------

    /// Feeds bytes from the peer; empty means the peer closed its side.
    pub fn receive_data(&mut self, data: &[u8]) -> Result<()> {
        if self.their_state == State::Error {
            return Ok(()); // nothing more will be decoded; don't let the buffer grow
        }
        if data.is_empty() {
            self.eof = true;
            return Ok(());
        }
        if self.eof {
            return Err(Error::local(
                "receive_data() after the end of the stream (b'')",
            ));
        }
        self.decoder.feed(data);
        Ok(())
    }

    /// The next event, [`Event::NeedData`] or [`Event::Paused`]. Fails with remote errors.
    pub fn next_event(&mut self) -> Result<Event> {
        if self.their_state == State::Error {
            let failed = self.their_error.as_ref();
            return Err(Error {
                message: format!(
                    "connection already failed: {}",
                    failed.map_or("", |e| e.message.as_str())
                ),
                error_headers: failed.map(|e| e.error_headers.clone()).unwrap_or_default(),
                ..Error::remote("")
            });
        }
        if self.paused {
            return Ok(Event::Paused);
        }
        match self.decode() {
            Ok(event) => Ok(event),
            Err(error) => {
                self.their_state = State::Error;
                self.their_error = Some(error.clone());
                self.paused = false;
                self.decoder.clear();
                Err(error)
            }
        }
    }

    /// Every complete event, appended to `out` in order, up to the next
    /// [`Event::NeedData`] or [`Event::Paused`] (not appended) or up to and including
    /// [`Event::ConnectionClosed`]. On an error, `out` holds the events before it.
    pub fn next_events(&mut self, out: &mut Vec<Event>) -> Result<Stop> {
        loop {
            match self.next_event()? {
                Event::NeedData => return Ok(Stop::NeedData),
                Event::Paused => return Ok(Stop::Paused),
                Event::ConnectionClosed => {
                    out.push(Event::ConnectionClosed);
                    return Ok(Stop::Closed);
                }
                event => out.push(event),
            }
        }
    }

    fn decode(&mut self) -> Result<Event> {
        match self.decoder.next_item(self.version)? {
            Some(Item::Frame(frame)) => {
                self.received(&frame)?;
                Ok(Event::Frame(frame))
            }
            Some(Item::Heartbeat) => Ok(Event::Heartbeat),
            None if !self.eof => Ok(Event::NeedData),
            None if self.decoder.buffered() > 0 => Err(Error::remote(format!(
                "connection closed in the middle of a frame ({} bytes unread)",
                self.decoder.buffered()
            ))),
            None => {
                self.their_state = State::Closed;
                Ok(Event::ConnectionClosed)
            }
        }
    }

    fn received(&mut self, frame: &Frame) -> Result<()> {
        let command = frame.command;
        let name = command.as_str();
        let state = self.their_state;
        if self.our_role == Role::Server {
            match state {
                State::Connected => {
                    if command == Command::Disconnect {
                        self.their_state = State::Closed;
                    } else if command.is_connect() {
                        return Err(Error::remote(format!(
                            "{name} received on an established connection"
                        )));
                    }
                }
                State::Connecting => {
                    if !command.is_connect() {
                        return Err(Error::remote(format!(
                            "the first frame must be CONNECT or STOMP, not {name}"
                        )));
                    }
                    self.connect_received = true;
                    self.offered = parse_versions(frame.get("accept-version"));
                    self.their_state = State::Connected;
                    self.paused = true;
                }
                _ => {
                    return Err(Error::remote(format!(
                        "{name} frame received after DISCONNECT"
                    )))
                }
            }
            return Ok(());
        }
        match state {
            State::Connected => match command {
                Command::Error => self.their_state = State::Closed,
                Command::Connected => return Err(Error::remote("CONNECTED received twice")),
                _ => {}
            },
            State::Connecting => match command {
                Command::Error => self.their_state = State::Closed,
                Command::Connected => self.connected_received(frame)?,
                _ => return Err(Error::remote(format!("{name} received before CONNECTED"))),
            },
            _ => return Err(Error::remote(format!("{name} frame received after ERROR"))),
        }
        Ok(())
    }

    fn connected_received(&mut self, frame: &Frame) -> Result<()> {
        if self.our_state == State::Connecting {
            return Err(Error::remote("CONNECTED received before we sent CONNECT"));
        }
        let version = py_strip(
            frame
                .get("version")
                .filter(|v| !v.is_empty())
                .unwrap_or("1.0"),
        );
        let Some(parsed) = Version::parse(version) else {
            return Err(Error::remote(format!(
                "server chose unknown STOMP version {}",
                show_str(version)
            )));
        };
        if !self.offered.iter().any(|v| v == version) {
            return Err(Error::remote(format!(
                "server chose STOMP {version}, which our CONNECT did not offer ({})",
                self.offered.join(",")
            )));
        }
        self.version = Some(parsed);
        self.their_state = State::Connected;
        Ok(())
    }

    // --- negotiation ---------------------------------------------------------------------

    /// Server side: fixes the version after a CONNECT. Ends [`Event::Paused`]. Sending
    /// CONNECTED afterwards must name the same version.
    pub fn accept_connect(&mut self, version: &str) -> Result<()> {
        if self.our_role != Role::Server {
            return Err(Error::local("only the server side accepts a CONNECT"));
        }
        if !self.connect_received {
            return Err(Error::local(
                "accept_connect() before a CONNECT frame was received",
            ));
        }
        if let Some(negotiated) = self.version {
            return Err(Error::local(format!(
                "the version is already negotiated ({})",
                negotiated.as_str()
            )));
        }
        let Some(parsed) = Version::parse(version) else {
            return Err(Error::local(format!(
                "unsupported STOMP version {}",
                py_repr(version)
            )));
        };
        if !self.offered.iter().any(|v| v == version) {
            return Err(Error::local(format!(
                "the client's CONNECT did not offer STOMP {version} ({})",
                self.offered.join(",")
            )));
        }
        self.version = Some(parsed);
        self.paused = false;
        Ok(())
    }

    // --- sending -------------------------------------------------------------------------

    /// Appends the bytes to write for `frame` to `out` (nothing on error).
    pub fn send<N: AsRef<str>, V: AsRef<str>>(
        &mut self,
        out: &mut Vec<u8>,
        frame: &Outgoing<'_, N, V>,
    ) -> Result<()> {
        if self.our_state == State::Error {
            return Err(Error::local("cannot send: an earlier send() failed"));
        }
        let result = self.send_checked(out, frame);
        if result.is_err() {
            self.our_state = State::Error;
        }
        result
    }

    /// What [`Connection::send`] does with a command that is no STOMP command (the text a
    /// Python caller gave): the error, `our_state` then in ERROR.
    pub fn refuse_command(&mut self, command: &str) -> Error {
        if self.our_state == State::Error {
            return Error::local("cannot send: an earlier send() failed");
        }
        self.our_state = State::Error;
        self.cannot_send(command)
    }

    fn cannot_send(&self, command: &str) -> Error {
        Error::local(format!(
            "a {} cannot send {} frames",
            self.our_role.as_str(),
            show_str(command)
        ))
    }

    fn send_checked<N: AsRef<str>, V: AsRef<str>>(
        &mut self,
        out: &mut Vec<u8>,
        frame: &Outgoing<'_, N, V>,
    ) -> Result<()> {
        let command = frame.command;
        let name = command.as_str();
        if !self.our_role.sends(command) {
            return Err(self.cannot_send(name));
        }
        let state = self.our_state;
        if state == State::Closed {
            let ended_by = if self.our_role == Role::Server {
                "ERROR"
            } else {
                "DISCONNECT"
            };
            return Err(Error::local(format!("cannot send {name} after {ended_by}")));
        }
        if self.our_role == Role::Server {
            if state == State::Connecting {
                if command == Command::Connected {
                    self.check_connected(frame.headers)?;
                } else if command != Command::Error {
                    return Err(Error::local(format!("cannot send {name} before CONNECTED")));
                }
            } else if command == Command::Connected {
                return Err(Error::local("CONNECTED was already sent"));
            }
            encode_frame(out, frame, Rules::for_frame(command, self.version))?;
            if command == Command::Connected {
                if self.version.is_none() {
                    // No accept_connect(): CONNECTED decides (check_connected vetted it).
                    self.version =
                        Version::parse(header(frame.headers, "version").unwrap_or("1.0"));
                    self.paused = false;
                }
                self.our_state = State::Connected;
            } else if command == Command::Error {
                self.our_state = State::Closed;
            }
            return Ok(());
        }
        if state == State::Connecting {
            if !command.is_connect() {
                return Err(Error::local(format!(
                    "the first frame must be CONNECT or STOMP, not {name}"
                )));
            }
        } else if command.is_connect() {
            return Err(Error::local(format!("{name} was already sent")));
        } else if self.version.is_none() {
            return Err(Error::local(format!(
                "cannot send {name} before CONNECTED arrives (the version is not negotiated)"
            )));
        }
        encode_frame(out, frame, Rules::for_frame(command, self.version))?;
        if state == State::Connecting {
            self.offered = parse_versions(header(frame.headers, "accept-version"));
            self.our_state = State::Connected;
        } else if command == Command::Disconnect {
            self.our_state = State::Closed;
        }
        Ok(())
    }

    fn check_connected<N: AsRef<str>, V: AsRef<str>>(&self, headers: &[(N, V)]) -> Result<()> {
        if !self.connect_received {
            return Err(Error::local(
                "cannot send CONNECTED before receiving CONNECT",
            ));
        }
        let version = header(headers, "version").unwrap_or("1.0");
        if let Some(accepted) = self.version {
            if version != accepted.as_str() {
                return Err(Error::local(format!(
                    "CONNECTED says version {} but {} was accepted",
                    show_str(version),
                    accepted.as_str()
                )));
            }
        } else if Version::parse(version).is_none() {
            return Err(Error::local(format!(
                "CONNECTED names unsupported version {}",
                show_str(version)
            )));
        } else if !self.offered.iter().any(|v| v == version) {
            return Err(Error::local(format!(
                "CONNECTED names STOMP {version}, which the client did not offer ({})",
                self.offered.join(",")
            )));
        }
        Ok(())
    }

    /// The bytes of one heart-beat (an EOL), once connected with STOMP 1.1 or 1.2.
    ///
    /// Still allowed after our DISCONNECT or ERROR: the grammar lets EOLs follow a frame's
    /// NUL, so a heart-beat timer racing the close is harmless. Fails (without changing
    /// state) before CONNECT/CONNECTED, in 1.0 and after a failed [`Connection::send`].
    pub fn send_heartbeat(&self) -> Result<&'static [u8]> {
        if matches!(self.our_state, State::Connecting | State::Error) {
            return Err(Error::local(format!(
                "heart-beats need an established connection (our_state={})",
                self.our_state.as_str()
            )));
        }
        match self.version {
            None => Err(Error::local(
                "heart-beats before CONNECTED: the version is not negotiated",
            )),
            Some(Version::V10) => Err(Error::local("STOMP 1.0 has no heart-beats (1.1+ only)")),
            Some(_) => Ok(b"\n"),
        }
    }
}

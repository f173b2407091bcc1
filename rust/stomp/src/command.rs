//! STOMP commands, versions, roles and the per-direction states.

/// Every STOMP 1.0-1.2 command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Command {
    // client frames
    Connect,
    Stomp,
    Send,
    Subscribe,
    Unsubscribe,
    Ack,
    Nack,
    Begin,
    Commit,
    Abort,
    Disconnect,
    // server frames
    Connected,
    Message,
    Receipt,
    Error,
}

impl Command {
    /// Every command, client frames first.
    pub const ALL: [Command; 15] = [
        Command::Connect,
        Command::Stomp,
        Command::Send,
        Command::Subscribe,
        Command::Unsubscribe,
        Command::Ack,
        Command::Nack,
        Command::Begin,
        Command::Commit,
        Command::Abort,
        Command::Disconnect,
        Command::Connected,
        Command::Message,
        Command::Receipt,
        Command::Error,
    ];

    /// The command as on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Command::Connect => "CONNECT",
            Command::Stomp => "STOMP",
            Command::Send => "SEND",
            Command::Subscribe => "SUBSCRIBE",
            Command::Unsubscribe => "UNSUBSCRIBE",
            Command::Ack => "ACK",
            Command::Nack => "NACK",
            Command::Begin => "BEGIN",
            Command::Commit => "COMMIT",
            Command::Abort => "ABORT",
            Command::Disconnect => "DISCONNECT",
            Command::Connected => "CONNECTED",
            Command::Message => "MESSAGE",
            Command::Receipt => "RECEIPT",
            Command::Error => "ERROR",
        }
    }

    /// The command spelled exactly so (commands are case-sensitive).
    pub fn parse(raw: &[u8]) -> Option<Command> {
        Some(match raw {
            b"CONNECT" => Command::Connect,
            b"STOMP" => Command::Stomp,
            b"SEND" => Command::Send,
            b"SUBSCRIBE" => Command::Subscribe,
            b"UNSUBSCRIBE" => Command::Unsubscribe,
            b"ACK" => Command::Ack,
            b"NACK" => Command::Nack,
            b"BEGIN" => Command::Begin,
            b"COMMIT" => Command::Commit,
            b"ABORT" => Command::Abort,
            b"DISCONNECT" => Command::Disconnect,
            b"CONNECTED" => Command::Connected,
            b"MESSAGE" => Command::Message,
            b"RECEIPT" => Command::Receipt,
            b"ERROR" => Command::Error,
            _ => return None,
        })
    }

    /// Whether a client sends it (else a server does).
    pub fn is_client(self) -> bool {
        (self as u8) <= (Command::Disconnect as u8)
    }

    /// STOMP 1.2 "Body": only SEND, MESSAGE and ERROR frames may have a body.
    pub fn may_have_body(self) -> bool {
        matches!(self, Command::Send | Command::Message | Command::Error)
    }

    /// CONNECT, STOMP and CONNECTED are never escaped, so that a 1.0 peer can read them.
    pub fn is_unescaped(self) -> bool {
        matches!(self, Command::Connect | Command::Stomp | Command::Connected)
    }

    /// CONNECT or its 1.1+ synonym STOMP.
    pub fn is_connect(self) -> bool {
        matches!(self, Command::Connect | Command::Stomp)
    }
}

/// A STOMP version this codec implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    V10,
    V11,
    V12,
}

impl Version {
    /// Every version, lowest first.
    pub const ALL: [Version; 3] = [Version::V10, Version::V11, Version::V12];

    pub fn as_str(self) -> &'static str {
        match self {
            Version::V10 => "1.0",
            Version::V11 => "1.1",
            Version::V12 => "1.2",
        }
    }

    /// `"1.0"`, `"1.1"` or `"1.2"` exactly.
    pub fn parse(text: &str) -> Option<Version> {
        match text {
            "1.0" => Some(Version::V10),
            "1.1" => Some(Version::V11),
            "1.2" => Some(Version::V12),
            _ => None,
        }
    }
}

/// Our end of the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Client,
    Server,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Server => "server",
        }
    }

    /// The other end.
    pub fn peer(self) -> Role {
        match self {
            Role::Client => Role::Server,
            Role::Server => Role::Client,
        }
    }

    /// Whether this end may send `command`.
    pub fn sends(self, command: Command) -> bool {
        command.is_client() == (self == Role::Client)
    }
}

/// The state of one direction of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// The CONNECT/CONNECTED exchange has not happened in this direction yet.
    Connecting,
    /// It has; ordinary frames may flow.
    Connected,
    /// DISCONNECT (client to server) or ERROR (server to client) went this way, or the peer
    /// closed the transport; nothing but heart-beat EOLs may follow in this direction.
    Closed,
    /// A protocol error happened in this direction; it is unusable.
    Error,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Connecting => "CONNECTING",
            State::Connected => "CONNECTED",
            State::Closed => "CLOSED",
            State::Error => "ERROR",
        }
    }
}

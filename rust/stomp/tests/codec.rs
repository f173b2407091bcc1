//! The codec against golden bytes and the Python codec's messages.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use stomp::{
    encode_frame, Command, Connection, ErrorKind, Event, Frame, FrameLimits, Outgoing, Role, Rules,
    State, Stop, Version,
};

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect()
}

fn server() -> Connection {
    Connection::new(Role::Server, FrameLimits::default())
}

/// A server past CONNECT, version 1.2.
fn connected_server() -> Connection {
    let mut conn = server();
    conn.receive_data(b"CONNECT\naccept-version:1.0,1.1,1.2\nhost:x\n\n\0")
        .unwrap();
    assert!(matches!(conn.next_event().unwrap(), Event::Frame(_)));
    assert_eq!(conn.next_event().unwrap(), Event::Paused);
    conn.accept_connect("1.2").unwrap();
    let mut out = Vec::new();
    conn.send(
        &mut out,
        &Outgoing::new(Command::Connected, &[("version", "1.2")], b""),
    )
    .unwrap();
    assert_eq!(out, b"CONNECTED\nversion:1.2\n\n\0");
    conn
}

fn events(conn: &mut Connection) -> Result<Vec<Event>, stomp::Error> {
    let mut out = Vec::new();
    conn.next_events(&mut out)?;
    Ok(out)
}

const SEND: &[u8] = b"SEND\ndestination:/queue/a\ncontent-type:text/plain\ncontent-length:5\n\
receipt:r-1\npersistent:true\nx\\cy:a\\nb\n\nhello\0\n";

#[test]
fn decodes_a_send_with_escapes_and_content_length() {
    let mut conn = connected_server();
    conn.receive_data(SEND).unwrap();
    let got = events(&mut conn).unwrap();
    let expected = Frame::new(
        Command::Send,
        pairs(&[
            ("destination", "/queue/a"),
            ("content-type", "text/plain"),
            ("content-length", "5"),
            ("receipt", "r-1"),
            ("persistent", "true"),
            ("x:y", "a\nb"),
        ]),
        b"hello".to_vec(),
    );
    assert_eq!(got, vec![Event::Frame(expected), Event::Heartbeat]);
}

#[test]
fn every_cut_gives_the_same_events() {
    let mut whole = connected_server();
    let input = [SEND, b"ACK\nid:1\n\n\0\r\nSEND\ndestination:q\n\nbody\0"].concat();
    whole.receive_data(&input).unwrap();
    let expected = events(&mut whole).unwrap();
    assert_eq!(expected.len(), 5);
    for cut in 0..=input.len() {
        let mut conn = connected_server();
        let mut got = Vec::new();
        for piece in [&input[..cut], &input[cut..]] {
            if piece.is_empty() {
                continue;
            }
            conn.receive_data(piece).unwrap();
            got.extend(events(&mut conn).unwrap());
        }
        assert_eq!(got, expected, "cut at {cut}");
    }
    let mut conn = connected_server();
    let mut got = Vec::new();
    for byte in &input {
        conn.receive_data(std::slice::from_ref(byte)).unwrap();
        got.extend(events(&mut conn).unwrap());
    }
    assert_eq!(got, expected);
}

#[test]
fn errors_say_what_the_python_codec_said() {
    let cases: &[(&[u8], &str)] = &[
        (b"HELLO\n\n\0", "unknown command 'HELLO'"),
        (
            b"MESSAGE\n\n\0",
            "MESSAGE frames may not be sent to this side",
        ),
        (b"\rX", "CR not followed by LF between frames"),
        (
            b"SEND\nno colon\n\n\0",
            "header line without ':' ('no colon')",
        ),
        (b"SEND\n:v\n\n\0", "header line with an empty name (':v')"),
        (
            b"SEND\na:\\t\n\n\0",
            "undefined escape sequence '\\\\t' in a header (STOMP 1.2)",
        ),
        (
            b"SEND\na:b\\\n\n\0",
            "undefined escape sequence 'a trailing \\\\' in a header (STOMP 1.2)",
        ),
        (
            b"SEND\na:\xff\n\n\0",
            "frame headers are not valid UTF-8 (byte 2 of the header block)",
        ),
        (b"SEND\nab\0c:d\n\n\0", "NUL in a header ('ab' before it)"),
        (
            b"SEND\ncontent-length:x1\n\n\0",
            "content-length must be a non-negative integer, got 'x1'",
        ),
        (
            b"SEND\ncontent-length:00999999999999999999999999\n\n",
            "content-length 999999999999999999999999 exceeds the maximum frame body size of \
             104857600 bytes",
        ),
        (
            b"SEND\ncontent-length:1\n\nab\0",
            "frame body not followed by NUL after content-length 1 bytes",
        ),
        (
            b"CONNECT\n\n\0",
            "CONNECT received on an established connection",
        ),
    ];
    for (input, message) in cases {
        let mut conn = connected_server();
        conn.receive_data(input).unwrap();
        let error = events(&mut conn).unwrap_err();
        assert_eq!(error.kind, ErrorKind::Remote);
        assert_eq!(&error.message, message);
        assert_eq!(conn.their_state(), State::Error);
        let again = conn.next_event().unwrap_err();
        assert_eq!(
            again.message,
            format!("connection already failed: {message}")
        );
    }
}

#[test]
fn limits_hold_while_bytes_arrive() {
    let limits = FrameLimits {
        max_command_length: 8,
        max_header_line_length: 20,
        max_header_count: 2,
        max_header_bytes: 30,
        max_body_size: 4,
    };
    let cases: &[(&[u8], &str)] = &[
        (
            b"ABCDEFGHIJ",
            "command line longer than 8 bytes ('ABCDEFGHIJ')",
        ),
        (
            b"SEND\nabcdefghijklmnopqrstuvw",
            "header line longer than 20 bytes ('abcdefghijklmnopqrst')",
        ),
        (b"SEND\na:1\nb:2\nc:3\n", "more than 2 headers in a frame"),
        (
            b"SEND\na:12345678901234\nb:12345678901234\n",
            "frame headers larger than 30 bytes",
        ),
        (b"SEND\n\n12345", "frame body larger than 4 bytes"),
    ];
    for (input, message) in cases {
        let mut conn = Connection::new(Role::Server, limits);
        conn.receive_data(b"CONNECT\naccept-version:1.2\n\n\0")
            .unwrap();
        conn.next_event().unwrap();
        conn.accept_connect("1.2").unwrap();
        conn.receive_data(input).unwrap();
        assert_eq!(&events(&mut conn).unwrap_err().message, message);
    }
}

#[test]
fn stomp_10_trims_and_connect_is_raw() {
    let mut conn = server();
    conn.receive_data(b"CONNECT\nlogin:  me\n\n\0SEND\ndestination: \t/q\\n\n\n\0")
        .unwrap();
    let Event::Frame(connect) = conn.next_event().unwrap() else {
        panic!()
    };
    assert_eq!(connect.headers, pairs(&[("login", "me")]));
    assert_eq!(conn.next_event().unwrap(), Event::Paused);
    conn.accept_connect("1.0").unwrap();
    let Event::Frame(send) = conn.next_event().unwrap() else {
        panic!()
    };
    assert_eq!(send.headers, pairs(&[("destination", "/q\\n")]));
    assert_eq!(conn.version(), Some(Version::V10));
    let mut out = Vec::new();
    conn.send(
        &mut out,
        &Outgoing::new(Command::Connected, &[("version", "1.0")], b""),
    )
    .unwrap();
    assert_eq!(
        conn.send_heartbeat().unwrap_err().message,
        "STOMP 1.0 has no heart-beats (1.1+ only)"
    );
}

#[test]
fn encodes_golden_bytes() {
    let mut out = Vec::new();
    let headers = [("destination", "/q"), ("a:b", "x\ny\r\\")];
    encode_frame(
        &mut out,
        &Outgoing::new(Command::Message, &headers, b"hi"),
        Rules::V12,
    )
    .unwrap();
    assert_eq!(out, b"MESSAGE\ndestination:/q\na\\cb:x\\ny\\r\\\\\n\nhi\0");
    out.clear();
    let error = encode_frame(
        &mut out,
        &Outgoing::new(Command::Message, &[("a:b", "x\r")], b""),
        Rules::V11,
    )
    .unwrap_err();
    assert_eq!(
        error.message,
        "header 'a:b': STOMP 1.1 cannot carry a value ending in CR"
    );
    assert!(out.is_empty());
    let error = encode_frame(
        &mut out,
        &Outgoing::new(Command::Message, &headers, b""),
        Rules::V10,
    )
    .unwrap_err();
    assert!(error
        .message
        .starts_with("header name 'a:b' must be non-empty without ':' or LF"));
    let streamed = Outgoing {
        body_length: Some(1024),
        ..Outgoing::new(Command::Message, &[("content-length", "1024")], b"")
    };
    encode_frame(&mut out, &streamed, Rules::V12).unwrap();
    assert_eq!(out, b"MESSAGE\ncontent-length:1024\n\n");
    out.clear();
    let error = encode_frame(
        &mut out,
        &Outgoing::new(Command::Send, &[("content-length", "3")], b"ab"),
        Rules::V12,
    )
    .unwrap_err();
    assert_eq!(
        error.message,
        "content-length '3' does not match the 2-byte body"
    );
    let error = encode_frame(
        &mut out,
        &Outgoing::new(Command::Send, &[] as &[(&str, &str)], b"a\0"),
        Rules::V12,
    )
    .unwrap_err();
    assert_eq!(
        error.message,
        "a body containing NUL needs a content-length header"
    );
}

#[test]
fn client_side_negotiates_from_connected() {
    let mut conn = Connection::new(Role::Client, FrameLimits::default());
    let mut out = Vec::new();
    let error = conn.send(
        &mut out,
        &Outgoing::new(Command::Send, &[("destination", "q")], b""),
    );
    assert_eq!(
        error.unwrap_err().message,
        "the first frame must be CONNECT or STOMP, not SEND"
    );
    assert_eq!(conn.our_state(), State::Error);

    let mut conn = Connection::new(Role::Client, FrameLimits::default());
    conn.send(
        &mut out,
        &Outgoing::new(Command::Connect, &[("accept-version", "1.1,1.2")], b""),
    )
    .unwrap();
    conn.receive_data(b"CONNECTED\nversion: 1.0\n\n\0").unwrap();
    assert_eq!(
        conn.next_event().unwrap_err().message,
        "server chose STOMP 1.0, which our CONNECT did not offer (1.1,1.2)"
    );

    let mut conn = Connection::new(Role::Client, FrameLimits::default());
    conn.send(
        &mut out,
        &Outgoing::new(Command::Connect, &[("accept-version", "1.1,1.2")], b""),
    )
    .unwrap();
    conn.receive_data(b"CONNECTED\nversion:1.1\n\n\0MESSAGE\na:\\r\n\n\0")
        .unwrap();
    let mut got = Vec::new();
    let error = conn.next_events(&mut got).unwrap_err();
    assert_eq!(got.len(), 1);
    assert_eq!(conn.version(), Some(Version::V11));
    assert_eq!(
        error.message,
        "undefined escape sequence '\\\\r' in a header (STOMP 1.1)"
    );
}

#[test]
fn end_of_stream() {
    let mut conn = connected_server();
    conn.receive_data(b"SEND\n").unwrap();
    conn.receive_data(b"").unwrap();
    assert_eq!(
        conn.next_event().unwrap_err().message,
        "connection closed in the middle of a frame (5 bytes unread)"
    );
    let mut conn = connected_server();
    conn.receive_data(b"DISCONNECT\n\n\0").unwrap();
    conn.receive_data(b"").unwrap();
    let mut got = Vec::new();
    assert_eq!(conn.next_events(&mut got).unwrap(), Stop::Closed);
    assert_eq!(got.last(), Some(&Event::ConnectionClosed));
    assert_eq!(conn.their_state(), State::Closed);
    assert_eq!(
        conn.receive_data(b"x").unwrap_err().message,
        "receive_data() after the end of the stream (b'')"
    );
}

#[test]
fn negotiates_the_highest_common_version() {
    assert_eq!(stomp::negotiate_version(None), Some(Version::V10));
    assert_eq!(
        stomp::negotiate_version(Some("1.1, 1.0")),
        Some(Version::V11)
    );
    assert_eq!(
        stomp::negotiate_version(Some(" 1.2,2.0")),
        Some(Version::V12)
    );
    assert_eq!(stomp::negotiate_version(Some("2.0,")), None);
}

#[test]
fn a_decoder_of_every_command() {
    let mut decoder = stomp::Decoder::any(FrameLimits::default());
    decoder.feed(b"MESSAGE\n\n\0SEND\n\n\0\n");
    for command in [Command::Message, Command::Send] {
        let item = decoder.next_item(Some(Version::V12)).unwrap();
        assert_eq!(
            item,
            Some(stomp::Item::Frame(Frame::new(
                command,
                Vec::new(),
                Vec::new()
            )))
        );
    }
    assert_eq!(
        decoder.next_item(None).unwrap(),
        Some(stomp::Item::Heartbeat)
    );
    assert_eq!(decoder.next_item(None).unwrap(), None);
    assert_eq!(decoder.buffered(), 0);
}

/// A frame trickling in one byte at a time is searched once, not from its start at every
/// byte: 2 MiB of body and headers byte by byte stay linear (quadratic would take minutes).
#[test]
fn trickled_input_is_linear() {
    let mut conn = connected_server();
    let header = format!("SEND\nlong:{}\n\n", "h".repeat(60_000));
    let body = vec![b'b'; 2 << 20];
    let start = std::time::Instant::now();
    for byte in header.as_bytes().iter().chain(&body) {
        conn.receive_data(std::slice::from_ref(byte)).unwrap();
        assert_eq!(conn.next_event().unwrap(), Event::NeedData);
    }
    conn.receive_data(b"\0").unwrap();
    let Event::Frame(frame) = conn.next_event().unwrap() else {
        panic!("no frame")
    };
    assert_eq!(frame.body.len(), body.len());
    assert!(start.elapsed().as_secs() < 20, "took {:?}", start.elapsed());
}

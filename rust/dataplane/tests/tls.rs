//! TLS listeners (rustls), with rustls as the client: the handshake, frames both ways and
//! `close_notify`, client certificates (needed, wanted, refused), what a wrong client does
//! (plain text, silence, an unknown certificate: one `CloseCause::Tls`, the end of the
//! stream, no reset, the plane serving on), settings rustls cannot serve refused at
//! `listen`, a reload for new connections, and a WebSocket upgrade over TLS relayed to
//! Python through a socket pair.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{accept, connect_bytes, frame, two_threads, Events, PATIENCE};
use dataplane::{
    ClientAuth, CloseCause, Command, Config, DataPlane, Error, Event, ListenerSpec, TlsSpec,
};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use stomp::{Decoder, FrameLimits, Item, Role};

/// A CA and what it signed.
struct Pki {
    ca: rcgen::Certificate,
    ca_key: KeyPair,
}

/// A certificate and its PKCS8 key, DER.
struct Issued {
    chain: Vec<Vec<u8>>,
    key: Vec<u8>,
}

impl Pki {
    fn new(name: &str) -> Self {
        let ca_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let ca = params.self_signed(&ca_key).unwrap();
        Self { ca, ca_key }
    }

    fn issue(&self, name: &str, purpose: ExtendedKeyUsagePurpose) -> Issued {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec![name.to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![purpose];
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        Issued {
            chain: vec![cert.der().to_vec(), self.ca.der().to_vec()],
            key: key.serialize_der(),
        }
    }

    fn anchor(&self) -> Vec<u8> {
        self.ca.der().to_vec()
    }
}

fn server_spec(pki: &Pki) -> TlsSpec {
    let server = pki.issue("localhost", ExtendedKeyUsagePurpose::ServerAuth);
    TlsSpec {
        cert_chain: server.chain,
        key: server.key,
        ..TlsSpec::default()
    }
}

fn tls_plane(
    spec: TlsSpec,
    more: impl FnOnce(&mut ListenerSpec),
) -> (DataPlane, SocketAddr, Events) {
    common::plane(two_threads(), |listener| {
        listener.tls = Some(spec);
        more(listener);
    })
}

/// A blocking rustls client trusting `pki`'s CA, with `cert` if given.
fn client_config(pki: &Pki, cert: Option<&Issued>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from(pki.anchor())).unwrap();
    let builder = ClientConfig::builder().with_root_certificates(roots);
    let config = match cert {
        None => builder.with_no_client_auth(),
        Some(cert) => builder
            .with_client_auth_cert(
                cert.chain
                    .iter()
                    .map(|c| CertificateDer::from(c.clone()))
                    .collect(),
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key.clone())),
            )
            .unwrap(),
    };
    Arc::new(config)
}

type Tls = StreamOwned<ClientConnection, TcpStream>;

fn tls_connect(addr: SocketAddr, config: Arc<ClientConfig>) -> Tls {
    let sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(PATIENCE)).unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    StreamOwned::new(ClientConnection::new(config, name).unwrap(), sock)
}

/// The next frame the server sent, or None at a clean end (`close_notify`).
fn read_frame(tls: &mut Tls, decoder: &mut Decoder) -> Option<stomp::Frame> {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(Item::Frame(frame)) = decoder.next_item(Some(stomp::Version::V12)).unwrap() {
            return Some(frame);
        }
        let n = tls.read(&mut buf).unwrap(); // UnexpectedEof: no close_notify came
        if n == 0 {
            return None;
        }
        decoder.feed(&buf[..n]);
    }
}

/// A client that connects over TLS and sends its CONNECT: the plane's connection (its
/// CONNECT arrived) and the client's stream.
fn connect_over_tls(
    plane: &DataPlane,
    addr: SocketAddr,
    events: &mut Events,
    config: Arc<ClientConfig>,
) -> (dataplane::Conn, Tls) {
    let mut tls = tls_connect(addr, config);
    tls.write_all(&connect_bytes("1.2")).unwrap();
    let conn = events.opened(plane);
    assert_eq!(events.frame(plane, &conn).command, stomp::Command::Connect);
    (conn, tls)
}

/// A client whose handshake the plane refuses: why, as the plane reports it. (Under TLS
/// 1.3 the refusal comes after the client's Finished, so the client writes and reads.)
fn refused_over_tls(
    plane: &DataPlane,
    addr: SocketAddr,
    events: &mut Events,
    config: Arc<ClientConfig>,
) -> String {
    let mut tls = tls_connect(addr, config);
    let _ = tls.write_all(&connect_bytes("1.2"));
    let _ = tls.read(&mut [0u8; 64]);
    drop(tls);
    events.opened(plane);
    closed_tls(events, plane)
}

fn closed_tls(events: &mut Events, plane: &DataPlane) -> String {
    match events.next(plane, "Closed", |e| matches!(e, Event::Closed { .. })) {
        Event::Closed {
            cause: CloseCause::Tls(reason),
            ..
        } => reason,
        other => panic!("expected a TLS failure, got {other:?}"),
    }
}

/// Reads the raw socket to its end: the end of stream (after an alert at most), no reset.
fn ends_without_reset(mut sock: TcpStream) {
    let mut buf = [0u8; 4096];
    loop {
        match sock.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) => panic!("expected the end of the stream, got {e}"),
        }
    }
}

#[test]
fn frames_go_both_ways_over_tls_and_a_close_sends_close_notify() {
    let pki = Pki::new("ca");
    let (plane, addr, mut events) = tls_plane(server_spec(&pki), |_| {});
    let (conn, mut tls) = connect_over_tls(&plane, addr, &mut events, client_config(&pki, None));
    accept(&plane, &conn);
    let mut decoder = Decoder::new(FrameLimits::default(), Role::Server);
    let connected = read_frame(&mut tls, &mut decoder).unwrap();
    assert_eq!(connected.command, stomp::Command::Connected);
    assert_eq!(
        tls.conn.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_3)
    );
    // A body larger than a TLS record, both ways.
    let body = vec![b'x'; 100_000];
    let mut send = b"SEND\ndestination:/q\ncontent-length:100000\n\n".to_vec();
    send.extend_from_slice(&body);
    send.push(0);
    tls.write_all(&send).unwrap();
    assert_eq!(events.frame(&plane, &conn).body, body);
    plane.submit([Command::Send {
        conn: conn.clone(),
        frame: frame(stomp::Command::Message, &[("destination", "/q")], &body),
    }]);
    assert_eq!(read_frame(&mut tls, &mut decoder).unwrap().body, body);
    plane.submit([Command::Close {
        conn: conn.clone(),
        flush: true,
    }]);
    // Ok(0), not UnexpectedEof: the close came with close_notify.
    assert!(read_frame(&mut tls, &mut decoder).is_none());
    drop(tls);
    assert_eq!(events.closed(&plane, &conn), CloseCause::Requested);
}

#[test]
fn plain_text_on_a_tls_port_is_closed_with_a_reason_and_the_plane_serves_on() {
    let pki = Pki::new("ca");
    let (plane, addr, mut events) = tls_plane(server_spec(&pki), |_| {});
    let mut plain = TcpStream::connect(addr).unwrap();
    plain.set_read_timeout(Some(PATIENCE)).unwrap();
    plain.write_all(&connect_bytes("1.2")).unwrap();
    events.opened(&plane);
    plain.shutdown(std::net::Shutdown::Write).unwrap();
    ends_without_reset(plain); // an alert at most, then the end
    let reason = closed_tls(&mut events, &plane);
    assert!(
        reason.starts_with("not a TLS handshake (the client sent plain text"),
        "{reason}"
    );
    // Everyone else is served.
    let (_conn, _tls) = connect_over_tls(&plane, addr, &mut events, client_config(&pki, None));
}

#[test]
fn a_failed_handshake_is_reported_at_once_though_the_client_keeps_its_socket() {
    let pki = Pki::new("ca");
    let config = Config {
        close_linger: Duration::from_secs(5),
        ..two_threads()
    };
    let (plane, addr, mut events) = common::plane(config, |listener| {
        listener.tls = Some(server_spec(&pki));
        listener.connections_allowed = 1;
    });
    // A client that does not trust the server's certificate: it refuses the handshake with
    // an alert, and keeps its socket open (the plane's close lingers for it).
    let started = Instant::now();
    let mut stranger = tls_connect(addr, client_config(&Pki::new("another ca"), None));
    assert!(stranger.write_all(&connect_bytes("1.2")).is_err());
    let conn = events.opened(&plane);
    let reason = closed_tls(&mut events, &plane);
    let took = started.elapsed();
    // The close linger (5 s) is not waited for, as the socket shell logs it at once.
    assert!(took < Duration::from_secs(2), "reported after {took:?}");
    assert!(
        reason.starts_with("the client refused the handshake"),
        "{reason}"
    );
    // The lingering close ends in silence when the client leaves (Closed came once), and
    // frees the connection's place in connectionsAllowed (1).
    drop(stranger);
    let id = conn.id();
    events.none_within(
        &plane,
        Duration::from_millis(500),
        |e| matches!(e, Event::Closed { conn, .. } if *conn == id),
    );
    let (_conn, _tls) = connect_over_tls(&plane, addr, &mut events, client_config(&pki, None));
    assert!(
        !events
            .queue
            .iter()
            .any(|e| matches!(e, Event::Refused { .. })),
        "{:?}",
        events.queue
    );
}

#[test]
fn a_client_certificate_is_needed_and_checked_against_the_trust_anchors() {
    let pki = Pki::new("ca");
    let other = Pki::new("another ca");
    let spec = TlsSpec {
        client_auth: ClientAuth::Need,
        trust_anchors: vec![pki.anchor()],
        ..server_spec(&pki)
    };
    let (plane, addr, mut events) = tls_plane(spec, |_| {});
    // Without a certificate: refused, in the socket shell's words.
    let reason = refused_over_tls(&plane, addr, &mut events, client_config(&pki, None));
    assert_eq!(
        reason,
        "the client sent no certificate (needClientAuth=true)"
    );
    // A certificate another CA signed.
    let stranger = other.issue("client", ExtendedKeyUsagePurpose::ClientAuth);
    let reason = refused_over_tls(
        &plane,
        addr,
        &mut events,
        client_config(&pki, Some(&stranger)),
    );
    assert!(
        reason.starts_with("client certificate refused: "),
        "{reason}"
    );
    // A trusted one.
    let client = pki.issue("client", ExtendedKeyUsagePurpose::ClientAuth);
    let (_conn, _tls) = connect_over_tls(
        &plane,
        addr,
        &mut events,
        client_config(&pki, Some(&client)),
    );
}

#[test]
fn a_wanted_client_certificate_is_optional() {
    let pki = Pki::new("ca");
    let spec = TlsSpec {
        client_auth: ClientAuth::Want,
        trust_anchors: vec![pki.anchor()],
        ..server_spec(&pki)
    };
    let (plane, addr, mut events) = tls_plane(spec, |_| {});
    let (_conn, _tls) = connect_over_tls(&plane, addr, &mut events, client_config(&pki, None));
}

#[test]
fn a_client_that_sends_nothing_is_closed_at_the_handshake_timeout() {
    let pki = Pki::new("ca");
    let (plane, addr, mut events) = tls_plane(server_spec(&pki), |spec| {
        spec.handshake_timeout = Some(Duration::from_millis(200));
        spec.handshake_error = Some("no CONNECT".into());
    });
    let silent = TcpStream::connect(addr).unwrap();
    silent.set_read_timeout(Some(PATIENCE)).unwrap();
    events.opened(&plane);
    ends_without_reset(silent); // no STOMP ERROR frame in plain text either
    let reason = closed_tls(&mut events, &plane);
    assert_eq!(
        reason,
        "no TLS handshake within the acceptor's handshake-timeout"
    );
    // After the handshake, the CONNECT has the timeout again: the STOMP ERROR, encrypted.
    let mut tls = tls_connect(addr, client_config(&pki, None));
    tls.write_all(b"\n").unwrap(); // a heart-beat: the handshake is done, no CONNECT yet
    let conn = events.opened(&plane);
    let mut decoder = Decoder::new(FrameLimits::default(), Role::Server);
    let error = read_frame(&mut tls, &mut decoder).unwrap();
    assert_eq!(error.command, stomp::Command::Error);
    assert!(
        read_frame(&mut tls, &mut decoder).is_none(),
        "close_notify after the ERROR"
    );
    drop(tls);
    assert_eq!(events.closed(&plane, &conn), CloseCause::HandshakeTimeout);
}

#[test]
fn settings_rustls_cannot_serve_are_refused_when_listening() {
    let pki = Pki::new("ca");
    let plane = DataPlane::start(two_threads()).unwrap();
    let listen = |spec: TlsSpec| {
        let mut listener = ListenerSpec::new("127.0.0.1:0".parse().unwrap());
        listener.tls = Some(spec);
        plane.listen(listener)
    };
    let old = TlsSpec {
        protocols: vec!["TLSv1.1".into(), "TLSv1.2".into()],
        ..server_spec(&pki)
    };
    match listen(old) {
        Err(Error::Tls(text)) => assert!(text.contains("TLSv1.1"), "{text}"),
        other => panic!("{other:?}"),
    }
    let cbc = TlsSpec {
        cipher_suites: vec![
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256".into(),
            "TLS_RSA_WITH_AES_128_CBC_SHA".into(),
        ],
        ..server_spec(&pki)
    };
    match listen(cbc) {
        Err(Error::Tls(text)) => {
            assert!(text.contains("TLS_RSA_WITH_AES_128_CBC_SHA"), "{text}");
            assert!(!text.contains("GCM_SHA256 not"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    // TLS 1.2 suites only: TLS 1.2 only, as in Java.
    let tls12 = TlsSpec {
        cipher_suites: vec!["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256".into()],
        ..server_spec(&pki)
    };
    let mut listener = ListenerSpec::new("127.0.0.1:0".parse().unwrap());
    listener.tls = Some(tls12);
    let addr = plane.listen(listener).unwrap().local_addr;
    let mut tls = tls_connect(addr, client_config(&pki, None));
    tls.write_all(&connect_bytes("1.2")).unwrap();
    assert_eq!(
        tls.conn.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
}

/// The serial-free identity of the certificate a new connection is shown: its DER.
fn served_certificate(addr: SocketAddr, config: Arc<ClientConfig>) -> Vec<u8> {
    let mut tls = tls_connect(addr, config);
    tls.write_all(b"\n").unwrap(); // completes the handshake
    tls.conn.peer_certificates().unwrap()[0].to_vec()
}

#[test]
fn set_tls_serves_new_connections_with_the_new_certificate_and_open_ones_go_on() {
    let pki = Pki::new("ca");
    let first = server_spec(&pki);
    let first_cert = first.cert_chain[0].clone();
    let (plane, addr, mut events) = tls_plane(first, |_| {});
    let config = client_config(&pki, None);
    let mut open = tls_connect(addr, Arc::clone(&config));
    open.write_all(&connect_bytes("1.2")).unwrap();
    let conn = events.opened(&plane);
    events.frame(&plane, &conn);
    assert_eq!(served_certificate(addr, Arc::clone(&config)), first_cert);
    let renewed = server_spec(&pki);
    let renewed_cert = renewed.cert_chain[0].clone();
    let listener = dataplane::ListenerId(0);
    plane.set_tls(listener, &renewed).unwrap();
    assert_eq!(served_certificate(addr, Arc::clone(&config)), renewed_cert);
    let bad = TlsSpec {
        protocols: vec!["TLSv1".into()],
        ..server_spec(&pki)
    };
    assert!(matches!(plane.set_tls(listener, &bad), Err(Error::Tls(_))));
    assert_eq!(
        served_certificate(addr, config),
        renewed_cert,
        "a bad reload keeps the last"
    );
    accept(&plane, &conn);
    let mut decoder = Decoder::new(FrameLimits::default(), Role::Server);
    assert_eq!(
        read_frame(&mut open, &mut decoder).unwrap().command,
        stomp::Command::Connected
    );
}

fn relayed(events: &mut Events, plane: &DataPlane) -> Event {
    events.next(plane, "Relayed", |e| matches!(e, Event::Relayed { .. }))
}

#[test]
fn a_websocket_upgrade_over_tls_is_relayed_to_python_through_a_socket_pair() {
    let pki = Pki::new("ca");
    let (plane, addr, mut events) = tls_plane(server_spec(&pki), |spec| {
        spec.handoff_prefixes = vec![b"GET ".to_vec()];
        spec.connections_allowed = 1;
    });
    let mut tls = tls_connect(addr, client_config(&pki, None));
    tls.write_all(b"GET /stomp HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let Event::Relayed {
        stream: mut python,
        initial,
        ..
    } = relayed(&mut events, &plane)
    else {
        unreachable!()
    };
    python.set_nonblocking(false).unwrap();
    python.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut request = initial;
    while !request.ends_with(b"\r\n\r\n") {
        let mut buf = [0u8; 256];
        let n = python.read(&mut buf).unwrap();
        assert_ne!(n, 0, "{request:?}");
        request.extend_from_slice(&buf[..n]);
    }
    assert!(request.starts_with(b"GET /stomp HTTP/1.1\r\n"));
    // Both ways, more than the relay's buffers hold at once.
    let big = vec![b'y'; 600_000];
    let writer = {
        let mut python = python.try_clone().unwrap();
        let big = big.clone();
        std::thread::spawn(move || python.write_all(&big).unwrap())
    };
    let mut got = vec![0u8; big.len()];
    tls.read_exact(&mut got).unwrap();
    assert_eq!(got, big);
    writer.join().unwrap();
    tls.write_all(&big).unwrap();
    let mut got = vec![0u8; big.len()];
    python.read_exact(&mut got).unwrap();
    assert_eq!(got, big);
    // Still counted in connectionsAllowed: one more is refused.
    let _refused = TcpStream::connect(addr).unwrap();
    events.next(&plane, "Refused", |e| matches!(e, Event::Refused { .. }));
    // Python closes its end: the client reads a clean end (close_notify).
    drop(python);
    let mut rest = Vec::new();
    tls.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    drop(tls);
    let closed = events.next(&plane, "Closed", |e| matches!(e, Event::Closed { .. }));
    assert!(
        matches!(
            closed,
            Event::Closed {
                cause: CloseCause::Requested,
                ..
            }
        ),
        "{closed:?}"
    );
}

#[test]
fn a_relayed_clients_end_of_stream_reaches_python() {
    let pki = Pki::new("ca");
    let (plane, addr, mut events) = tls_plane(server_spec(&pki), |spec| {
        spec.handoff_prefixes = vec![b"GET ".to_vec()];
    });
    let mut tls = tls_connect(addr, client_config(&pki, None));
    tls.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    tls.conn.send_close_notify();
    tls.flush().unwrap();
    let Event::Relayed {
        stream: mut python, ..
    } = relayed(&mut events, &plane)
    else {
        unreachable!()
    };
    python.set_nonblocking(false).unwrap();
    python.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut rest = Vec::new();
    match python.read_to_end(&mut rest) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::WouldBlock => panic!("no end of stream"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_panic_on_a_tls_connection_closes_it_alone_and_tls_connections_count_as_allowed() {
    let pki = Pki::new("ca");
    let (plane, addr, mut events) = tls_plane(server_spec(&pki), |spec| {
        spec.connections_allowed = 2;
    });
    let config = client_config(&pki, None);
    let mut first = tls_connect(addr, Arc::clone(&config));
    first.write_all(&connect_bytes("1.2")).unwrap();
    let doomed = events.opened(&plane);
    events.frame(&plane, &doomed);
    let mut second = tls_connect(addr, Arc::clone(&config));
    second.write_all(&connect_bytes("1.2")).unwrap();
    let alive = events.opened(&plane);
    events.frame(&plane, &alive);
    // A third is over connectionsAllowed: accepted and closed at once.
    let _third = TcpStream::connect(addr).unwrap();
    events.next(&plane, "Refused", |e| matches!(e, Event::Refused { .. }));
    plane.submit([Command::InjectPanic {
        conn: doomed.clone(),
    }]);
    assert!(matches!(
        events.closed(&plane, &doomed),
        CloseCause::Panic(_)
    ));
    accept(&plane, &alive);
    let mut decoder = Decoder::new(FrameLimits::default(), Role::Server);
    let connected = read_frame(&mut second, &mut decoder).unwrap();
    assert_eq!(connected.command, stomp::Command::Connected);
    drop(first);
}

#[test]
fn bytes_sent_before_the_handshake_ends_are_written_once_it_does() {
    let pki = Pki::new("ca");
    let (plane, addr, mut events) = tls_plane(server_spec(&pki), |_| {});
    let sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(PATIENCE)).unwrap();
    let conn = events.opened(&plane);
    // More than rustls holds before the handshake (64 KiB): the rest waits in the plane.
    let early = vec![b'z'; 200_000];
    plane.submit([Command::SendBytes {
        conn: conn.clone(),
        bytes: early.clone(),
    }]);
    std::thread::sleep(Duration::from_millis(100)); // the I/O thread takes it meanwhile
    let name = ServerName::try_from("localhost").unwrap();
    let client = ClientConnection::new(client_config(&pki, None), name).unwrap();
    let mut tls = StreamOwned::new(client, sock);
    let mut got = vec![0u8; early.len()];
    tls.read_exact(&mut got).unwrap();
    assert_eq!(got, early);
}

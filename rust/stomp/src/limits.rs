//! Size limits the decoder enforces on incoming frames (STOMP 1.2 "Size Limits").
//!
//! The spec lets a server cap the number of headers, the length of a header line and the
//! size of a body, and says to answer an over-size frame with an ERROR frame and close.
//! Artemis itself has no such knobs; the defaults follow `ActiveMQ` Classic's
//! `StompWireFormat` (command 1024, 1000 headers, body 100 MiB) except for the header line,
//! raised from Classic's 10 KiB to 64 KiB because `passcode` may carry an OAuth/JWT bearer
//! token and those routinely pass 10 KiB. `max_header_bytes` bounds what 1000 such lines
//! could otherwise add up to (64 MiB). `max_body_size` is 100 MiB because the decoder holds
//! a frame's whole body in memory before handing it over. All lengths are in bytes and
//! exclude line terminators. Python's `FrameLimits` (`protocol/stomp/limits.py`) has the same
//! fields and defaults.

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// Limits on one incoming frame; exceeding any is a remote protocol error, raised while the
/// bytes still arrive (a header line as soon as it is too long, without waiting for its EOL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLimits {
    /// Bytes on the command line (the longest real command, UNSUBSCRIBE, has 11).
    pub max_command_length: usize,
    /// Bytes in one `name:value` line, as on the wire (escaped).
    pub max_header_line_length: usize,
    /// Header lines in one frame, repeats included.
    pub max_header_count: usize,
    /// Sum of all header line lengths of one frame.
    pub max_header_bytes: usize,
    /// Bytes in one frame body (with or without `content-length`).
    pub max_body_size: usize,
}

impl Default for FrameLimits {
    fn default() -> Self {
        Self {
            max_command_length: KIB,
            max_header_line_length: 64 * KIB,
            max_header_count: 1000,
            max_header_bytes: MIB,
            max_body_size: 100 * MIB,
        }
    }
}

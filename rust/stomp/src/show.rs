//! Peer data quoted in error messages, the way the Python codec quoted it (`show()`):
//! bytes decoded as UTF-8 with invalid bytes as `\xNN` (Python's `backslashreplace`), cut to
//! 40 characters, then written as Python's `repr` writes a `str`. The messages stay
//! single-line and printable whatever the peer sent, and equal to the ones users already saw.

use std::fmt::Write as _;

use crate::printable::NOT_PRINTABLE;

/// How many characters of peer text a message quotes.
const LIMIT: usize = 40;

/// `show(text)`: a short, single-line, printable rendering of peer text.
pub fn show_str(text: &str) -> String {
    match text.char_indices().nth(LIMIT) {
        Some((cut, _)) => {
            let mut shown = py_repr(&text[..cut]);
            shown.push_str("...");
            shown
        }
        None => py_repr(text),
    }
}

/// `show(data)` for bytes: UTF-8 with invalid bytes as `\xNN`, then as [`show_str`].
pub fn show_bytes(data: &[u8]) -> String {
    show_str(&backslash_replace(data))
}

/// `data.decode("utf-8", "backslashreplace")`.
pub fn backslash_replace(data: &[u8]) -> String {
    let mut text = String::with_capacity(data.len());
    let mut rest = data;
    loop {
        match std::str::from_utf8(rest) {
            Ok(valid) => {
                text.push_str(valid);
                return text;
            }
            Err(error) => {
                let (valid, after) = rest.split_at(error.valid_up_to());
                text.push_str(std::str::from_utf8(valid).unwrap_or_default());
                let bad = error.error_len().unwrap_or(after.len());
                for byte in &after[..bad] {
                    let _ = write!(text, "\\x{byte:02x}");
                }
                rest = &after[bad..];
            }
        }
    }
}

/// Python's `str.isprintable` for one character.
fn is_printable(c: char) -> bool {
    let code = u32::from(c);
    if code < 0x80 {
        return (0x20..0x7f).contains(&code);
    }
    let at = NOT_PRINTABLE.partition_point(|&(_, end)| end < code);
    NOT_PRINTABLE
        .get(at)
        .map_or(true, |&(start, _)| code < start)
}

/// Python's `repr(text)` for a `str`.
pub fn py_repr(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_printable(c) => out.push(c),
            c => {
                let code = u32::from(c);
                if code < 0x100 {
                    let _ = write!(out, "\\x{code:02x}");
                } else if code < 0x1_0000 {
                    let _ = write!(out, "\\u{code:04x}");
                } else {
                    let _ = write!(out, "\\U{code:08x}");
                }
            }
        }
    }
    out.push(quote);
    out
}

/// Python's `str.isspace` for one character (what `str.strip()` removes).
pub fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Python's `str.strip()`.
pub fn py_strip(text: &str) -> &str {
    text.trim_matches(is_py_space)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_like_python() {
        assert_eq!(py_repr("abc"), "'abc'");
        assert_eq!(py_repr("it's"), "\"it's\"");
        assert_eq!(py_repr("'\""), "'\\'\"'");
        assert_eq!(py_repr("a\\b\n\r\t\x00\x7f"), "'a\\\\b\\n\\r\\t\\x00\\x7f'");
        assert_eq!(
            py_repr("é\u{a0}\u{200b}\u{e000}\u{10ffff}"),
            "'é\\xa0\\u200b\\ue000\\U0010ffff'"
        );
        assert_eq!(show_bytes(b"ab\xff\xe2\x82"), "'ab\\\\xff\\\\xe2\\\\x82'");
        assert_eq!(
            show_str(&"x".repeat(41)),
            format!("'{}'...", "x".repeat(40))
        );
        assert_eq!(py_strip("\x1c 1.2\u{3000}"), "1.2");
    }
}

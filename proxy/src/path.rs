//! The canonical path of a request on an intercepted host: what injection prefixes, the proxy's
//! own answers and the server route are matched against, and what is sent upstream. Percent
//! escapes of unreserved characters are decoded (RFC 3986 §6.2.2.2) and other escapes
//! upper-cased; anything an upstream, a CDN or a framework could read as a different path is
//! refused instead of guessed at: dot segments (also encoded), `\` and `%5C`, `;` and `%3B`
//! (path parameters), an encoded `/`, a double-encoded `.`/`/`/`\`/`;`/`%`, encoded control
//! characters, and encoded bytes outside ASCII (overlong or look-alike separators).

/// Why a path was refused (the text goes into the 400 body and the log).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathRefusal {
    /// Not origin-form (`/…`).
    #[error("the request target must be a path starting with '/'")]
    NotAPath,
    /// `.` or `..` segments (plain or encoded).
    #[error("paths with '.' or '..' segments are refused")]
    DotSegment,
    /// `\` or `%5C`.
    #[error("paths with a backslash ('\\\\' or %5C) are refused")]
    Backslash,
    /// `;` or `%3B`.
    #[error("paths with ';' (or %3B) are refused")]
    Semicolon,
    /// `%2F`.
    #[error("paths with an encoded '/' (%2F) are refused")]
    EncodedSlash,
    /// `%25` followed by a hex pair.
    #[error("paths with double-encoded characters (%25XX) are refused")]
    DoubleEncoded,
    /// A `%` not followed by two hex digits.
    #[error("paths with a malformed percent escape are refused")]
    BadEscape,
    /// Encoded control characters or bytes outside ASCII, or raw bytes outside visible ASCII.
    #[error("paths with control characters or non-ASCII bytes are refused")]
    NotAscii,
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// The canonical form of `path` (no query), or why it is refused.
pub fn canonical(path: &str) -> Result<String, PathRefusal> {
    let bytes = path.as_bytes();
    if bytes.first() != Some(&b'/') {
        return Err(PathRefusal::NotAPath);
    }
    let mut out = String::with_capacity(path.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\\' => return Err(PathRefusal::Backslash),
            b';' => return Err(PathRefusal::Semicolon),
            b'%' => {
                let (Some(hi), Some(lo)) =
                    (bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex))
                else {
                    return Err(PathRefusal::BadEscape);
                };
                let value = hi << 4 | lo;
                match value {
                    b'/' => return Err(PathRefusal::EncodedSlash),
                    b'\\' => return Err(PathRefusal::Backslash),
                    b';' => return Err(PathRefusal::Semicolon),
                    v if !(0x20..0x7f).contains(&v) => return Err(PathRefusal::NotAscii),
                    v if unreserved(v) => out.push(char::from(v)),
                    v => {
                        out.push('%');
                        out.push(char::from(b"0123456789ABCDEF"[usize::from(v >> 4)]));
                        out.push(char::from(b"0123456789ABCDEF"[usize::from(v & 0x0f)]));
                    }
                }
                i += 3;
                continue;
            }
            b if !b.is_ascii_graphic() => return Err(PathRefusal::NotAscii),
            b => out.push(char::from(b)),
        }
        i += 1;
    }
    // After unreserved escapes are decoded (`%25%32%65` is `%252e` by now): an upstream that
    // decodes twice would see `.`, `/`, … there.
    let out_bytes = out.as_bytes();
    if out_bytes.windows(5).any(|w| w.starts_with(b"%25") && hex(w[3]).is_some() && hex(w[4]).is_some()) {
        return Err(PathRefusal::DoubleEncoded);
    }
    if out.split('/').any(|segment| segment == "." || segment == "..") {
        return Err(PathRefusal::DotSegment);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreserved_escapes_are_decoded_others_kept_upper_case() {
        assert_eq!(canonical("/v1/messages"), Ok("/v1/messages".into()));
        assert_eq!(canonical("/v%31/m%65ssages"), Ok("/v1/messages".into()));
        assert_eq!(canonical("/%7Euser/a%2Db_c"), Ok("/~user/a-b_c".into()));
        assert_eq!(canonical("/files/a%3ab%20c"), Ok("/files/a%3Ab%20c".into()));
        assert_eq!(canonical("/v1//x"), Ok("/v1//x".into()));
        assert_eq!(canonical("/v1/file.name/..x/.y"), Ok("/v1/file.name/..x/.y".into()));
        assert_eq!(canonical("/"), Ok("/".into()));
    }

    #[test]
    fn every_way_out_of_a_prefix_is_refused() {
        let cases: &[(&str, PathRefusal)] = &[
            ("/v1/../admin", PathRefusal::DotSegment),
            ("/v1/./x", PathRefusal::DotSegment),
            ("/v1/%2e%2E/admin", PathRefusal::DotSegment),
            ("/v1/.%2e", PathRefusal::DotSegment),
            ("/v1/..", PathRefusal::DotSegment),
            ("/v1/..\\api/oauth", PathRefusal::Backslash),
            ("/v1/..%5capi/x", PathRefusal::Backslash),
            ("/v1/..%5Capi/x", PathRefusal::Backslash),
            ("/v1/..;/x", PathRefusal::Semicolon),
            ("/v1/x;jsessionid=1", PathRefusal::Semicolon),
            ("/v1/x%3b/y", PathRefusal::Semicolon),
            ("/v1%2fadmin", PathRefusal::EncodedSlash),
            ("/v1%2Fadmin", PathRefusal::EncodedSlash),
            ("/v1/%252e%252e/admin", PathRefusal::DoubleEncoded),
            ("/v1/%252F", PathRefusal::DoubleEncoded),
            ("/v1/%25%32%65%25%32%65/admin", PathRefusal::DoubleEncoded),
            ("/v1/%2", PathRefusal::BadEscape),
            ("/v1/%zz", PathRefusal::BadEscape),
            ("/v1/%", PathRefusal::BadEscape),
            ("/v1/%00", PathRefusal::NotAscii),
            ("/v1/%0a", PathRefusal::NotAscii),
            ("/v1/%c0%af", PathRefusal::NotAscii),
            ("/v1/%ef%bc%8f", PathRefusal::NotAscii),
            ("/v1/caf\u{e9}", PathRefusal::NotAscii),
            ("*", PathRefusal::NotAPath),
            ("", PathRefusal::NotAPath),
            ("v1/x", PathRefusal::NotAPath),
        ];
        for (path, refusal) in cases {
            assert_eq!(canonical(path), Err(*refusal), "{path}");
        }
        assert_eq!(canonical("/v1/100%25"), Ok("/v1/100%25".into()), "an encoded % alone is a literal");
    }

    #[test]
    fn no_input_panics() {
        let alphabet: &[u8] = b"/%.;\\aF2e5c0346";
        let mut state: u32 = 12345;
        for _ in 0..50_000 {
            let mut path = String::from("/");
            for _ in 0..(state % 9) {
                state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                path.push(char::from(alphabet[usize::try_from(state >> 16).unwrap_or(0) % alphabet.len()]));
            }
            if let Ok(canonical) = canonical(&path) {
                assert_eq!(super::canonical(&canonical), Ok(canonical.clone()), "canonical is a fixed point: {path}");
            }
        }
    }
}

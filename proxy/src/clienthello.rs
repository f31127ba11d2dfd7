//! Reading a TLS ClientHello from the first bytes a client sends (without consuming them): the
//! server name it asks for (SNI) and whether it carries Encrypted Client Hello. A pure parser
//! over a byte slice that never panics and never reads past what it was given; it reassembles a
//! ClientHello split over several handshake records, up to [`MAX_HELLO_BYTES`].
//!
//! A small hand parser rather than a crate: rustls parses ClientHellos only inside its own
//! handshake (its `Acceptor` consumes the stream, and a pass-through tunnel must forward the
//! bytes untouched), and `tls-parser` would add `nom` and `rusticata-macros` for the few fields
//! read here (RFC 8446 §4.1.2, RFC 6066 §3, draft-ietf-tls-esni §5).

/// The most bytes buffered to find a complete ClientHello (records included). Real ones are a
/// few hundred bytes to a few KiB (post-quantum key shares included).
pub const MAX_HELLO_BYTES: usize = 32 * 1024;

/// The TLS record type of handshake messages.
pub const HANDSHAKE_RECORD: u8 = 0x16;
const CLIENT_HELLO: u8 = 1;
const EXT_SERVER_NAME: u16 = 0x0000;
/// `encrypted_client_hello`.
pub const EXT_ECH: u16 = 0xfe0d;
/// `ech_outer_extensions` (only valid inside an encrypted inner hello).
const EXT_ECH_OUTER: u16 = 0xfd00;
/// RFC 8446 §5.1: a plaintext record holds at most 2^14 bytes.
const MAX_RECORD_PAYLOAD: usize = 16 * 1024;

/// What the ClientHello says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientHello {
    /// The host name of its server_name extension, as sent (not yet normalised).
    pub sni: Option<String>,
    /// Whether it carries Encrypted Client Hello (the real server name would be hidden).
    pub ech: bool,
}

/// Why no ClientHello could be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HelloError {
    /// More bytes are needed.
    Incomplete,
    /// The bytes are not a TLS handshake record.
    NotTls,
    /// A TLS record, but not a well-formed ClientHello (the reason, for the log).
    Malformed(&'static str),
    /// Longer than [`MAX_HELLO_BYTES`].
    TooLarge,
}

/// A cursor over a byte slice whose reads fail instead of panicking.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], HelloError> {
        if self.bytes.len() < n {
            return Err(HelloError::Malformed(what));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, HelloError> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, HelloError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// A vector with a `len_bytes`-byte length prefix.
    fn vec(&mut self, len_bytes: usize, what: &'static str) -> Result<Reader<'a>, HelloError> {
        let len = match len_bytes {
            1 => usize::from(self.u8(what)?),
            _ => usize::from(self.u16(what)?),
        };
        Ok(Reader { bytes: self.take(len, what)? })
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// Whether `bytes` start like a TLS handshake record (what a client sends first over TLS).
pub fn looks_like_tls(bytes: &[u8]) -> bool {
    bytes.first() == Some(&HANDSHAKE_RECORD)
}

/// The ClientHello at the start of `bytes` (the whole first handshake message, reassembled from
/// as many handshake records as it takes). Bytes after it are ignored.
pub fn parse(bytes: &[u8]) -> Result<ClientHello, HelloError> {
    if bytes.is_empty() {
        return Err(HelloError::Incomplete);
    }
    if !looks_like_tls(bytes) {
        return Err(HelloError::NotTls);
    }
    let mut message: Vec<u8> = Vec::new();
    let mut rest = bytes;
    loop {
        if rest.len() < 5 {
            return Err(incomplete(bytes));
        }
        let (header, after) = rest.split_at(5);
        if header[0] != HANDSHAKE_RECORD {
            return Err(HelloError::Malformed("a record that is not a handshake record inside the ClientHello"));
        }
        if header[1] != 3 {
            return Err(HelloError::NotTls);
        }
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if len == 0 || len > MAX_RECORD_PAYLOAD {
            return Err(HelloError::Malformed("a handshake record of impossible length"));
        }
        if after.len() < len {
            return Err(incomplete(bytes));
        }
        let (payload, next) = after.split_at(len);
        message.extend_from_slice(payload);
        rest = next;
        if message.len() >= 4 {
            if message[0] != CLIENT_HELLO {
                return Err(HelloError::Malformed("the first handshake message is not a ClientHello"));
            }
            let body_len = usize::from(message[1]) << 16 | usize::from(message[2]) << 8 | usize::from(message[3]);
            if body_len + 4 > MAX_HELLO_BYTES {
                return Err(HelloError::TooLarge);
            }
            if message.len() >= body_len + 4 {
                return hello(&message[4..body_len + 4]);
            }
        }
    }
}

fn incomplete(bytes: &[u8]) -> HelloError {
    if bytes.len() >= MAX_HELLO_BYTES { HelloError::TooLarge } else { HelloError::Incomplete }
}

fn hello(body: &[u8]) -> Result<ClientHello, HelloError> {
    let mut r = Reader { bytes: body };
    r.take(2, "legacy_version")?;
    r.take(32, "random")?;
    let session = r.vec(1, "legacy_session_id")?;
    if session.bytes.len() > 32 {
        return Err(HelloError::Malformed("legacy_session_id over 32 bytes"));
    }
    let suites = r.vec(2, "cipher_suites")?;
    if suites.bytes.is_empty() || suites.bytes.len() % 2 != 0 {
        return Err(HelloError::Malformed("cipher_suites"));
    }
    let compression = r.vec(1, "legacy_compression_methods")?;
    if compression.bytes.is_empty() {
        return Err(HelloError::Malformed("legacy_compression_methods"));
    }
    let mut found = ClientHello { sni: None, ech: false };
    if r.is_empty() {
        return Ok(found);
    }
    let mut extensions = r.vec(2, "extensions")?;
    if !r.is_empty() {
        return Err(HelloError::Malformed("bytes after the extensions"));
    }
    let mut seen: Vec<u16> = Vec::new();
    while !extensions.is_empty() {
        let kind = extensions.u16("extension type")?;
        let data = extensions.vec(2, "extension data")?;
        if seen.contains(&kind) {
            return Err(HelloError::Malformed("an extension appears twice"));
        }
        seen.push(kind);
        match kind {
            EXT_SERVER_NAME => found.sni = server_name(data)?,
            EXT_ECH | EXT_ECH_OUTER => found.ech = true,
            _ => {}
        }
    }
    Ok(found)
}

/// The host name of a server_name extension (RFC 6066 §3: at most one of type host_name).
fn server_name(mut data: Reader<'_>) -> Result<Option<String>, HelloError> {
    if data.is_empty() {
        // Allowed in a ServerHello only; a client that sends it names nothing.
        return Ok(None);
    }
    let mut list = data.vec(2, "server_name_list")?;
    if !data.is_empty() {
        return Err(HelloError::Malformed("bytes after server_name_list"));
    }
    let mut host = None;
    while !list.is_empty() {
        let kind = list.u8("name_type")?;
        let name = list.vec(2, "server name")?;
        if kind != 0 {
            continue;
        }
        if host.is_some() {
            return Err(HelloError::Malformed("two host names"));
        }
        if name.bytes.is_empty() || !name.bytes.iter().all(|b| b.is_ascii_graphic()) {
            return Err(HelloError::Malformed("a host name that is empty or not visible ASCII"));
        }
        host = Some(String::from_utf8_lossy(name.bytes).into_owned());
    }
    Ok(host)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A ClientHello record with these extensions (type, data), in one record or split into
    /// records of at most `record_len` bytes.
    pub(crate) fn hello_bytes(extensions: &[(u16, Vec<u8>)], record_len: usize) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend_from_slice(&[7u8; 32]);
        body.push(32);
        body.extend_from_slice(&[9u8; 32]);
        body.extend_from_slice(&[0, 4, 0x13, 0x01, 0x13, 0x02]);
        body.extend_from_slice(&[1, 0]);
        let mut ext = Vec::new();
        for (kind, data) in extensions {
            ext.extend_from_slice(&kind.to_be_bytes());
            ext.extend_from_slice(&u16::try_from(data.len()).expect("short").to_be_bytes());
            ext.extend_from_slice(data);
        }
        body.extend_from_slice(&u16::try_from(ext.len()).expect("short").to_be_bytes());
        body.extend_from_slice(&ext);
        let len = u32::try_from(body.len()).expect("short").to_be_bytes();
        let mut message = vec![CLIENT_HELLO, len[1], len[2], len[3]];
        message.extend_from_slice(&body);
        let mut out = Vec::new();
        for chunk in message.chunks(record_len) {
            out.extend_from_slice(&[HANDSHAKE_RECORD, 3, 1]);
            out.extend_from_slice(&u16::try_from(chunk.len()).expect("short").to_be_bytes());
            out.extend_from_slice(chunk);
        }
        out
    }

    /// A server_name extension's data naming `host` (and more entries, as given).
    pub(crate) fn sni(names: &[(u8, &str)]) -> Vec<u8> {
        let mut list = Vec::new();
        for (kind, name) in names {
            list.push(*kind);
            list.extend_from_slice(&u16::try_from(name.len()).expect("short").to_be_bytes());
            list.extend_from_slice(name.as_bytes());
        }
        let mut data = u16::try_from(list.len()).expect("short").to_be_bytes().to_vec();
        data.extend_from_slice(&list);
        data
    }

    #[test]
    fn the_server_name_and_ech_are_read() {
        let plain = hello_bytes(&[(0x000a, vec![0, 2, 0, 29]), (0, sni(&[(0, "registry.npmjs.org")]))], 16_384);
        assert_eq!(parse(&plain), Ok(ClientHello { sni: Some("registry.npmjs.org".into()), ech: false }));
        let ech = hello_bytes(&[(0, sni(&[(0, "public.example")])), (EXT_ECH, vec![0; 40])], 16_384);
        assert_eq!(parse(&ech), Ok(ClientHello { sni: Some("public.example".into()), ech: true }));
        let none = hello_bytes(&[(0x000a, vec![0, 2, 0, 29])], 16_384);
        assert_eq!(parse(&none), Ok(ClientHello { sni: None, ech: false }));
        // Split over records of 7 bytes each, with trailing bytes after it.
        let mut split = hello_bytes(&[(0, sni(&[(0, "a.example")]))], 7);
        split.extend_from_slice(b"\x17\x03\x03\x00\x01x");
        assert_eq!(parse(&split).map(|h| h.sni), Ok(Some("a.example".into())));
    }

    #[test]
    fn ambiguous_hellos_are_malformed() {
        let twice = hello_bytes(&[(0, sni(&[(0, "a.example")])), (0, sni(&[(0, "b.example")]))], 16_384);
        assert!(matches!(parse(&twice), Err(HelloError::Malformed(_))));
        let two_names = hello_bytes(&[(0, sni(&[(0, "a.example"), (0, "b.example")]))], 16_384);
        assert!(matches!(parse(&two_names), Err(HelloError::Malformed(_))));
        let binary = hello_bytes(&[(0, sni(&[(0, "a\u{7f}.example")]))], 16_384);
        assert!(matches!(parse(&binary), Err(HelloError::Malformed(_))));
        let other_type_ignored = hello_bytes(&[(0, sni(&[(1, "x"), (0, "a.example")]))], 16_384);
        assert_eq!(parse(&other_type_ignored).map(|h| h.sni), Ok(Some("a.example".into())));
    }

    #[test]
    fn other_protocols_are_not_tls() {
        assert_eq!(parse(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"), Err(HelloError::NotTls));
        assert_eq!(parse(b"SSH-2.0-OpenSSH_9.6\r\n"), Err(HelloError::NotTls));
        assert_eq!(parse(b"\x16\x02\x00\x00\x05hello"), Err(HelloError::NotTls), "SSL 2/3 era version byte");
        assert_eq!(parse(b""), Err(HelloError::Incomplete));
        assert!(!looks_like_tls(b"PRI * HTTP/2.0"));
    }

    #[test]
    fn every_truncation_is_incomplete_or_malformed_never_a_panic() {
        let full = hello_bytes(
            &[(0x000a, vec![0, 4, 0, 29, 0, 23]), (0, sni(&[(0, "registry.npmjs.org")])), (0x002b, vec![2, 3, 4])],
            50,
        );
        for cut in 0..full.len() {
            let got = parse(&full[..cut]);
            assert_eq!(got, Err(HelloError::Incomplete), "cut at {cut}: only more bytes can complete it");
        }
        assert!(parse(&full).is_ok());
    }

    #[test]
    fn corrupted_bytes_never_panic() {
        let full = hello_bytes(&[(0, sni(&[(0, "registry.npmjs.org")])), (EXT_ECH, vec![1, 2, 3])], 16_384);
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            let mut bytes = full.clone();
            for _ in 0..4 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let at = usize::try_from(state % bytes.len() as u64).expect("index");
                bytes[at] = (state >> 32) as u8;
            }
            let cut = usize::try_from((state >> 8) % (bytes.len() as u64 + 1)).expect("cut");
            let _ = parse(&bytes[..cut]);
            let _ = parse(&bytes);
        }
    }

    #[test]
    fn an_endless_hello_is_too_large() {
        let mut bytes = vec![HANDSHAKE_RECORD, 3, 1, 0x40, 0x00, CLIENT_HELLO, 0xff, 0xff, 0xff];
        bytes.resize(5 + 0x4000, 0);
        assert_eq!(parse(&bytes), Err(HelloError::TooLarge));
        // Small records whose message fits the limit but whose headers push the buffer past it.
        let mut records = Vec::new();
        let mut message = vec![CLIENT_HELLO, 0x00, 0x7f, 0xf0];
        message.resize(0x7ff4, 0);
        for chunk in message.chunks(256) {
            records.extend_from_slice(&[HANDSHAKE_RECORD, 3, 1, 0x01, 0x00]);
            records.extend_from_slice(chunk);
            if records.len() >= MAX_HELLO_BYTES {
                break;
            }
        }
        assert_eq!(parse(&records), Err(HelloError::TooLarge));
    }
}

//! Lowercase hex for MACs and digests (webhook and replica signatures): written, and read back
//! only as exactly 32 bytes.

/// `bytes` as lowercase hex.
pub fn encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// 64 hex digits (either case) as 32 bytes; anything else is `None`.
pub fn decode_32(hex: &str) -> Option<Vec<u8>> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_lengths_and_digits() {
        let bytes: Vec<u8> = (0..32).collect();
        assert_eq!(decode_32(&encode(&bytes)), Some(bytes.clone()));
        assert_eq!(decode_32(&encode(&bytes).to_uppercase()), Some(bytes));
        assert_eq!(decode_32("ab"), None);
        assert_eq!(decode_32(&"zz".repeat(32)), None);
        assert_eq!(decode_32(&format!("{}é", "0".repeat(62))), None);
    }
}

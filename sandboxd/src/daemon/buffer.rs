//! The resend buffer: one process's stdout bytes that the server has not acknowledged yet.
//!
//! Bytes are numbered by their position in the process's stdout stream. The buffer holds the
//! range `acked..end`; an [`ResendBuffer::ack`] drops everything before an offset, and
//! [`ResendBuffer::frames_from`] yields the held bytes from an offset on, in the chunks they were
//! read in (the first one cut to start at the offset).

use std::collections::VecDeque;

use bytes::Bytes;

/// Unacknowledged stdout of one process.
#[derive(Debug, Default)]
pub struct ResendBuffer {
    /// Offset of the first byte held (everything before was acknowledged).
    acked: u64,
    /// Held chunks, in order, starting at `acked`.
    chunks: VecDeque<Bytes>,
    /// Bytes held.
    len: u64,
}

impl ResendBuffer {
    /// Offset of the first byte still held.
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// One past the last byte read so far.
    pub fn end(&self) -> u64 {
        self.acked + self.len
    }

    /// Bytes held.
    #[cfg(test)]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Appends a chunk; returns the offset of its first byte.
    pub fn push(&mut self, chunk: Bytes) -> u64 {
        let offset = self.end();
        if !chunk.is_empty() {
            self.len += chunk.len() as u64;
            self.chunks.push_back(chunk);
        }
        offset
    }

    /// Drops every byte before `offset` (clamped to what is held); returns how many bytes were
    /// dropped. An offset at or below `acked` drops nothing.
    pub fn ack(&mut self, offset: u64) -> u64 {
        let target = offset.min(self.end());
        let mut dropped = 0;
        while self.acked < target {
            let Some(front) = self.chunks.front_mut() else {
                break;
            };
            let want = target - self.acked;
            let have = front.len() as u64;
            if have <= want {
                self.chunks.pop_front();
                self.acked += have;
                dropped += have;
            } else {
                // `want < have <= usize::MAX`, so the cast is lossless.
                let cut = want as usize;
                let _ = front.split_to(cut);
                self.acked += want;
                dropped += want;
            }
        }
        self.len -= dropped;
        dropped
    }

    /// The held bytes from `offset` on (clamped to `acked..=end`), as `(offset, bytes)` pieces.
    pub fn frames_from(&self, offset: u64) -> Vec<(u64, Bytes)> {
        let start = offset.clamp(self.acked, self.end());
        let mut at = self.acked;
        let mut out = Vec::new();
        for chunk in &self.chunks {
            let chunk_end = at + chunk.len() as u64;
            if chunk_end > start {
                // `start - at < chunk.len()`, so the cast is lossless.
                let skip = start.saturating_sub(at) as usize;
                out.push((at.max(start), chunk.slice(skip..)));
            }
            at = chunk_end;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled() -> ResendBuffer {
        let mut buf = ResendBuffer::default();
        assert_eq!(buf.push(Bytes::from_static(b"hello ")), 0);
        assert_eq!(buf.push(Bytes::from_static(b"")), 6);
        assert_eq!(buf.push(Bytes::from_static(b"world")), 6);
        assert_eq!(buf.push(Bytes::from_static(b"!\n")), 11);
        buf
    }

    fn joined(frames: &[(u64, Bytes)]) -> Vec<u8> {
        frames.iter().flat_map(|(_, b)| b.iter().copied()).collect()
    }

    #[test]
    fn push_numbers_bytes_by_offset() {
        let buf = filled();
        assert_eq!((buf.acked(), buf.end(), buf.len()), (0, 13, 13));
        let frames = buf.frames_from(0);
        let offsets: Vec<u64> = frames.iter().map(|(o, _)| *o).collect();
        assert_eq!(offsets, vec![0, 6, 11]);
        assert_eq!(joined(&frames), b"hello world!\n");
    }

    #[test]
    fn frames_from_mid_chunk_cuts_the_first_chunk() {
        let buf = filled();
        let frames = buf.frames_from(8);
        assert_eq!(frames[0], (8, Bytes::from_static(b"rld")));
        assert_eq!(joined(&frames), b"rld!\n");
        assert!(buf.frames_from(13).is_empty());
        assert!(buf.frames_from(99).is_empty(), "past the end clamps to nothing");
    }

    #[test]
    fn ack_drops_whole_and_partial_chunks() {
        let mut buf = filled();
        assert_eq!(buf.ack(3), 3);
        assert_eq!((buf.acked(), buf.end(), buf.len()), (3, 13, 10));
        assert_eq!(joined(&buf.frames_from(0)), b"lo world!\n", "below acked clamps up");
        assert_eq!(buf.ack(2), 0, "an older ack drops nothing");
        assert_eq!(buf.ack(11), 8);
        assert_eq!(buf.frames_from(0), vec![(11, Bytes::from_static(b"!\n"))]);
        assert_eq!(buf.ack(1000), 2, "acks past the end clamp");
        assert_eq!((buf.acked(), buf.end(), buf.len()), (13, 13, 0));
        assert_eq!(buf.push(Bytes::from_static(b"more")), 13);
        assert_eq!(buf.frames_from(13), vec![(13, Bytes::from_static(b"more"))]);
    }
}

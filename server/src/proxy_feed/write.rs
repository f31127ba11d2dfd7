//! Replacing the proxy's configuration file atomically: a temporary file in the same directory
//! (created 0600, never world-readable even for a moment), written, fsynced, renamed over the
//! file, and the directory fsynced. The proxy never sees a half-written file.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Writes `bytes` to `path` atomically, mode 0600.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("proxy.json");
    let temp = dir.join(format!(".{name}.{:016x}.tmp", rand::random::<u64>()));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn the_file_is_replaced_whole_with_mode_0600_and_no_temporary_left() {
        let dir = std::env::temp_dir().join(format!("agenthold-feed-write-{}", uuid::Uuid::new_v4().simple()));
        let path = dir.join("proxy.json");
        write_atomically(&path, b"{\"a\":1}").expect("first write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        write_atomically(&path, b"{\"b\":2}").expect("second write");
        assert_eq!(std::fs::read(&path).expect("read"), b"{\"b\":2}");
        assert_eq!(std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777, 0o600);
        let names: Vec<_> =
            std::fs::read_dir(&dir).expect("dir").filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
        assert_eq!(names, [std::ffi::OsString::from("proxy.json")]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

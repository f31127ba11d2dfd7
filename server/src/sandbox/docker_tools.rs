//! The tools archive every Docker sandbox mounts at `/opt/agenthold` (through the tools volume
//! [`super::docker::DockerDriver`] fills once): the server's own `sandboxd` and `fakeagent`.

use bytes::Bytes;

use super::DriverError;

/// A tar archive holding `opt/agenthold/{sandboxd,fakeagent}` (mode 0755).
pub(super) fn build_tools_tar(bin_dir: &std::path::Path) -> Result<Bytes, DriverError> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut dir = tar::Header::new_gnu();
    dir.set_entry_type(tar::EntryType::Directory);
    dir.set_mode(0o755);
    dir.set_size(0);
    builder
        .append_data(&mut dir, "opt/agenthold/", std::io::empty())
        .map_err(|e| DriverError::Engine(format!("packing tools: {e}")))?;
    for name in ["sandboxd", "fakeagent"] {
        let path = bin_dir.join(name);
        let bytes =
            std::fs::read(&path).map_err(|e| DriverError::Engine(format!("reading {}: {e}", path.display())))?;
        let mut header = tar::Header::new_gnu();
        header.set_mode(0o755);
        header.set_size(bytes.len() as u64);
        header.set_entry_type(tar::EntryType::Regular);
        builder
            .append_data(&mut header, format!("opt/agenthold/{name}"), bytes.as_slice())
            .map_err(|e| DriverError::Engine(format!("packing tools: {e}")))?;
    }
    let archive = builder.into_inner().map_err(|e| DriverError::Engine(format!("packing tools: {e}")))?;
    Ok(Bytes::from(archive))
}

//! How the server runs: its mode (`AGENTHOLD_MODE`: what a missing master key means) and the
//! subcommands run instead of the server (`agenthold secrets rotate`).

use std::path::PathBuf;

use clap::ValueEnum;

/// How the server runs: `production` needs a master key; `dev` and `test` fall back to one in
/// the data directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// The default: every safety net on, a master key required.
    Production,
    /// `make dev`.
    Dev,
    /// The test harness.
    Test,
}

impl Mode {
    /// The setting's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Production => "production",
            Self::Dev => "dev",
            Self::Test => "test",
        }
    }
}

/// Subcommands (without one, the server runs).
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Manage secrets at rest.
    #[command(subcommand)]
    Secrets(SecretsCommand),
}

/// `agenthold secrets …`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum SecretsCommand {
    /// Re-encrypt every secret under a new master key (one transaction; safe to run twice).
    Rotate {
        /// The key the secrets are encrypted with now.
        #[arg(long)]
        old_key_file: PathBuf,
        /// The key to encrypt them with; start the server with it afterwards.
        #[arg(long)]
        new_key_file: PathBuf,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;

    #[test]
    fn production_is_the_default_mode_and_rotate_is_a_subcommand() {
        let config = parse(&["--mode", "dev"]).expect("parses");
        assert_eq!(config.mode, Mode::Dev);
        assert!(parse(&["--mode", "staging"]).is_err());
        let rotate = parse(&["secrets", "rotate", "--old-key-file", "/a", "--new-key-file", "/b"]).expect("parses");
        let Some(Command::Secrets(SecretsCommand::Rotate { old_key_file, new_key_file })) = rotate.command else {
            panic!("not the rotate subcommand: {:?}", rotate.command);
        };
        assert_eq!((old_key_file, new_key_file), (PathBuf::from("/a"), PathBuf::from("/b")));
        assert!(parse(&["secrets", "rotate", "--old-key-file", "/a"]).is_err(), "both keys are needed");
        let with_key = parse(&["--master-key", "c2VjcmV0"]).expect("parses");
        assert!(!format!("{with_key:?}").contains("c2VjcmV0"), "the key never prints");
        if std::env::var_os("AGENTHOLD_MODE").is_none() {
            assert_eq!(parse(&[]).expect("parses").mode, Mode::Production);
        }
    }
}

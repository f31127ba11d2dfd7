//! The `command` harness: any program that speaks ACP on stdio, given at agent creation
//! (`"harness": "command", "command": ["prog", "arg"]`) and found on the image's PATH.

use super::{HarnessAdapter, Launch, LaunchContext, Profile};

/// The `command` adapter.
pub struct CommandHarness;

/// Longest argv accepted.
const MAX_ARGS: usize = 64;
/// Longest single argument accepted.
const MAX_ARG_BYTES: usize = 4096;

impl HarnessAdapter for CommandHarness {
    fn name(&self) -> &'static str {
        "command"
    }

    fn validate(&self, command: Option<&[String]>) -> Result<(), String> {
        let Some(argv) = command else {
            return Err("the command harness needs \"command\": [\"program\", \"arg\", …]".to_owned());
        };
        if argv.is_empty() || argv[0].trim().is_empty() {
            return Err("\"command\" needs at least a program".to_owned());
        }
        if argv.len() > MAX_ARGS || argv.iter().any(|a| a.len() > MAX_ARG_BYTES || a.contains('\0')) {
            return Err(format!(
                "\"command\" takes at most {MAX_ARGS} arguments of {MAX_ARG_BYTES} bytes, without NUL"
            ));
        }
        Ok(())
    }

    fn launch(&self, context: &LaunchContext<'_>) -> Result<Launch, String> {
        let argv = context.agent.command.clone().ok_or("the agent has no command")?;
        Ok(Launch::argv(argv))
    }

    fn profile(&self) -> Profile {
        Profile { label: "Any ACP program (command)", ..Profile::BARE }
    }
}

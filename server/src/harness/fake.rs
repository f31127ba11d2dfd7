//! The `fake` harness: agenthold's scripted agent (`fakeagent`), shipped with sandboxd, for
//! tests, benchmarks and UI work. Its script comes from the prompt text (docs/fakeagent.md).

use super::{HarnessAdapter, Launch, LaunchContext, Profile};

/// The `fake` adapter.
pub struct Fake;

impl HarnessAdapter for Fake {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn validate(&self, command: Option<&[String]>) -> Result<(), String> {
        super::no_command(self.name(), "fakeagent", command)
    }

    fn launch(&self, context: &LaunchContext<'_>) -> Result<Launch, String> {
        Ok(Launch::argv(vec![format!("{}/fakeagent", context.tools_dir)]))
    }

    fn profile(&self) -> Profile {
        // Takes every kind, so that tests see delivery for both providers (development only).
        Profile {
            label: "fake (development and tests only)",
            development_only: true,
            account_logins: crate::logins::kinds::ALL,
            idle_mib: 10,
            // It boots nothing at its first prompt; the tests see the pool's warm-up turn all
            // the same (a throwaway session and turn before the spare session).
            warm_up_turn: true,
            ..Profile::BARE
        }
    }

    /// fakeagent with `FAKEAGENT_REQUIRE_AUTH=fake-key` asks for `fake-key`, which the server may
    /// call when `FAKEAGENT_AUTH_OK` is set (standing in for an attached key).
    fn auto_authenticate(&self) -> &'static [(&'static str, &'static str)] {
        &[("fake-key", "FAKEAGENT_AUTH_OK")]
    }
}

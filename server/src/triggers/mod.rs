//! Prompts that nobody types (docs/triggers.md): schedules (a cron expression in a time zone)
//! and webhooks (a signed incoming request whose JSON body a template turns into the prompt).
//! Both hand their prompt to [`crate::prompting`], the path a prompt from the API takes, so a
//! triggered turn is gated by the agent's posture and uses the agent's logins like any other.
//!
//! The pure parts — when a schedule is due ([`cron`]), the signature check ([`signature`]), the
//! template ([`template`]) — are here beside the scheduler's loop ([`scheduler`]) and the
//! delivery of one webhook request ([`delivery`]).

pub mod cron;
pub mod delivery;
pub mod scheduler;
pub mod signature;
pub mod template;

//! Translates between the tunnel protocol (`agenthold_sandboxd::protocol`) and the core's copy
//! of its process messages ([`super::core::sandboxd`]): what sandboxd reports becomes an input,
//! what the core orders becomes a control message. Field by field, nothing decided here.

use agenthold_sandboxd::protocol::{self, Control};

use super::core::{ExitStatus, FromSandboxd, ProcessStart, ProcessState, ResumeFrom, ToSandboxd};

/// A process sandboxd named in its hello, as the core sees it.
pub(super) fn process_state(process: protocol::ProcessState) -> ProcessState {
    ProcessState {
        channel: process.channel,
        stdout_acked: process.stdout_acked,
        stdout_end: process.stdout_end,
        stdin_written: process.stdin_written,
        stdin_accepted: process.stdin_accepted,
        exit: process.exit.map(exit_status),
    }
}

fn exit_status(status: protocol::ExitStatus) -> ExitStatus {
    ExitStatus { code: status.code, signal: status.signal }
}

/// What the core takes of a control message from sandboxd; the message back when it is nothing
/// of the harness process (a hello, a terminal's end) or one only the server sends.
pub(super) fn from_sandboxd(msg: Control) -> Result<FromSandboxd, Control> {
    Ok(match msg {
        Control::Started { channel, .. } => FromSandboxd::Started { channel },
        Control::StartFailed { channel, message } => FromSandboxd::StartFailed { channel, message },
        Control::Exited { channel, status, stdout_end } => {
            FromSandboxd::Exited { channel, status: exit_status(status), stdout_end }
        }
        Control::StdinWritten { channel, offset } => FromSandboxd::StdinWritten { channel, offset },
        Control::StdinRejected { channel, offset, expected, reason } => {
            FromSandboxd::StdinRejected { channel, offset, expected, reason }
        }
        Control::Hello { .. }
        | Control::TerminalClosed { .. }
        | Control::Resume { .. }
        | Control::Start { .. }
        | Control::Ack { .. }
        | Control::Signal { .. }
        | Control::CloseStdin { .. }
        | Control::Forget { .. }
        | Control::OpenTerminal { .. }
        | Control::Resize { .. }
        | Control::CloseTerminal { .. } => return Err(msg),
    })
}

/// The control message for what the core tells sandboxd.
pub(super) fn to_sandboxd(order: ToSandboxd) -> Control {
    match order {
        ToSandboxd::Resume { channels } => Control::Resume {
            channels: channels
                .into_iter()
                .map(|ResumeFrom { channel, offset }| protocol::ResumeFrom { channel, offset })
                .collect(),
        },
        ToSandboxd::Start(ProcessStart { channel, argv, env, cwd, user }) => {
            Control::Start { channel, argv, env, cwd, user }
        }
        ToSandboxd::Ack { channel, offset } => Control::Ack { channel, offset },
        ToSandboxd::Signal { channel, signal } => Control::Signal { channel, signal },
        ToSandboxd::Forget { channel } => Control::Forget { channel },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_messages_keep_every_field() {
        let status = protocol::ExitStatus { code: None, signal: Some(9) };
        let exited = Control::Exited { channel: 3, status, stdout_end: 120 };
        let expected =
            FromSandboxd::Exited { channel: 3, status: ExitStatus { code: None, signal: Some(9) }, stdout_end: 120 };
        assert_eq!(from_sandboxd(exited), Ok(expected));
        let rejected = Control::StdinRejected { channel: 3, offset: 5, expected: 4, reason: "gap".to_owned() };
        let expected = FromSandboxd::StdinRejected { channel: 3, offset: 5, expected: 4, reason: "gap".to_owned() };
        assert_eq!(from_sandboxd(rejected), Ok(expected));
        assert_eq!(from_sandboxd(Control::TerminalClosed { channel: 3 }), Err(Control::TerminalClosed { channel: 3 }));
        let process = protocol::ProcessState {
            channel: 3,
            pid: Some(7),
            stdout_acked: 10,
            stdout_end: 20,
            stdin_written: 30,
            stdin_accepted: 40,
            exit: Some(status),
        };
        let seen = process_state(process);
        assert_eq!((seen.stdout_acked, seen.stdout_end, seen.stdin_written, seen.stdin_accepted), (10, 20, 30, 40));
        assert_eq!(seen.exit, Some(ExitStatus { code: None, signal: Some(9) }));
    }

    #[test]
    fn orders_become_the_same_control_messages() {
        let resume = ToSandboxd::Resume { channels: vec![ResumeFrom { channel: 3, offset: 9 }] };
        let wanted = Control::Resume { channels: vec![protocol::ResumeFrom { channel: 3, offset: 9 }] };
        assert_eq!(to_sandboxd(resume), wanted);
        assert_eq!(to_sandboxd(ToSandboxd::Ack { channel: 3, offset: 9 }), Control::Ack { channel: 3, offset: 9 });
        assert_eq!(
            to_sandboxd(ToSandboxd::Signal { channel: 3, signal: 9 }),
            Control::Signal { channel: 3, signal: 9 }
        );
        assert_eq!(to_sandboxd(ToSandboxd::Forget { channel: 3 }), Control::Forget { channel: 3 });
        let start = ProcessStart {
            channel: 3,
            argv: vec!["acp".to_owned()],
            env: vec![("A".to_owned(), "b".to_owned())],
            cwd: "/home/agent".to_owned(),
            user: Some("agent".to_owned()),
        };
        let wanted = Control::Start {
            channel: 3,
            argv: vec!["acp".to_owned()],
            env: vec![("A".to_owned(), "b".to_owned())],
            cwd: "/home/agent".to_owned(),
            user: Some("agent".to_owned()),
        };
        assert_eq!(to_sandboxd(ToSandboxd::Start(start)), wanted);
    }
}

//! Every code a `notice` event carries (docs/api.md, "Events"): lifecycle facts a session's
//! watchers are told, none of them a failure. One list, enumerated by the OpenAPI document's
//! `NoticeCode` schema.

code_list! {
    /// A stable, machine-readable notice code.
    pub enum NoticeCode {
        Authenticated = "AUTHENTICATED",
        AutoSleep = "AUTO_SLEEP",
        CapacityWait = "CAPACITY_WAIT",
        ContextReset = "CONTEXT_RESET",
        DiskFull = "DISK_FULL",
        GrantRevoked = "GRANT_REVOKED",
        ProviderStreamEnded = "PROVIDER_STREAM_ENDED",
        ScheduleSkipped = "SCHEDULE_SKIPPED",
        SessionModeNotSet = "SESSION_MODE_NOT_SET",
        TurnParked = "TURN_PARKED",
        TurnQueued = "TURN_QUEUED",
        TurnResumed = "TURN_RESUMED",
    }
}

#[cfg(test)]
mod tests {
    use super::NoticeCode;

    #[test]
    fn each_code_is_screaming_snake_case_unique_and_serialises_as_its_text() {
        crate::code_list::assert_well_formed(NoticeCode::ALL, NoticeCode::as_str, NoticeCode::parse);
    }
}

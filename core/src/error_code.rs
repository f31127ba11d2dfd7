//! Every code an error carries: the API's error answers (`{"error": {"code", "message"}}`) and
//! the `error` events of failed turns. One list, so a handler cannot invent a code the document
//! does not list: the OpenAPI document's `ErrorCode` schema enumerates them (the server turns on
//! the `openapi` feature).

use std::fmt;

macro_rules! error_codes {
    ($($variant:ident = $text:literal,)*) => {
        /// A stable, machine-readable error code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        // Each variant is its text in CamelCase (the unit test holds them to each other).
        #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
        pub enum ErrorCode {
            $(
                #[allow(missing_docs)]
                $variant,
            )*
        }

        impl ErrorCode {
            /// Every code.
            pub const ALL: &[ErrorCode] = &[$(ErrorCode::$variant),*];

            /// The code as answers and events show it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $text,)*
                }
            }

            /// The code named `text`, if there is one.
            pub fn parse(text: &str) -> Option<Self> {
                match text {
                    $($text => Some(ErrorCode::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

error_codes! {
    AlreadyAnswered = "ALREADY_ANSWERED",
    AutonomousForbidden = "AUTONOMOUS_FORBIDDEN",
    BodyReadTimeout = "BODY_READ_TIMEOUT",
    Capacity = "CAPACITY",
    CsrfRejected = "CSRF_REJECTED",
    DatabaseUnavailable = "DATABASE_UNAVAILABLE",
    DeliveryIdMissing = "DELIVERY_ID_MISSING",
    EnvNameTaken = "ENV_NAME_TAKEN",
    Forbidden = "FORBIDDEN",
    HarnessExited = "HARNESS_EXITED",
    HarnessInitFailed = "HARNESS_INIT_FAILED",
    HarnessLost = "HARNESS_LOST",
    HarnessProtocolError = "HARNESS_PROTOCOL_ERROR",
    HarnessStartFailed = "HARNESS_START_FAILED",
    HarnessTimeout = "HARNESS_TIMEOUT",
    ImageNotAllowed = "IMAGE_NOT_ALLOWED",
    Internal = "INTERNAL",
    IntervalTooShort = "INTERVAL_TOO_SHORT",
    InvalidAnswer = "INVALID_ANSWER",
    InvalidBody = "INVALID_BODY",
    InvalidCommand = "INVALID_COMMAND",
    InvalidCron = "INVALID_CRON",
    InvalidCursor = "INVALID_CURSOR",
    InvalidEgress = "INVALID_EGRESS",
    InvalidEnv = "INVALID_ENV",
    InvalidEnvName = "INVALID_ENV_NAME",
    InvalidImage = "INVALID_IMAGE",
    InvalidLimit = "INVALID_LIMIT",
    InvalidLimits = "INVALID_LIMITS",
    InvalidLogin = "INVALID_LOGIN",
    InvalidModel = "INVALID_MODEL",
    InvalidName = "INVALID_NAME",
    InvalidOption = "INVALID_OPTION",
    InvalidPolicy = "INVALID_POLICY",
    InvalidPosture = "INVALID_POSTURE",
    InvalidPrompt = "INVALID_PROMPT",
    InvalidQuery = "INVALID_QUERY",
    InvalidRule = "INVALID_RULE",
    InvalidSecretValue = "INVALID_SECRET_VALUE",
    InvalidSession = "INVALID_SESSION",
    InvalidState = "INVALID_STATE",
    InvalidTemplate = "INVALID_TEMPLATE",
    InvalidTimeZone = "INVALID_TIME_ZONE",
    InvalidUsername = "INVALID_USERNAME",
    LastAdmin = "LAST_ADMIN",
    LimitTooHigh = "LIMIT_TOO_HIGH",
    LoginBusy = "LOGIN_BUSY",
    LoginRejected = "LOGIN_REJECTED",
    NameTaken = "NAME_TAKEN",
    NotAWebsocket = "NOT_A_WEBSOCKET",
    NotFound = "NOT_FOUND",
    NoTurnInProgress = "NO_TURN_IN_PROGRESS",
    NulCharacter = "NUL_CHARACTER",
    OriginRejected = "ORIGIN_REJECTED",
    OutOfMemory = "OUT_OF_MEMORY",
    PayloadTooLarge = "PAYLOAD_TOO_LARGE",
    PolicyMissing = "POLICY_MISSING",
    PromptTooLong = "PROMPT_TOO_LONG",
    ProviderUnreachable = "PROVIDER_UNREACHABLE",
    QuotaExceeded = "QUOTA_EXCEEDED",
    Replayed = "REPLAYED",
    ReplicaUnavailable = "REPLICA_UNAVAILABLE",
    RequestTimeout = "REQUEST_TIMEOUT",
    SandboxExited = "SANDBOX_EXITED",
    SandboxFailed = "SANDBOX_FAILED",
    SandboxStartFailed = "SANDBOX_START_FAILED",
    SandboxUnreachable = "SANDBOX_UNREACHABLE",
    SecretUnavailable = "SECRET_UNAVAILABLE",
    SelfTarget = "SELF_TARGET",
    ServerBusy = "SERVER_BUSY",
    SessionInUse = "SESSION_IN_USE",
    SessionStartFailed = "SESSION_START_FAILED",
    SignatureExpired = "SIGNATURE_EXPIRED",
    SignatureInvalid = "SIGNATURE_INVALID",
    SignatureMissing = "SIGNATURE_MISSING",
    TemplateFieldMissing = "TEMPLATE_FIELD_MISSING",
    TooManyAttempts = "TOO_MANY_ATTEMPTS",
    TooManyRefusals = "TOO_MANY_REFUSALS",
    TooManyRequests = "TOO_MANY_REQUESTS",
    TooManySecrets = "TOO_MANY_SECRETS",
    TurnInProgress = "TURN_IN_PROGRESS",
    TurnTimeout = "TURN_TIMEOUT",
    Unauthorized = "UNAUTHORIZED",
    UnknownHarness = "UNKNOWN_HARNESS",
    UnknownLoginKind = "UNKNOWN_LOGIN_KIND",
    UnknownLoginMethod = "UNKNOWN_LOGIN_METHOD",
    UnknownPosture = "UNKNOWN_POSTURE",
    UsernameTaken = "USERNAME_TAKEN",
    UseASecret = "USE_A_SECRET",
    WeakPassword = "WEAK_PASSWORD",
    WebhookPaused = "WEBHOOK_PAUSED",
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    #[test]
    fn each_code_is_screaming_snake_case_unique_and_serialises_as_its_text() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            let text = code.as_str();
            assert!(text.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'), "{text}");
            assert!(seen.insert(text), "{text} twice");
            assert_eq!(serde_json::to_value(code).ok(), Some(serde_json::Value::String(text.to_owned())));
            assert_eq!(ErrorCode::parse(text), Some(*code));
        }
        assert_eq!(ErrorCode::parse("NO_SUCH_CODE"), None);
    }
}

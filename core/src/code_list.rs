//! The shape of a list of stable codes ([`crate::error_code::ErrorCode`],
//! [`crate::events::NoticeCode`]): an enum whose variants serialise as their SCREAMING_SNAKE_CASE
//! text, with every code listed (`ALL`), `as_str`, `parse` and `Display`, and an OpenAPI schema
//! enumerating them when the `openapi` feature is on. Written once so the lists cannot drift in
//! how they behave.

/// Declares a code list: `code_list! { /// docs  pub enum Name { Variant = "TEXT", … } }`.
macro_rules! code_list {
    ($(#[$meta:meta])* pub enum $name:ident { $($variant:ident = $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        // Each variant is its text in CamelCase (the unit test holds them to each other).
        #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
        pub enum $name {
            $(
                #[allow(missing_docs)]
                $variant,
            )*
        }

        impl $name {
            /// Every code.
            pub const ALL: &[$name] = &[$($name::$variant),*];

            /// The code as answers and events show it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }

            /// The code named `text`, if there is one.
            pub fn parse(text: &str) -> Option<Self> {
                match text {
                    $($text => Some($name::$variant),)*
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// Checks a list: each code SCREAMING_SNAKE_CASE, unique, serialised as its text and parsed back.
#[cfg(test)]
pub(crate) fn assert_well_formed<T>(all: &[T], as_str: fn(T) -> &'static str, parse: fn(&str) -> Option<T>)
where
    T: Copy + PartialEq + std::fmt::Debug + serde::Serialize,
{
    let mut seen = std::collections::HashSet::new();
    for code in all {
        let text = as_str(*code);
        assert!(
            !text.is_empty() && text.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
            "{text}"
        );
        assert!(seen.insert(text), "{text} twice");
        assert_eq!(serde_json::to_value(code).ok(), Some(serde_json::Value::String(text.to_owned())));
        assert_eq!(parse(text), Some(*code));
    }
    assert_eq!(parse("NO_SUCH_CODE"), None);
}

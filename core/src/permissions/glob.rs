//! The two pattern languages of policy rules, hand-written so that their whole meaning fits in
//! this comment:
//!
//! **Path globs** (`path` in a rule) are matched against a call's normalized absolute paths.
//! - A glob starts with `/` (absolute) or with the segment `**` (anywhere, e.g. `**/.env`).
//! - `*` matches any run of characters within one segment (not `/`), dotfiles included;
//!   `?` matches one character other than `/`.
//! - `**` as a whole segment matches zero or more segments: `/home/agent/**` matches
//!   `/home/agent` and everything below it. `**` inside a segment (`a**`) is rejected.
//! - Every other character is literal (`[`, `{`, `\` included); matching is case-sensitive.
//! - Empty segments (`//`, a trailing `/`) are ignored; `.` and `..` segments are rejected (a
//!   normalized path never has them).
//!
//! **Command patterns** (`command` in an exec rule) are matched against the whole command line.
//! - `*` matches any run of characters, spaces and `/` included; `?` matches one character.
//! - Every other character is literal and case-sensitive; the pattern must match the whole line.
//! - Runs of whitespace count as one space and leading/trailing whitespace is ignored, in both
//!   the pattern and the command: `rm -rf *` matches `rm  -rf /`; `git *` matches `git status`
//!   but not a bare `git` (the space is literal).
//!
//! Both are bounded ([`MAX_PATTERN_BYTES`]); matching takes at most time proportional to the
//! pattern's length times the text's.

use std::fmt;

/// The longest glob or command pattern a rule may hold.
pub const MAX_PATTERN_BYTES: usize = 512;

/// Why a pattern was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// Empty (or blank) pattern.
    #[error("is empty")]
    Empty,
    /// Longer than [`MAX_PATTERN_BYTES`].
    #[error("is longer than {MAX_PATTERN_BYTES} bytes")]
    TooLong,
    /// A path glob that neither starts with `/` nor with `**`.
    #[error("must be absolute (start with `/`) or start with `**`")]
    NotAbsolute,
    /// `**` mixed with other characters in one segment.
    #[error("`**` must be a whole segment, as in `/a/**/b`")]
    PartialDoubleStar,
    /// A `.` or `..` segment.
    #[error("must not contain `.` or `..` segments")]
    DotSegment,
    /// A NUL character.
    #[error("must not contain NUL")]
    Nul,
}

/// One element of a wildcard pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// `*`: any run of characters.
    Star,
    /// `?`: one character.
    Any,
    /// A literal character.
    Char(char),
}

/// One segment of a path glob.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// `**`: zero or more segments.
    Any,
    /// A segment matched with `*`/`?` wildcards.
    Pattern(Vec<Token>),
}

/// A validated path glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathGlob {
    source: String,
    segments: Vec<Segment>,
}

/// A validated command pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandPattern {
    source: String,
    tokens: Vec<Token>,
}

impl PathGlob {
    /// Parses and checks a path glob (see the module documentation).
    pub fn parse(glob: &str) -> Result<Self, PatternError> {
        check_common(glob)?;
        if !(glob.starts_with('/') || glob == "**" || glob.starts_with("**/")) {
            return Err(PatternError::NotAbsolute);
        }
        let mut segments = Vec::new();
        for part in glob.split('/') {
            match part {
                "" => {}
                "." | ".." => return Err(PatternError::DotSegment),
                "**" => {
                    // Consecutive `**` mean the same as one.
                    if segments.last() != Some(&Segment::Any) {
                        segments.push(Segment::Any);
                    }
                }
                part if part.contains("**") => return Err(PatternError::PartialDoubleStar),
                part => segments.push(Segment::Pattern(tokens(part))),
            }
        }
        Ok(Self { source: glob.to_owned(), segments })
    }

    /// The glob as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the normalized absolute `path` matches.
    pub fn matches(&self, path: &str) -> bool {
        let parts: Vec<Vec<char>> = path.split('/').filter(|s| !s.is_empty()).map(|s| s.chars().collect()).collect();
        match_sequence(
            &self.segments,
            &parts,
            |segment| matches!(segment, Segment::Any),
            |segment, part| match segment {
                Segment::Any => true,
                Segment::Pattern(tokens) => match_tokens(tokens, part),
            },
        )
    }
}

impl CommandPattern {
    /// Parses and checks a command pattern (see the module documentation).
    pub fn parse(pattern: &str) -> Result<Self, PatternError> {
        check_common(pattern)?;
        let collapsed = collapse_whitespace(pattern);
        if collapsed.is_empty() {
            return Err(PatternError::Empty);
        }
        let tokens = tokens(&collapsed);
        Ok(Self { source: pattern.to_owned(), tokens })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the whole `command` line matches (its whitespace collapsed first).
    pub fn matches(&self, command: &str) -> bool {
        let chars: Vec<char> = collapse_whitespace(command).chars().collect();
        match_tokens(&self.tokens, &chars)
    }
}

impl fmt::Display for PathGlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl fmt::Display for CommandPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// `text` trimmed, with every run of whitespace turned into one space.
pub fn collapse_whitespace(text: &str) -> String {
    let mut collapsed = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !collapsed.is_empty() {
            collapsed.push(' ');
        }
        collapsed.push_str(word);
    }
    collapsed
}

fn check_common(pattern: &str) -> Result<(), PatternError> {
    if pattern.trim().is_empty() {
        return Err(PatternError::Empty);
    }
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(PatternError::TooLong);
    }
    if pattern.contains('\0') {
        return Err(PatternError::Nul);
    }
    Ok(())
}

fn tokens(pattern: &str) -> Vec<Token> {
    let mut tokens = Vec::with_capacity(pattern.len());
    for c in pattern.chars() {
        let token = match c {
            '*' => Token::Star,
            '?' => Token::Any,
            c => Token::Char(c),
        };
        if token == Token::Star && tokens.last() == Some(&Token::Star) {
            continue;
        }
        tokens.push(token);
    }
    tokens
}

fn match_tokens(tokens: &[Token], text: &[char]) -> bool {
    match_sequence(
        tokens,
        text,
        |token| *token == Token::Star,
        |token, c| match token {
            Token::Star | Token::Any => true,
            Token::Char(expected) => expected == c,
        },
    )
}

/// Wildcard matching over any sequence: `is_star` elements match any run of items, every other
/// element matches exactly one item for which `matches_one` holds. The classic greedy matcher
/// that backtracks only to the last star: correct for this language, and O(pattern × text) at
/// worst, never exponential.
fn match_sequence<P, T>(
    pattern: &[P],
    text: &[T],
    is_star: impl Fn(&P) -> bool,
    matches_one: impl Fn(&P, &T) -> bool,
) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut last_star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(element) if is_star(element) => {
                last_star = Some((p, t));
                p += 1;
            }
            Some(element) if matches_one(element, &text[t]) => {
                p += 1;
                t += 1;
            }
            _ => match last_star {
                Some((star, start)) => {
                    p = star + 1;
                    t = start + 1;
                    last_star = Some((star, start + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p.min(pattern.len())..].iter().all(is_star)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(source: &str) -> PathGlob {
        PathGlob::parse(source).expect("valid glob")
    }

    fn command(source: &str) -> CommandPattern {
        CommandPattern::parse(source).expect("valid pattern")
    }

    #[test]
    fn double_star_spans_segments_and_star_stays_in_one() {
        let rust = glob("/home/agent/**/*.rs");
        assert!(rust.matches("/home/agent/main.rs"));
        assert!(rust.matches("/home/agent/src/a/b/lib.rs"));
        assert!(!rust.matches("/home/agent/src/lib.rsx"));
        assert!(!rust.matches("/home/other/main.rs"));
        assert!(!rust.matches("/home/agent"));
    }

    #[test]
    fn leading_double_star_matches_anywhere() {
        let env = glob("**/.env");
        assert!(env.matches("/.env"));
        assert!(env.matches("/home/agent/.env"));
        assert!(env.matches("/srv/app/config/.env"));
        assert!(!env.matches("/home/agent/.env.example"));
        assert!(!env.matches("/home/agent/.env/x"));
        assert!(glob("**").matches("/anything/at/all"));
        assert!(glob("**").matches("/"));
    }

    #[test]
    fn single_star_is_one_segment() {
        let etc = glob("/etc/*");
        assert!(etc.matches("/etc/passwd"));
        assert!(etc.matches("/etc/.hidden"));
        assert!(!etc.matches("/etc/ssl/certs"));
        assert!(!etc.matches("/etc"));
        assert!(!etc.matches("/usr/etc/passwd"));
    }

    #[test]
    fn trailing_double_star_includes_the_folder() {
        let home = glob("/home/agent/**");
        assert!(home.matches("/home/agent"));
        assert!(home.matches("/home/agent/a/b"));
        assert!(!home.matches("/home/agentx"));
    }

    #[test]
    fn question_mark_and_literals() {
        let g = glob("/tmp/file?.[ch]");
        assert!(g.matches("/tmp/file1.[ch]"));
        assert!(!g.matches("/tmp/file1.c"));
        assert!(!g.matches("/tmp/file.[ch]"));
        assert!(!glob("/tmp/?").matches("/tmp/ab"));
        assert!(glob("/TMP/a").matches("/TMP/a"));
        assert!(!glob("/TMP/a").matches("/tmp/a"));
        assert!(glob("/a/**/**/b").matches("/a/b"));
        assert!(glob("/").matches("/"));
        assert!(glob("/*/x/*/y").matches("/p/x/q/y"));
        assert!(!glob("/*/x/*/y").matches("/p/x/y"));
    }

    #[test]
    fn non_ascii_is_matched_by_character() {
        assert!(glob("/données/?.txt").matches("/données/é.txt"));
    }

    #[test]
    fn bad_globs_are_rejected_with_a_reason() {
        assert_eq!(PathGlob::parse(""), Err(PatternError::Empty));
        assert_eq!(PathGlob::parse("src/*.rs"), Err(PatternError::NotAbsolute));
        assert_eq!(PathGlob::parse("*.rs"), Err(PatternError::NotAbsolute));
        assert_eq!(PathGlob::parse("/a/b**"), Err(PatternError::PartialDoubleStar));
        assert_eq!(PathGlob::parse("/a/../b"), Err(PatternError::DotSegment));
        assert_eq!(PathGlob::parse("/a/./b"), Err(PatternError::DotSegment));
        assert_eq!(PathGlob::parse(&format!("/{}", "a".repeat(600))), Err(PatternError::TooLong));
        assert_eq!(PathGlob::parse("/a\0"), Err(PatternError::Nul));
    }

    #[test]
    fn command_star_spans_spaces_and_slashes() {
        let git = command("git *");
        assert!(git.matches("git status"));
        assert!(git.matches("git push --force origin main"));
        assert!(!git.matches("git"));
        assert!(!git.matches("gitk --all"));
        assert!(!git.matches("sudo git status"));
        let rm = command("rm -rf *");
        assert!(rm.matches("rm -rf /"));
        assert!(rm.matches("rm -rf /home/agent/build target"));
        assert!(rm.matches("  rm   -rf\t/  "));
        assert!(!rm.matches("rm -r /"));
        assert!(command("*rm -rf*").matches("cd / && rm -rf --no-preserve-root /"));
    }

    #[test]
    fn command_question_mark_and_whole_line() {
        assert!(command("ls -?").matches("ls -l"));
        assert!(!command("ls -?").matches("ls -la"));
        assert!(command("make").matches("make"));
        assert!(!command("make").matches("make test"));
        assert!(command("echo   a").matches("echo a"));
    }

    #[test]
    fn bad_command_patterns_are_rejected() {
        assert_eq!(CommandPattern::parse("   "), Err(PatternError::Empty));
        assert_eq!(CommandPattern::parse(&"a".repeat(513)), Err(PatternError::TooLong));
    }

    #[test]
    fn pathological_patterns_stay_fast() {
        let pattern = format!("{}b", "*a".repeat(200));
        let slow = command(&pattern);
        let text = "a".repeat(32 * 1024);
        assert!(!slow.matches(&text));
        let deep = glob(&format!("{}/z", "/**/a".repeat(60)));
        let path = "/a".repeat(2_000);
        assert!(!deep.matches(&path));
    }

    #[test]
    fn collapse_whitespace_trims_and_joins() {
        assert_eq!(collapse_whitespace("  a \n\t b  "), "a b");
        assert_eq!(collapse_whitespace(""), "");
    }
}

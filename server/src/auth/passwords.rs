//! Passwords: argon2id (the crate's defaults, with a random salt per hash), hashed and checked
//! off the runtime, on a few threads of their own (one per core, started on first use, living as
//! long as the process). Each hash or check holds one of [`slots`] for its duration, so
//! concurrent argon2 work — and the ~19 MiB each one allocates — is bounded however many logins
//! arrive; a caller that cannot get a slot within [`SLOT_WAIT`] is told the server is busy.
//!
//! Each hashing thread keeps its argon2 memory and reuses it: allocating ~19 MiB per check (what
//! the argon2 crate's convenience methods do) fragments the allocator's arenas so that memory
//! grew by about that much with every login; now it is `slots × 19 MiB`, once.

use std::sync::LazyLock;
use std::time::Duration;

use std::cell::RefCell;

use argon2::password_hash::phc::{Output, ParamsString, PasswordHash, Salt};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use parking_lot::Mutex;
use rand::RngCore;
use tokio::sync::{Semaphore, SemaphorePermit};

/// Shortest password accepted.
pub const MIN_LENGTH: usize = 12;
/// Longest password accepted (hashing cost is proportional to it).
pub const MAX_LENGTH: usize = 1024;
/// Longest a hash or check waits for a free slot.
pub const SLOT_WAIT: Duration = Duration::from_secs(5);

/// Slots for argon2 work: one per core.
static SLOTS: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(slots()));

/// Work for the hashing threads.
type Job = Box<dyn FnOnce() + Send>;

/// The hashing threads' queue (it never holds more jobs than [`slots`]: a job is queued only by
/// the holder of a slot).
static HASHERS: LazyLock<Option<Mutex<std::sync::mpsc::Sender<Job>>>> = LazyLock::new(|| {
    let (jobs, queue) = std::sync::mpsc::channel::<Job>();
    let queue = std::sync::Arc::new(Mutex::new(queue));
    for index in 0..slots() {
        let queue = std::sync::Arc::clone(&queue);
        let spawned = std::thread::Builder::new().name(format!("argon2-{index}")).spawn(move || {
            loop {
                let job = queue.lock().recv();
                match job {
                    Ok(job) => job(),
                    Err(_) => return,
                }
            }
        });
        if let Err(error) = spawned {
            tracing::error!(%error, "starting a password hashing thread");
            return None;
        }
    }
    Some(Mutex::new(jobs))
});

/// Runs `work` on a hashing thread (the caller holds a slot).
async fn on_hasher<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> anyhow::Result<T> {
    let (done, result) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _ = done.send(work());
    });
    let sent = HASHERS.as_ref().map(|jobs| jobs.lock().send(job).is_ok());
    anyhow::ensure!(sent == Some(true), "the password hashing threads are gone");
    result.await.map_err(|_| anyhow::anyhow!("a password hashing job died"))
}

/// Most argon2 memory a stored hash may ask for (the default is 19 MiB); a hash asking for more
/// never matches rather than allocating it.
const MAX_MEMORY_BLOCKS: usize = 64 << 10;

/// A hash to check passwords of unknown users against, so both cases cost the same (made on
/// first use, on a hashing thread).
static DUMMY_HASH: LazyLock<String> = LazyLock::new(|| hash_now("not a real password").unwrap_or_default());

thread_local! {
    /// The hashing thread's argon2 memory, reused by every hash and check it runs.
    static MEMORY: RefCell<Vec<Block>> = const { RefCell::new(Vec::new()) };
}

/// Runs argon2 with this thread's memory.
fn with_memory<T>(blocks: usize, work: impl FnOnce(&mut [Block]) -> T) -> T {
    MEMORY.with(|memory| {
        let mut memory = memory.borrow_mut();
        if memory.len() < blocks {
            memory.resize(blocks, Block::new());
        }
        work(&mut memory[..blocks])
    })
}

/// Hashes on the current thread (a hashing thread).
fn hash_now(password: &str) -> anyhow::Result<String> {
    let params = Params::DEFAULT;
    let mut salt = [0u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let mut out = [0u8; Params::DEFAULT_OUTPUT_LEN];
    let argon2 = Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone());
    with_memory(params.block_count(), |memory| {
        argon2.hash_password_into_with_memory(password.as_bytes(), &salt, &mut out, memory)
    })
    .map_err(|e| anyhow::anyhow!("hashing a password: {e}"))?;
    let phc = PasswordHash {
        algorithm: Algorithm::Argon2id.ident(),
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(&params).map_err(|e| anyhow::anyhow!("encoding argon2 parameters: {e}"))?,
        salt: Some(Salt::new(&salt).map_err(|e| anyhow::anyhow!("encoding a salt: {e}"))?),
        hash: Some(Output::new(&out).map_err(|e| anyhow::anyhow!("encoding a hash: {e}"))?),
    };
    Ok(phc.to_string())
}

/// Checks on the current thread (a hashing thread); anything malformed never matches.
fn check_now(password: &str, phc: &str) -> bool {
    let Ok(parsed) = PasswordHash::new(phc) else { return false };
    let (Some(salt), Some(expected)) = (&parsed.salt, &parsed.hash) else { return false };
    let Ok(algorithm) = Algorithm::try_from(parsed.algorithm.as_str()) else { return false };
    let Ok(version) = parsed.version.map_or(Ok(Version::default()), Version::try_from) else { return false };
    let Ok(params) = Params::try_from(&parsed) else { return false };
    let blocks = params.block_count();
    if blocks > MAX_MEMORY_BLOCKS {
        return false;
    }
    let mut out = vec![0u8; expected.len()];
    let argon2 = Argon2::new(algorithm, version, params);
    let hashed = with_memory(blocks, |memory| {
        argon2.hash_password_into_with_memory(password.as_bytes(), salt, &mut out, memory)
    });
    // Output's equality is constant-time.
    hashed.is_ok() && Output::new(&out).is_ok_and(|computed| &computed == expected)
}

/// How many argon2 hashes or checks run at once: the number of cores.
pub fn slots() -> usize {
    std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
}

/// Why a hash or check did not happen.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    /// Every slot stayed busy for [`SLOT_WAIT`].
    #[error("every password hashing slot is busy")]
    Busy,
    /// The hashing failed (or its task died).
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

async fn slot() -> Result<SemaphorePermit<'static>, PasswordError> {
    match tokio::time::timeout(SLOT_WAIT, SLOTS.acquire()).await {
        Ok(Ok(permit)) => Ok(permit),
        Ok(Err(_)) | Err(_) => Err(PasswordError::Busy),
    }
}

/// Checks a new password's length.
pub fn check_policy(password: &str) -> Result<(), String> {
    let length = password.chars().count();
    if length < MIN_LENGTH || password.len() > MAX_LENGTH {
        return Err(format!("passwords are {MIN_LENGTH} to {MAX_LENGTH} characters long"));
    }
    Ok(())
}

/// Hashes a password (argon2id PHC string).
pub async fn hash(password: String) -> anyhow::Result<String> {
    let _slot = slot().await.map_err(|e| anyhow::anyhow!("hashing a password: {e}"))?;
    on_hasher(move || hash_now(&password)).await?
}

/// Whether `password` matches `phc`; with no `phc` (an unknown user) it is checked against a
/// dummy hash at the same cost and never matches. A malformed stored hash never matches.
pub async fn verify(password: String, phc: Option<String>) -> Result<bool, PasswordError> {
    let _slot = slot().await?;
    let known = phc.is_some();
    let matches = on_hasher(move || match phc {
        Some(phc) => check_now(&password, &phc),
        None => check_now(&password, &DUMMY_HASH),
    })
    .await?;
    Ok(matches && known)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_verify_and_differ() {
        let first = hash("correct horse battery".to_owned()).await.expect("hash");
        let second = hash("correct horse battery".to_owned()).await.expect("hash");
        assert!(first.starts_with("$argon2id$"));
        assert_ne!(first, second, "salted");
        assert!(verify("correct horse battery".to_owned(), Some(first.clone())).await.expect("verify"));
        assert!(!verify("wrong horse battery".to_owned(), Some(first)).await.expect("verify"));
        assert!(!verify("x".to_owned(), Some("not a hash".to_owned())).await.expect("verify"));
        assert!(!verify("not a real password".to_owned(), None).await.expect("verify"), "unknown users never match");
    }

    #[tokio::test]
    async fn an_unknown_user_costs_the_same_password_check_as_a_known_one() {
        let real = hash("a real user's password".to_owned()).await.expect("hash");
        let dummy = on_hasher(|| DUMMY_HASH.clone()).await.expect("dummy");
        let (dummy, real) =
            (PasswordHash::new(&dummy).expect("dummy parses"), PasswordHash::new(&real).expect("real parses"));
        assert_eq!(dummy.algorithm, real.algorithm, "same algorithm");
        assert_eq!(dummy.params, real.params, "same memory, iterations and parallelism");
    }

    #[test]
    fn hashes_made_by_the_argon2_crate_are_checked_alike() {
        use argon2::password_hash::PasswordHasher;
        let theirs = Argon2::default().hash_password(b"correct horse battery").expect("hash").to_string();
        assert!(check_now("correct horse battery", &theirs));
        assert!(!check_now("correct horse battery!", &theirs));
        let ours = hash_now("correct horse battery").expect("hash");
        use argon2::password_hash::PasswordVerifier;
        let parsed = PasswordHash::new(&ours).expect("parses");
        assert!(Argon2::default().verify_password(b"correct horse battery", &parsed).is_ok());
    }

    #[test]
    fn short_passwords_are_refused() {
        assert!(check_policy("short").is_err());
        assert!(check_policy("long enough password").is_ok());
    }
}

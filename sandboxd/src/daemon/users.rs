//! Who a process runs as: looking users up in `/etc/passwd`, creating the sandbox user when
//! sandboxd is root inside a sandbox and the image lacks it, and the environment every started
//! process gets (see [`environment`]).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Write as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

/// `PATH` for a process when neither the image nor the server sets one.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// First uid/gid handed to a created user.
const FIRST_ID: u32 = 1000;

/// One `/etc/passwd` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Login name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Home directory.
    pub home: String,
}

/// Where the account databases live (`/etc` in production, a temp dir in tests).
#[derive(Debug, Clone)]
pub struct AccountFiles {
    /// The `passwd` file.
    pub passwd: PathBuf,
    /// The `group` file.
    pub group: PathBuf,
}

impl Default for AccountFiles {
    fn default() -> Self {
        Self { passwd: "/etc/passwd".into(), group: "/etc/group".into() }
    }
}

/// Parses `passwd` text; malformed lines are skipped.
pub fn parse_passwd(text: &str) -> Vec<Account> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            if fields.len() < 7 {
                return None;
            }
            Some(Account {
                name: fields[0].to_owned(),
                uid: fields[2].parse().ok()?,
                gid: fields[3].parse().ok()?,
                home: fields[5].to_owned(),
            })
        })
        .collect()
}

/// Group ids used in `group` text.
fn group_ids(text: &str) -> Vec<u32> {
    text.lines().filter_map(|line| line.split(':').nth(2)?.parse().ok()).collect()
}

fn read_or_empty(path: &Path) -> io::Result<String> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(String::new()),
        Err(err) => Err(err),
    }
}

impl AccountFiles {
    /// The account named `name`, if any.
    pub fn by_name(&self, name: &str) -> io::Result<Option<Account>> {
        Ok(parse_passwd(&read_or_empty(&self.passwd)?).into_iter().find(|a| a.name == name))
    }

    /// The account with uid `uid`, if any.
    pub fn by_uid(&self, uid: u32) -> io::Result<Option<Account>> {
        Ok(parse_passwd(&read_or_empty(&self.passwd)?).into_iter().find(|a| a.uid == uid))
    }

    /// Creates user `name` with its own group: uid and gid are the first id from 1000 on that is
    /// neither a used uid nor a used gid; home `/home/<name>`, shell bash if present else sh.
    pub fn create(&self, name: &str) -> io::Result<Account> {
        let valid = !name.is_empty()
            && name.len() <= 32
            && !name.starts_with('-')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        if !valid {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("invalid user name {name:?}")));
        }
        let passwd = read_or_empty(&self.passwd)?;
        let group = read_or_empty(&self.group)?;
        let mut used: Vec<u32> = parse_passwd(&passwd).iter().map(|a| a.uid).collect();
        used.extend(group_ids(&group));
        let mut id = FIRST_ID;
        while used.contains(&id) {
            id += 1;
        }
        let home = format!("/home/{name}");
        let shell = if Path::new("/bin/bash").exists() { "/bin/bash" } else { "/bin/sh" };
        append_line(&self.group, &group, &format!("{name}:x:{id}:"))?;
        append_line(&self.passwd, &passwd, &format!("{name}:x:{id}:{id}::{home}:{shell}"))?;
        Ok(Account { name: name.to_owned(), uid: id, gid: id, home })
    }
}

/// Appends `line` to the file whose current text is `current`, adding a missing final newline.
fn append_line(path: &Path, current: &str, line: &str) -> io::Result<()> {
    let mut file = fs::OpenOptions::new().append(true).create(true).open(path)?;
    let sep = if current.is_empty() || current.ends_with('\n') { "" } else { "\n" };
    file.write_all(format!("{sep}{line}\n").as_bytes())
}

/// Resolves `user` for a start. With `may_create` (sandboxd is root inside a sandbox) a missing
/// user is created and a root-owned home is created/handed to the user.
pub fn resolve(files: &AccountFiles, user: &str, may_create: bool) -> io::Result<Account> {
    let account = match files.by_name(user)? {
        Some(account) => account,
        None if may_create => {
            let account = files.create(user)?;
            super::log(format_args!("created user {} (uid {})", account.name, account.uid));
            account
        }
        None => {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("no such user {user:?}")));
        }
    };
    if may_create && account.uid != 0 {
        prepare_home(&account)?;
    }
    Ok(account)
}

/// Creates the account's home if missing and gives it to the account if root owns it.
fn prepare_home(account: &Account) -> io::Result<()> {
    let home = Path::new(&account.home);
    if account.home.is_empty() || account.home == "/" {
        return Ok(());
    }
    fs::create_dir_all(home)?;
    if fs::metadata(home)?.uid() == 0 {
        std::os::unix::fs::chown(home, Some(account.uid), Some(account.gid))?;
    }
    Ok(())
}

/// Prefix of sandboxd's own variables (its token among them), which no process inherits.
const OWN_PREFIX: &[u8] = b"AGENTHOLD_";

/// The image's environment: sandboxd's own (Docker gives PID 1 the image's `ENV`) less its
/// `AGENTHOLD_*` variables.
pub fn image_environment(own: impl IntoIterator<Item = (OsString, OsString)>) -> Vec<(OsString, OsString)> {
    own.into_iter().filter(|(key, _)| !key.as_encoded_bytes().starts_with(OWN_PREFIX)).collect()
}

/// The environment of a started process, each layer over the one before: the image's
/// (`image`, already without `AGENTHOLD_*`), `PATH` defaulted to [`DEFAULT_PATH`] if the image has
/// none, `HOME`/`USER`/`LOGNAME` of the user it runs as, then what the server sent (`given`),
/// which wins. `account` is that user, `None` when it is unknown (sandboxd's own user missing
/// from passwd: the image's values, else `/` and `root`).
pub fn environment(
    image: &[(OsString, OsString)],
    given: Vec<(String, String)>,
    account: Option<&Account>,
) -> Vec<(OsString, OsString)> {
    let mut env: BTreeMap<OsString, OsString> = image.iter().cloned().collect();
    env.entry("PATH".into()).or_insert_with(|| DEFAULT_PATH.into());
    let login = match account {
        Some(a) => [("HOME", a.home.as_str()), ("USER", a.name.as_str()), ("LOGNAME", a.name.as_str())]
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
        None => {
            let get = |k: &str, fallback: &str| env.get(OsStr::new(k)).cloned().unwrap_or_else(|| fallback.into());
            let user = get("USER", "root");
            [("HOME".into(), get("HOME", "/")), ("USER".into(), user.clone()), ("LOGNAME".into(), user)]
        }
    };
    env.extend(login);
    env.extend(given.into_iter().map(|(k, v)| (OsString::from(k), OsString::from(v))));
    env.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_files(passwd: &str, group: &str) -> (PathBuf, AccountFiles) {
        let dir = std::env::temp_dir().join(format!(
            "sandboxd-users-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        fs::create_dir_all(&dir).expect("temp dir");
        let files = AccountFiles { passwd: dir.join("passwd"), group: dir.join("group") };
        fs::write(&files.passwd, passwd).expect("write passwd");
        fs::write(&files.group, group).expect("write group");
        (dir, files)
    }

    #[test]
    fn parses_passwd_and_skips_garbage() {
        let text = "root:x:0:0:root:/root:/bin/bash\nbad line\nagent:x:1000:1000::/home/agent:/bin/sh\nx:x:nope:0::/:/bin/sh\n";
        let accounts = parse_passwd(text);
        assert_eq!(accounts.len(), 2);
        assert_eq!(accounts[1], Account { name: "agent".into(), uid: 1000, gid: 1000, home: "/home/agent".into() });
    }

    #[test]
    fn create_picks_the_next_free_id_and_appends() {
        let (dir, files) = temp_files(
            "root:x:0:0:root:/root:/bin/bash\nnode:x:1000:1000::/home/node:/bin/sh",
            "root:x:0:\nnode:x:1000:\nstaff:x:1001:\n",
        );
        let created = files.create("agent").expect("created");
        assert_eq!((created.uid, created.gid, created.home.as_str()), (1002, 1002, "/home/agent"));
        assert_eq!(files.by_name("agent").expect("read"), Some(created.clone()));
        assert_eq!(files.by_uid(1002).expect("read"), Some(created));
        let passwd = fs::read_to_string(&files.passwd).expect("read");
        assert!(passwd.contains("/home/node:/bin/sh\nagent:x:1002:1002::/home/agent:/bin/"), "{passwd}");
        assert!(fs::read_to_string(&files.group).expect("read").ends_with("staff:x:1001:\nagent:x:1002:\n"));
        assert!(files.create("../evil").is_err());
        assert!(resolve(&files, "ghost", false).is_err(), "no creation unless allowed");
        fs::remove_dir_all(dir).ok();
    }

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
    }

    #[test]
    fn image_environment_loses_sandboxds_own_variables() {
        let own =
            os(&[("PATH", "/opt/bin"), ("AGENTHOLD_SANDBOX_TOKEN", "s3cret"), ("AGENTHOLD_X", "1"), ("LANG", "C")]);
        assert_eq!(image_environment(own), os(&[("PATH", "/opt/bin"), ("LANG", "C")]));
    }

    #[test]
    fn layers_image_then_login_then_given() {
        let account = Account { name: "agent".into(), uid: 1000, gid: 1000, home: "/home/agent".into() };
        let image = os(&[("PATH", "/opt/bin"), ("HOME", "/root"), ("LANG", "C.UTF-8"), ("TOOL", "image")]);
        let given = vec![("TOOL".into(), "server".into()), ("X".into(), "1".into())];
        let env = environment(&image, given, Some(&account));
        let want = os(&[
            ("HOME", "/home/agent"),
            ("LANG", "C.UTF-8"),
            ("LOGNAME", "agent"),
            ("PATH", "/opt/bin"),
            ("TOOL", "server"),
            ("USER", "agent"),
            ("X", "1"),
        ]);
        assert_eq!(env, want);

        let env = environment(&[], vec![("HOME".into(), "/given".into())], None);
        assert_eq!(
            env,
            os(&[("HOME", "/given"), ("LOGNAME", "root"), ("PATH", DEFAULT_PATH), ("USER", "root")]),
            "no image PATH: the default; the server's HOME wins"
        );
    }
}

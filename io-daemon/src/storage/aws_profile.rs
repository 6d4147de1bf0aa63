//! AWS profiles: the S3 client's settings from the shared files the AWS tools write,
//! because the `object_store` crate (0.13) reads only environment variables.
//!
//! - The profile is `AWS_PROFILE`, else `default`. Its settings come from
//!   `AWS_SHARED_CREDENTIALS_FILE` (else `~/.aws/credentials`, section `[NAME]`) and
//!   `AWS_CONFIG_FILE` (else `~/.aws/config`, section `[default]` or `[profile NAME]`);
//!   where both files set a key, the credentials file wins, as with the AWS CLI.
//! - Read: `aws_access_key_id`, `aws_secret_access_key`, `aws_session_token`, `region`
//!   and `endpoint_url`. Explicit environment variables win over the profile: the keys
//!   as a whole (`AWS_ACCESS_KEY_ID` set: none of the profile's key, secret or token is
//!   used), `AWS_REGION`/`AWS_DEFAULT_REGION` over `region`, `AWS_ENDPOINT_URL`/
//!   `AWS_ENDPOINT` over `endpoint_url`.
//! - A profile named by `AWS_PROFILE` that neither file has is an error naming the
//!   files; so is a profile whose credentials this client cannot use (single sign-on,
//!   roles, `credential_process`; unless a variable gives the client keys another
//!   way: a web identity, a container endpoint), a key without its secret, an
//!   unreadable file and a line that is not `key = value`. Missing files and a missing
//!   `default` profile are not errors: the environment alone configures the client then.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

/// The largest shared file read (real ones are a few KiB).
const MAX_FILE_BYTES: u64 = 1 << 20;

/// Profile keys that name a way of getting credentials this client does not have.
const UNSUPPORTED_KEYS: [&str; 5] = [
    "sso_start_url",
    "sso_session",
    "role_arn",
    "credential_process",
    "web_identity_token_file",
];

/// An INI file's sections by name, each its keys (lower case) and values.
type Sections = HashMap<String, HashMap<String, String>>;

/// Variables that give `object_store` keys of its own (no profile needed).
const OTHER_KEY_SOURCES: [&str; 3] = [
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
];

/// What can go wrong reading a profile.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// A shared file exists but cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A shared file larger than [`MAX_FILE_BYTES`].
    #[error("{}: larger than {MAX_FILE_BYTES} bytes: not an AWS shared file", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// A line that is neither a section, a setting, a comment nor a continuation.
    #[error("{}:{line}: not `[section]` nor `key = value`", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Its 1-based line number.
        line: usize,
    },
    /// `AWS_PROFILE` names a profile neither file has.
    #[error(
        "AWS_PROFILE={profile}: no profile [{profile}] in {} ({}) nor [profile {profile}] in {} ({})",
        credentials.display(), presence(credentials), config.display(), presence(config)
    )]
    NoSuchProfile {
        /// The profile.
        profile: String,
        /// The credentials file looked in.
        credentials: PathBuf,
        /// The config file looked in.
        config: PathBuf,
    },
    /// The profile gets its credentials in a way this client does not support.
    #[error(
        "profile {profile} in {}: `{key}` is not supported (only static keys: \
         aws_access_key_id and aws_secret_access_key); set AWS_ACCESS_KEY_ID and \
         AWS_SECRET_ACCESS_KEY instead",
        path.display()
    )]
    Unsupported {
        /// The profile.
        profile: String,
        /// The file that sets `key`.
        path: PathBuf,
        /// The setting.
        key: String,
    },
    /// The profile has one of the key and the secret but not the other.
    #[error("profile {profile} in {}: {present} without {missing}", path.display())]
    Incomplete {
        /// The profile.
        profile: String,
        /// The file that sets the one it has.
        path: PathBuf,
        /// The one it has.
        present: &'static str,
        /// The one it lacks.
        missing: &'static str,
    },
}

fn presence(path: &Path) -> &'static str {
    if path.exists() {
        "read"
    } else {
        "no such file"
    }
}

/// The environment a client is configured from: the `AWS_*` variables and the home
/// directory (taken apart from the process so that tests need not change it).
#[derive(Debug, Clone, Default)]
pub struct AwsEnvironment {
    /// `AWS_*` variables, names as given (upper case).
    pub vars: HashMap<String, String>,
    /// Where `~/.aws` is looked for; `None`: only the files named by variables.
    pub home: Option<PathBuf>,
}

impl AwsEnvironment {
    /// This process's `AWS_*` variables and `HOME`.
    pub fn from_process() -> Self {
        Self {
            vars: std::env::vars()
                .filter(|(key, _)| key.starts_with("AWS_"))
                .collect(),
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
        }
    }

    fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn file(&self, variable: &str, default_name: &str) -> Option<PathBuf> {
        match self.var(variable) {
            Some(path) => Some(PathBuf::from(path)),
            None => self
                .home
                .as_ref()
                .map(|h| h.join(".aws").join(default_name)),
        }
    }

    /// The S3 client's settings (`object_store`'s lower-case keys, as
    /// `ObjectRoot::with_settings` takes them): the variables, then what the profile
    /// adds where no variable says otherwise.
    pub fn s3_settings(&self) -> Result<Vec<(String, String)>, ProfileError> {
        let mut settings: Vec<(String, String)> = self
            .vars
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
            .collect();
        settings.sort();
        let explicit = self.var("AWS_PROFILE");
        let profile = explicit.unwrap_or("default");
        let credentials_path = self.file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
        let config_path = self.file("AWS_CONFIG_FILE", "config");
        // Credentials file first: where both set a key, it wins.
        let mut found: Vec<(PathBuf, HashMap<String, String>)> = Vec::new();
        if let Some(path) = &credentials_path {
            if let Some(sections) = read_ini(path)? {
                if let Some(section) = sections.get(profile) {
                    found.push((path.clone(), section.clone()));
                }
            }
        }
        if let Some(path) = &config_path {
            if let Some(mut sections) = read_ini(path)? {
                let named = sections.remove(&format!("profile {profile}"));
                let section = named.or_else(|| {
                    (profile == "default")
                        .then(|| sections.remove("default"))
                        .flatten()
                });
                if let Some(section) = section {
                    found.push((path.clone(), section));
                }
            }
        }
        if found.is_empty() {
            return match explicit {
                Some(profile) => Err(ProfileError::NoSuchProfile {
                    profile: profile.to_owned(),
                    credentials: credentials_path.unwrap_or_else(|| "~/.aws/credentials".into()),
                    config: config_path.unwrap_or_else(|| "~/.aws/config".into()),
                }),
                None => Ok(settings),
            };
        }
        let lookup = |key: &str| {
            found
                .iter()
                .find_map(|(path, section)| section.get(key).map(|v| (path, v.as_str())))
        };
        let mut add = |key: &str, value: &str| settings.push((key.to_owned(), value.to_owned()));
        if self.var("AWS_ACCESS_KEY_ID").is_none() {
            match (lookup("aws_access_key_id"), lookup("aws_secret_access_key")) {
                (Some((_, id)), Some((_, secret))) => {
                    add("aws_access_key_id", id);
                    add("aws_secret_access_key", secret);
                    if let Some((_, token)) = lookup("aws_session_token") {
                        add("aws_session_token", token);
                    }
                }
                (Some((path, _)), None) | (None, Some((path, _))) => {
                    let (present, missing) = if lookup("aws_access_key_id").is_some() {
                        ("aws_access_key_id", "aws_secret_access_key")
                    } else {
                        ("aws_secret_access_key", "aws_access_key_id")
                    };
                    return Err(ProfileError::Incomplete {
                        profile: profile.to_owned(),
                        path: path.clone(),
                        present,
                        missing,
                    });
                }
                // Where a variable gives the client another source of keys (a web
                // identity, a container's endpoint), the profile's way is not needed.
                (None, None) if !OTHER_KEY_SOURCES.iter().any(|v| self.var(v).is_some()) => {
                    if let Some((path, key)) = UNSUPPORTED_KEYS
                        .iter()
                        .find_map(|k| lookup(k).map(|(path, _)| (path, *k)))
                    {
                        return Err(ProfileError::Unsupported {
                            profile: profile.to_owned(),
                            path: path.clone(),
                            key: key.to_owned(),
                        });
                    }
                }
                (None, None) => {}
            }
        }
        if self.var("AWS_REGION").is_none() && self.var("AWS_DEFAULT_REGION").is_none() {
            if let Some((_, region)) = lookup("region") {
                add("aws_region", region);
            }
        }
        let endpoint_set = ["AWS_ENDPOINT_URL", "AWS_ENDPOINT", "AWS_ENDPOINT_URL_S3"]
            .iter()
            .any(|v| self.var(v).is_some());
        if !endpoint_set {
            if let Some((_, endpoint)) = lookup("endpoint_url") {
                add("aws_endpoint", endpoint);
            }
        }
        Ok(settings)
    }
}

/// The sections of the INI file at `path` (`None`: no such file), each a map of its
/// keys (lower case) to their values. A section seen twice is merged, later keys
/// winning.
fn read_ini(path: &Path) -> Result<Option<Sections>, ProfileError> {
    let unreadable = |source| ProfileError::Unreadable {
        path: path.to_owned(),
        source,
    };
    let metadata = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(unreadable(e)),
    };
    if metadata.len() > MAX_FILE_BYTES {
        return Err(ProfileError::TooLarge {
            path: path.to_owned(),
        });
    }
    let text = std::fs::read_to_string(path).map_err(unreadable)?;
    parse_ini(&text)
        .map(Some)
        .map_err(|line| ProfileError::Malformed {
            path: path.to_owned(),
            line,
        })
}

/// Parses the AWS shared-file dialect of INI; `Err(line)` names the first line that
/// is none of: blank, a comment (`#`, `;`), `[section]`, `key = value`, or an indented
/// continuation (the nested `s3 =` settings, skipped).
fn parse_ini(text: &str) -> Result<Sections, usize> {
    let mut sections = Sections::new();
    let mut current: Option<String> = None;
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if raw.starts_with([' ', '\t']) && current.is_some() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
            sections.entry(name.clone()).or_default();
            current = Some(name);
            continue;
        }
        let (Some((key, value)), Some(section)) = (line.split_once('='), &current) else {
            return Err(index + 1);
        };
        let key = key.trim().to_ascii_lowercase();
        if key.is_empty() {
            return Err(index + 1);
        }
        sections
            .entry(section.clone())
            .or_default()
            .insert(key, value.trim().to_owned());
    }
    Ok(sections)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(dir: &Path, vars: &[(&str, &str)]) -> AwsEnvironment {
        AwsEnvironment {
            vars: vars
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            home: Some(dir.to_owned()),
        }
    }

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::create_dir_all(dir.join(".aws")).unwrap();
        std::fs::write(dir.join(".aws").join(name), text).unwrap();
    }

    fn get<'a>(settings: &'a [(String, String)], key: &str) -> Option<&'a str> {
        let mut values = settings.iter().filter(|(k, _)| k == key);
        let value = values.next().map(|(_, v)| v.as_str());
        assert!(values.next().is_none(), "{key} set twice: {settings:?}");
        value
    }

    #[test]
    fn the_ini_dialect_is_parsed_and_bad_lines_are_named() {
        let text = "# comment\n; another\n[default]\naws_access_key_id = AK\n\
                    AWS_Secret_Access_Key=SK=x\n[profile  dev ]\nregion = eu-west-1\n\
                    s3 =\n  addressing_style = path\n[default]\nregion = us-east-2\n";
        let sections = parse_ini(text).unwrap();
        assert_eq!(sections["default"]["aws_access_key_id"], "AK");
        assert_eq!(sections["default"]["aws_secret_access_key"], "SK=x");
        assert_eq!(sections["default"]["region"], "us-east-2");
        assert_eq!(sections["profile dev"]["region"], "eu-west-1");
        assert_eq!(sections["profile dev"]["s3"], "");
        assert!(!sections["profile dev"].contains_key("addressing_style"));
        assert_eq!(parse_ini("[a]\nkey value\n"), Err(2));
        assert_eq!(parse_ini("key = value\n"), Err(1));
        assert_eq!(parse_ini("[a]\n= v\n"), Err(2));
        assert_eq!(parse_ini("").unwrap().len(), 0);
    }

    #[test]
    fn the_profile_fills_in_what_the_environment_leaves_out() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "credentials",
            "[default]\naws_access_key_id = D\naws_secret_access_key = DS\n\
             [dev]\naws_access_key_id = K\naws_secret_access_key = S\naws_session_token = T\n",
        );
        write(
            dir.path(),
            "config",
            "[default]\nregion = us-west-1\n[profile dev]\nregion = eu-west-1\n\
             endpoint_url = http://127.0.0.1:9\naws_access_key_id = NOT-USED\n",
        );
        // No AWS_PROFILE: `default`, from both files.
        let s = env(dir.path(), &[]).s3_settings().unwrap();
        assert_eq!(get(&s, "aws_access_key_id"), Some("D"));
        assert_eq!(get(&s, "aws_secret_access_key"), Some("DS"));
        assert_eq!(get(&s, "aws_region"), Some("us-west-1"));
        assert_eq!(get(&s, "aws_session_token"), None);
        // A named profile; the credentials file wins over the config file.
        let s = env(dir.path(), &[("AWS_PROFILE", "dev")])
            .s3_settings()
            .unwrap();
        assert_eq!(get(&s, "aws_access_key_id"), Some("K"));
        assert_eq!(get(&s, "aws_secret_access_key"), Some("S"));
        assert_eq!(get(&s, "aws_session_token"), Some("T"));
        assert_eq!(get(&s, "aws_region"), Some("eu-west-1"));
        assert_eq!(get(&s, "aws_endpoint"), Some("http://127.0.0.1:9"));
        // Explicit variables win: the keys as a whole, the region, the endpoint.
        let s = env(
            dir.path(),
            &[
                ("AWS_PROFILE", "dev"),
                ("AWS_ACCESS_KEY_ID", "E"),
                ("AWS_SECRET_ACCESS_KEY", "ES"),
                ("AWS_DEFAULT_REGION", "ap-south-1"),
                ("AWS_ENDPOINT_URL", "http://127.0.0.1:10"),
            ],
        )
        .s3_settings()
        .unwrap();
        assert_eq!(get(&s, "aws_access_key_id"), Some("E"));
        assert_eq!(get(&s, "aws_secret_access_key"), Some("ES"));
        assert_eq!(get(&s, "aws_session_token"), None);
        assert_eq!(get(&s, "aws_region"), None);
        assert_eq!(get(&s, "aws_default_region"), Some("ap-south-1"));
        assert_eq!(get(&s, "aws_endpoint_url"), Some("http://127.0.0.1:10"));
        assert_eq!(get(&s, "aws_endpoint"), None);
    }

    #[test]
    fn files_named_by_variables_replace_the_home_directory() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "credentials",
            "[p]\naws_access_key_id = HOME\naws_secret_access_key = HOME\n",
        );
        let other = dir.path().join("creds.ini");
        std::fs::write(
            &other,
            "[p]\naws_access_key_id = VAR\naws_secret_access_key = VS\n",
        )
        .unwrap();
        let s = env(
            dir.path(),
            &[
                ("AWS_PROFILE", "p"),
                ("AWS_SHARED_CREDENTIALS_FILE", other.to_str().unwrap()),
            ],
        )
        .s3_settings()
        .unwrap();
        assert_eq!(get(&s, "aws_access_key_id"), Some("VAR"));
        // No files at all, no AWS_PROFILE: the environment alone.
        let empty = tempfile::tempdir().unwrap();
        let s = env(empty.path(), &[("AWS_REGION", "r")])
            .s3_settings()
            .unwrap();
        assert_eq!(s, vec![("aws_region".to_owned(), "r".to_owned())]);
    }

    #[test]
    fn a_missing_or_unusable_profile_is_an_error_naming_it_and_the_files() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "credentials",
            "[a]\naws_access_key_id = K\n[b]\naws_secret_access_key = S\n",
        );
        write(
            dir.path(),
            "config",
            "[profile sso]\nsso_start_url = https://example.invalid\n",
        );
        let error = |profile: &str| {
            env(dir.path(), &[("AWS_PROFILE", profile)])
                .s3_settings()
                .unwrap_err()
                .to_string()
        };
        let credentials = dir.path().join(".aws/credentials");
        let config = dir.path().join(".aws/config");
        assert_eq!(
            error("nope"),
            format!(
                "AWS_PROFILE=nope: no profile [nope] in {} (read) nor [profile nope] in {} (read)",
                credentials.display(),
                config.display()
            )
        );
        assert_eq!(
            error("a"),
            format!(
                "profile a in {}: aws_access_key_id without aws_secret_access_key",
                credentials.display()
            )
        );
        assert!(error("b").contains("aws_secret_access_key without aws_access_key_id"));
        // With another source of keys in the environment, the profile's is not needed.
        let s = env(
            dir.path(),
            &[
                ("AWS_PROFILE", "sso"),
                ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"),
            ],
        )
        .s3_settings()
        .unwrap();
        assert_eq!(get(&s, "aws_access_key_id"), None);
        let sso = error("sso");
        assert!(
            sso.contains(&format!("profile sso in {}", config.display()))
                && sso.contains("`sso_start_url` is not supported"),
            "{sso}"
        );
        let bad = dir.path().join("bad.ini");
        std::fs::write(&bad, "[profile p]\nregion = r\nregion\n").unwrap();
        let text = env(dir.path(), &[("AWS_CONFIG_FILE", bad.to_str().unwrap())])
            .s3_settings()
            .unwrap_err()
            .to_string();
        assert_eq!(
            text,
            format!("{}:3: not `[section]` nor `key = value`", bad.display())
        );
        let missing = tempfile::tempdir().unwrap();
        let text = env(missing.path(), &[("AWS_PROFILE", "x")])
            .s3_settings()
            .unwrap_err()
            .to_string();
        assert!(text.ends_with("(no such file)"), "{text}");
    }
}

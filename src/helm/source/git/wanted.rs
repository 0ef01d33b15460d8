//! What a `chart.git` spec asks for, checked before anything is fetched: the ref, the
//! repository's address, and the chart's path inside it.

use gix::bstr::ByteSlice;

use super::ssh;
use crate::api::{GitRef, GitSource};
use crate::helm::source::{Error, url, version};

/// What the spec asks for, checked before anything is fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Wanted {
    DefaultBranch,
    Branch(String),
    Tag(String),
    Semver(String),
    Commit(String),
}

impl Wanted {
    pub(super) fn of(git: &GitSource) -> Result<Self, Error> {
        let invalid = |reason: &str| Error::InvalidGitRef {
            reason: reason.to_owned(),
        };
        let name_ok = |name: &str| {
            !name.is_empty()
                && !name.starts_with('-')
                && !name.contains("..")
                && !name
                    .chars()
                    .any(|c| c.is_whitespace() || c.is_control() || "~^:?*[\\".contains(c))
        };
        Ok(match &git.reference {
            None => Self::DefaultBranch,
            Some(GitRef {
                branch: Some(b),
                tag: None,
                semver: None,
                commit: None,
            }) if name_ok(b) => Self::Branch(b.clone()),
            Some(GitRef {
                branch: None,
                tag: Some(t),
                semver: None,
                commit: None,
            }) if name_ok(t) => Self::Tag(t.clone()),
            Some(GitRef {
                branch: None,
                tag: None,
                semver: Some(r),
                commit: None,
            }) => {
                version::Constraint::parse(r)?;
                Self::Semver(r.clone())
            }
            Some(GitRef {
                branch: None,
                tag: None,
                semver: None,
                commit: Some(c),
            }) if c.len() == 40 && c.bytes().all(|b| b.is_ascii_hexdigit()) => {
                Self::Commit(c.to_ascii_lowercase())
            }
            Some(GitRef {
                commit: Some(_), ..
            }) => return Err(invalid("commit must be a full 40-character SHA")),
            Some(GitRef {
                branch: None,
                tag: None,
                semver: None,
                commit: None,
            }) => Self::DefaultBranch,
            Some(r)
                if [&r.branch, &r.tag, &r.semver]
                    .iter()
                    .filter(|x| x.is_some())
                    .count()
                    > 1 =>
            {
                return Err(invalid("takes one of branch, tag, semver or commit"));
            }
            Some(_) => {
                return Err(invalid(
                    "the branch or tag name is not a valid Git ref name",
                ));
            }
        })
    }

    /// The refspec whose remote side lists the candidates.
    pub(super) fn listing(&self) -> String {
        match self {
            Self::DefaultBranch => "HEAD".into(),
            Self::Branch(b) => format!("refs/heads/{b}"),
            Self::Tag(t) => format!("refs/tags/{t}"),
            Self::Semver(_) => "refs/tags/*:refs/tags/*".into(),
            Self::Commit(c) => c.clone(),
        }
    }

    pub(super) fn shown(&self) -> String {
        match self {
            Self::DefaultBranch => "default branch (HEAD)".into(),
            Self::Branch(b) => format!("branch {b}"),
            Self::Tag(t) => format!("tag {t}"),
            Self::Semver(r) => format!("tag matching {r}"),
            Self::Commit(c) => format!("commit {c}"),
        }
    }
}

/// Where the repository is, and how to reach it.
#[derive(Clone)]
pub(super) enum Endpoint {
    Http { url: String },
    Ssh(ssh::Target),
}

impl Endpoint {
    pub(super) fn parse(text: &str) -> Result<Self, Error> {
        let invalid = |reason: &str| Error::InvalidUrl {
            url: url::redact(text),
            reason: reason.to_owned(),
        };
        let parsed = gix::url::parse(text.as_bytes().as_bstr())
            .map_err(|e| invalid(&format!("not a Git URL ({e})")))?;
        match parsed.scheme {
            gix::url::Scheme::Https | gix::url::Scheme::Http => {
                if parsed.host().is_none() {
                    return Err(invalid("the URL has no host"));
                }
                Ok(Self::Http {
                    url: text.to_owned(),
                })
            }
            gix::url::Scheme::Ssh if text.starts_with("ssh://") => {
                let host = parsed
                    .host()
                    .ok_or_else(|| invalid("the URL has no host"))?
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_owned();
                Ok(Self::Ssh(ssh::Target {
                    host,
                    port: parsed.port.unwrap_or(22),
                    user: parsed.user().unwrap_or("git").to_owned(),
                    path: parsed.path.to_str_lossy().into_owned(),
                }))
            }
            _ => Err(invalid(
                "expected https://, http:// or ssh:// (file://, git:// and scp-like addresses are not accepted)",
            )),
        }
    }
}

impl Endpoint {
    /// The repository's address as a cache key: scheme, host (lower case), port (the
    /// scheme's default written out), user for SSH, and the path without a trailing `/`
    /// or `.git`, never the credentials a URL may carry. Two spellings of one repository
    /// share a key; two repositories never do.
    pub(super) fn location(&self) -> String {
        fn path_of(path: &str) -> &str {
            let path = path.trim_end_matches('/');
            path.strip_suffix(".git").unwrap_or(path)
        }
        match self {
            Self::Http { url } => match reqwest::Url::parse(url) {
                Ok(u) => format!(
                    "{}://{}:{}{}",
                    u.scheme(),
                    u.host_str().unwrap_or_default().to_ascii_lowercase(),
                    u.port_or_known_default().unwrap_or_default(),
                    path_of(u.path())
                ),
                // Parsed by gitoxide but not by the URL crate: the text as it is (a
                // stricter key, never a shared one).
                Err(_) => url::redact(url),
            },
            Self::Ssh(t) => format!(
                "ssh://{}@{}:{}/{}",
                t.user,
                t.host.to_ascii_lowercase(),
                t.port,
                path_of(t.path.trim_start_matches('/'))
            ),
        }
    }
}

/// `path` inside the repository, normalised: no leading or trailing `/`, no `.` or `..`.
pub(super) fn chart_path(path: Option<&str>) -> Result<String, Error> {
    let path = path.unwrap_or_default().trim_matches('/');
    let mut parts = Vec::new();
    for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
        if part == ".." {
            return Err(Error::InvalidGitRef {
                reason: format!("path {path} leaves the repository"),
            });
        }
        parts.push(part);
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(reference: Option<GitRef>) -> GitSource {
        GitSource {
            url: "https://example.com/charts.git".into(),
            reference,
            path: None,
        }
    }

    #[test]
    fn refs_are_checked_before_anything_is_fetched() {
        let r = |branch: Option<&str>,
                 tag: Option<&str>,
                 semver: Option<&str>,
                 commit: Option<&str>| {
            Wanted::of(&git(Some(GitRef {
                branch: branch.map(Into::into),
                tag: tag.map(Into::into),
                semver: semver.map(Into::into),
                commit: commit.map(Into::into),
            })))
        };
        assert_eq!(Wanted::of(&git(None)).unwrap(), Wanted::DefaultBranch);
        assert_eq!(
            r(Some("main"), None, None, None).unwrap(),
            Wanted::Branch("main".into())
        );
        assert_eq!(
            r(None, Some("v1.0.0"), None, None).unwrap(),
            Wanted::Tag("v1.0.0".into())
        );
        assert_eq!(
            r(None, None, Some(">=1.0.0"), None).unwrap(),
            Wanted::Semver(">=1.0.0".into())
        );
        let sha = "0123456789abcdef0123456789ABCDEF01234567";
        assert_eq!(
            r(None, None, None, Some(sha)).unwrap(),
            Wanted::Commit(sha.to_ascii_lowercase())
        );
        for bad in [
            r(Some("main"), Some("v1"), None, None),
            r(Some("a b"), None, None, None),
            r(Some("../x"), None, None, None),
            r(Some("-x"), None, None, None),
            r(None, None, None, Some("abc123")),
            r(None, None, Some("not a range!"), None),
        ] {
            assert!(bad.is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_network_transports_are_accepted() {
        assert!(matches!(
            Endpoint::parse("https://h/r.git"),
            Ok(Endpoint::Http { .. })
        ));
        assert!(matches!(
            Endpoint::parse("http://127.0.0.1:8080/r.git"),
            Ok(Endpoint::Http { .. })
        ));
        match Endpoint::parse("ssh://deploy@git.example.com:2222/team/charts.git") {
            Ok(Endpoint::Ssh(t)) => {
                assert_eq!(
                    (t.host.as_str(), t.port, t.user.as_str()),
                    ("git.example.com", 2222, "deploy")
                );
                assert_eq!(t.path, "/team/charts.git");
            }
            _ => panic!("an ssh:// URL"),
        }
        for bad in [
            "file:///etc",
            "git://h/r.git",
            "/tmp/repo",
            "git@github.com:a/b.git",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn locations_name_the_repository_not_its_spelling() {
        let at = |u: &str| Endpoint::parse(u).unwrap().location();
        let a = at("https://Git.Example.com/team/charts.git");
        assert_eq!(a, "https://git.example.com:443/team/charts");
        assert_eq!(a, at("https://git.example.com:443/team/charts/"));
        assert_eq!(a, at("https://user:token@git.example.com/team/charts"));
        assert_ne!(a, at("http://git.example.com/team/charts"));
        assert_ne!(a, at("https://git.example.com/team/other"));
        assert_ne!(a, at("https://nonexistent.invalid/team/charts"));
        assert_eq!(
            at("ssh://deploy@git.example.com/team/charts.git"),
            "ssh://deploy@git.example.com:22/team/charts"
        );
    }

    #[test]
    fn chart_paths_stay_inside_the_repository() {
        assert_eq!(chart_path(None).unwrap(), "");
        assert_eq!(chart_path(Some("/charts/app/")).unwrap(), "charts/app");
        assert_eq!(chart_path(Some("./charts//app")).unwrap(), "charts/app");
        assert!(chart_path(Some("charts/../../etc")).is_err());
    }
}

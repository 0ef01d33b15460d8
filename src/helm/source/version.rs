//! Chart version constraints as Helm and Flux accept them (Masterminds semver v3 syntax),
//! evaluated on versions parsed by the `semver` crate.
//!
//! The syntax differs from Cargo's, which is why `semver::VersionReq` is not used as is:
//! a bare `1.2.3` is exact (Cargo: caret), comparators may be separated by spaces or
//! commas, `||` joins alternatives, `a - b` is an inclusive range, `!=` exists, wildcards
//! may follow an operator (`>=1.2.x`), versions may carry a `v` prefix. Pre-releases
//! follow Masterminds too: a version with a pre-release only satisfies a comparator that
//! itself has one, but then any pre-release in the range matches (Flux's documented
//! `>=1.0.0-0` idiom picks up pre-releases of every later version, where Cargo would
//! only accept pre-releases of 1.0.0 itself).

use std::cmp::Ordering;
use std::fmt;

use semver::{BuildMetadata, Prerelease, Version};

/// A parsed constraint: any of the groups matches when all of its comparators do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    text: String,
    any_of: Vec<Vec<Comparator>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Tilde,
    Caret,
}

/// A comparator's version; missing (wildcard) components are `None` and only trail.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Partial {
    major: Option<u64>,
    minor: Option<u64>,
    patch: Option<u64>,
    pre: Prerelease,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Comparator {
    op: Op,
    version: Partial,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid version constraint {constraint:?}: {reason}")]
pub struct ConstraintError {
    pub constraint: String,
    pub reason: ConstraintProblem,
}

/// What is wrong with a version constraint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConstraintProblem {
    #[error("empty")]
    Empty,
    #[error("empty alternative around ||")]
    EmptyAlternative,
    #[error("a hyphen range needs a version on both sides (\"1.2 - 1.4\")")]
    HalfRange,
    #[error("unexpected {0:?}")]
    Unexpected(String),
    #[error("operator {0:?} has no version")]
    NoVersion(String),
    #[error("unexpected operator in hyphen range: {0:?}")]
    OperatorInRange(String),
    #[error("{text:?} is not a version ({why})")]
    NotAVersion { text: String, why: NotAVersion },
}

/// Why a constraint's version does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAVersion {
    #[error("empty")]
    Empty,
    #[error("more than three numbers")]
    TooManyNumbers,
    #[error("a number after a wildcard")]
    NumberAfterWildcard,
    #[error("expected a number or x")]
    NotANumber,
    #[error("number too large")]
    TooLarge,
    #[error("a pre-release needs major.minor.patch")]
    PreReleaseWithoutPatch,
    /// semver's message about the pre-release part.
    #[error("{0}")]
    PreRelease(String),
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Constraint {
    /// `*`: every stable version, what an omitted `chart.version` means.
    pub fn any_stable() -> Self {
        Self::parse("*").expect("* is a valid constraint")
    }

    pub fn parse(text: &str) -> Result<Self, ConstraintError> {
        let err = |reason: ConstraintProblem| ConstraintError {
            constraint: text.to_owned(),
            reason,
        };
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(err(ConstraintProblem::Empty));
        }
        let mut any_of = Vec::new();
        for group in trimmed.split("||") {
            let tokens: Vec<&str> = group
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|t| !t.is_empty())
                .collect();
            if tokens.is_empty() {
                return Err(err(ConstraintProblem::EmptyAlternative));
            }
            any_of.push(parse_group(&tokens).map_err(err)?);
        }
        Ok(Self {
            text: trimmed.to_owned(),
            any_of,
        })
    }

    pub fn matches(&self, version: &Version) -> bool {
        self.any_of
            .iter()
            .any(|group| group.iter().all(|c| c.matches(version)))
    }
}

/// Comparators of one AND group. Operators may stand apart from their version
/// (`>= 1.2`) and `a - b` is a hyphen range.
fn parse_group(tokens: &[&str]) -> Result<Vec<Comparator>, ConstraintProblem> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i];
        if token == "-" {
            return Err(ConstraintProblem::HalfRange);
        }
        let (op, rest) = split_op(token);
        let (op, literal) = if rest.is_empty() {
            if op.is_none() {
                return Err(ConstraintProblem::Unexpected(token.to_owned()));
            }
            i += 1;
            let next = tokens
                .get(i)
                .ok_or_else(|| ConstraintProblem::NoVersion(token.to_owned()))?;
            if split_op(next).0.is_some() || *next == "-" {
                return Err(ConstraintProblem::NoVersion(token.to_owned()));
            }
            (op, *next)
        } else {
            (op, rest)
        };
        let version = parse_partial(literal)?;
        // Hyphen range: `a - b` is `>=a <=b`.
        if op.is_none() && tokens.get(i + 1) == Some(&"-") {
            let upper = tokens.get(i + 2).ok_or(ConstraintProblem::HalfRange)?;
            if split_op(upper).0.is_some() {
                return Err(ConstraintProblem::OperatorInRange((*upper).to_owned()));
            }
            out.push(Comparator {
                op: Op::Ge,
                version,
            });
            out.push(Comparator {
                op: Op::Le,
                version: parse_partial(upper)?,
            });
            i += 3;
            continue;
        }
        out.push(Comparator {
            op: op.unwrap_or(Op::Eq),
            version,
        });
        i += 1;
    }
    Ok(out)
}

fn split_op(token: &str) -> (Option<Op>, &str) {
    // Longest operators first so `>=` is not read as `>` followed by `=1.2`.
    const OPS: &[(&str, Op)] = &[
        ("!=", Op::Ne),
        (">=", Op::Ge),
        ("=>", Op::Ge),
        ("<=", Op::Le),
        ("=<", Op::Le),
        ("~>", Op::Tilde),
        (">", Op::Gt),
        ("<", Op::Lt),
        ("=", Op::Eq),
        ("~", Op::Tilde),
        ("^", Op::Caret),
    ];
    for (text, op) in OPS {
        if let Some(rest) = token.strip_prefix(text) {
            return (Some(*op), rest);
        }
    }
    (None, token)
}

/// A constraint's version: `1`, `1.2`, `1.2.3`, `1.2.3-rc.1`, `1.x`, `1.2.*`, `*`, with an
/// optional `v` prefix. Build metadata is ignored, as semver precedence ignores it.
fn parse_partial(text: &str) -> Result<Partial, ConstraintProblem> {
    let bad = |why: NotAVersion| ConstraintProblem::NotAVersion {
        text: text.to_owned(),
        why,
    };
    let body = text
        .strip_prefix('v')
        .or_else(|| text.strip_prefix('V'))
        .unwrap_or(text);
    let (core, pre, _build) = split_core(body);
    if core.is_empty() {
        return Err(bad(NotAVersion::Empty));
    }
    let mut parts = [None; 3];
    let mut wildcard = false;
    let pieces: Vec<&str> = core.split('.').collect();
    if pieces.len() > 3 {
        return Err(bad(NotAVersion::TooManyNumbers));
    }
    for (slot, piece) in parts.iter_mut().zip(&pieces) {
        if matches!(*piece, "x" | "X" | "*") {
            wildcard = true;
            continue;
        }
        if wildcard {
            return Err(bad(NotAVersion::NumberAfterWildcard));
        }
        if piece.is_empty() || !piece.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(NotAVersion::NotANumber));
        }
        *slot = Some(
            piece
                .parse::<u64>()
                .map_err(|_| bad(NotAVersion::TooLarge))?,
        );
    }
    let pre = match pre {
        None => Prerelease::EMPTY,
        Some(_) if parts.iter().any(Option::is_none) => {
            return Err(bad(NotAVersion::PreReleaseWithoutPatch));
        }
        Some(p) => Prerelease::new(p).map_err(|e| bad(NotAVersion::PreRelease(e.to_string())))?,
    };
    Ok(Partial {
        major: parts[0],
        minor: parts[1],
        patch: parts[2],
        pre,
    })
}

/// Splits `1.2.3-rc.1+build` into core, pre-release and build.
fn split_core(text: &str) -> (&str, Option<&str>, Option<&str>) {
    let (rest, build) = match text.split_once('+') {
        Some((r, b)) => (r, Some(b)),
        None => (text, None),
    };
    match rest.split_once('-') {
        Some((core, pre)) => (core, Some(pre), build),
        None => (rest, None, build),
    }
}

impl Partial {
    /// The lowest version the partial stands for (missing components are 0).
    fn floor(&self) -> Version {
        Version {
            major: self.major.unwrap_or(0),
            minor: self.minor.unwrap_or(0),
            patch: self.patch.unwrap_or(0),
            pre: self.pre.clone(),
            build: BuildMetadata::EMPTY,
        }
    }

    fn is_full(&self) -> bool {
        self.patch.is_some()
    }

    /// Compares the components the partial has; a full partial compares by precedence.
    fn compare(&self, v: &Version) -> Ordering {
        if self.is_full() {
            return v.cmp_precedence(&self.floor());
        }
        let mut ord = Ordering::Equal;
        if let Some(major) = self.major {
            ord = v.major.cmp(&major);
        }
        if let (Ordering::Equal, Some(minor)) = (ord, self.minor) {
            ord = v.minor.cmp(&minor);
        }
        ord
    }
}

impl Comparator {
    fn matches(&self, v: &Version) -> bool {
        let c = &self.version;
        // Masterminds: pre-releases are only considered by comparators that name one.
        if !v.pre.is_empty() && c.pre.is_empty() {
            return false;
        }
        match self.op {
            Op::Eq => c.compare(v) == Ordering::Equal,
            Op::Ne => c.compare(v) != Ordering::Equal,
            Op::Gt => c.major.is_some() && c.compare(v) == Ordering::Greater,
            Op::Ge => c.compare(v) != Ordering::Less,
            Op::Lt => v.cmp_precedence(&c.floor()) == Ordering::Less,
            Op::Le => c.major.is_none() || c.compare(v) != Ordering::Greater,
            Op::Tilde => {
                // ~1.2.3 and ~1.2: same minor; ~1: same major.
                v.cmp_precedence(&c.floor()) != Ordering::Less
                    && c.major.is_none_or(|m| v.major == m)
                    && c.minor.is_none_or(|m| v.minor == m)
            }
            Op::Caret => {
                if v.cmp_precedence(&c.floor()) == Ordering::Less {
                    return false;
                }
                match (c.major, c.minor, c.patch) {
                    (None, _, _) => true,
                    (Some(major), minor, _) if major > 0 || minor.is_none() => v.major == major,
                    (Some(_), Some(minor), patch) if minor > 0 || patch.is_none() => {
                        v.major == 0 && v.minor == minor
                    }
                    (Some(_), Some(_), patch) => {
                        v.major == 0 && v.minor == 0 && Some(v.patch) == patch
                    }
                    (Some(_), None, _) => unreachable!("covered by the minor.is_none() arm"),
                }
            }
        }
    }
}

/// Parses a chart version from an index leniently, as Helm does: `v` prefix allowed,
/// missing minor/patch are 0. Returns None for versions Helm would skip.
pub fn parse_version(text: &str) -> Option<Version> {
    let body = text.trim().strip_prefix('v').unwrap_or_else(|| text.trim());
    if let Ok(v) = Version::parse(body) {
        return Some(v);
    }
    let (core, pre, build) = split_core(body);
    let pieces: Vec<&str> = core.split('.').collect();
    if pieces.is_empty() || pieces.len() > 3 {
        return None;
    }
    let mut numbers = [0u64; 3];
    for (slot, piece) in numbers.iter_mut().zip(&pieces) {
        if piece.is_empty() || !piece.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *slot = piece.parse().ok()?;
    }
    Some(Version {
        major: numbers[0],
        minor: numbers[1],
        patch: numbers[2],
        pre: pre.map_or(Ok(Prerelease::EMPTY), Prerelease::new).ok()?,
        build: build
            .map_or(Ok(BuildMetadata::EMPTY), BuildMetadata::new)
            .ok()?,
    })
}

/// Why no version was selected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectError {
    Constraint(ConstraintError),
    /// Nothing matches; the available versions, newest first.
    NoMatch {
        available: Vec<String>,
    },
    /// No version was asked for and every published version is a pre-release.
    NoStable {
        available: Vec<String>,
    },
}

/// Picks the version to use among `versions` (as written in the index): an exact string
/// match first (as Helm does, so odd or pre-release versions can be pinned), otherwise the
/// highest version satisfying the constraint; no constraint means the latest stable.
/// Returns the position in `versions`.
pub fn select(versions: &[&str], constraint: Option<&str>) -> Result<usize, SelectError> {
    if let Some(wanted) = constraint.map(str::trim)
        && let Some(i) = versions.iter().position(|v| *v == wanted)
    {
        return Ok(i);
    }
    let parsed = match constraint {
        Some(text) => Constraint::parse(text).map_err(SelectError::Constraint)?,
        None => Constraint::any_stable(),
    };
    let mut best: Option<(usize, Version)> = None;
    for (i, text) in versions.iter().enumerate() {
        let Some(v) = parse_version(text) else {
            continue;
        };
        if !parsed.matches(&v) {
            continue;
        }
        let newer = best
            .as_ref()
            .is_none_or(|(_, b)| v.cmp_precedence(b) == Ordering::Greater);
        if newer {
            best = Some((i, v));
        }
    }
    if let Some((i, _)) = best {
        return Ok(i);
    }
    let available = newest_first(versions);
    Err(match constraint {
        None => SelectError::NoStable { available },
        Some(_) => SelectError::NoMatch { available },
    })
}

/// Versions sorted newest first (unparsable ones last, as written), without duplicates.
pub fn newest_first(versions: &[&str]) -> Vec<String> {
    let mut parsed: Vec<(Option<Version>, &str)> =
        versions.iter().map(|v| (parse_version(v), *v)).collect();
    parsed.sort_by(|(a, at), (b, bt)| match (a, b) {
        (Some(a), Some(b)) => b.cmp_precedence(a).then_with(|| at.cmp(bt)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => at.cmp(bt),
    });
    let mut out: Vec<String> = Vec::with_capacity(parsed.len());
    for (_, text) in parsed {
        if out.last().is_none_or(|last| last != text) {
            out.push(text.to_owned());
        }
    }
    out
}

/// Every constraint below is also resolved by the real helm v4.3.1 (Masterminds semver)
/// against one repository in `tests/integration/source.rs` `version_constraints_pick_what_helm_picks`,
/// which fails when wheelhouse picks another version than helm does.
#[cfg(test)]
mod tests {
    use super::*;

    fn matches(constraint: &str, version: &str) -> bool {
        let c = Constraint::parse(constraint)
            .unwrap_or_else(|e| panic!("{constraint:?} should parse: {e}"));
        let v = parse_version(version).unwrap_or_else(|| panic!("{version:?} should parse"));
        c.matches(&v)
    }

    fn check(constraint: &str, yes: &[&str], no: &[&str]) {
        for v in yes {
            assert!(matches(constraint, v), "{constraint:?} should match {v}");
        }
        for v in no {
            assert!(
                !matches(constraint, v),
                "{constraint:?} should not match {v}"
            );
        }
    }

    #[test]
    fn bare_version_is_exact_not_caret() {
        check(
            "1.2.3",
            &["1.2.3", "1.2.3+build.5"],
            &["1.2.4", "1.3.0", "1.2.2"],
        );
        check("=1.2.3", &["1.2.3"], &["1.2.4"]);
        check("v1.2.3", &["1.2.3"], &["1.2.4"]);
    }

    #[test]
    fn partial_bare_version_is_a_wildcard() {
        check("1.2", &["1.2.0", "1.2.9"], &["1.3.0", "1.1.9"]);
        check("1", &["1.0.0", "1.9.9"], &["2.0.0", "0.9.0"]);
        check("1.x", &["1.0.0", "1.9.9"], &["2.0.0"]);
        check("1.2.*", &["1.2.0", "1.2.7"], &["1.3.0"]);
        check("*", &["0.0.1", "99.0.0"], &["1.0.0-rc.1"]);
        check("x", &["0.0.1"], &[]);
    }

    #[test]
    fn ranges_with_spaces_or_commas() {
        let yes = ["1.0.0", "1.5.2", "1.99.99"];
        let no = ["0.9.9", "2.0.0", "2.0.1", "1.5.0-rc.1"];
        check(">=1.0.0 <2.0.0", &yes, &no);
        check(">=1.0.0, <2.0.0", &yes, &no);
        check(">= 1.0.0, < 2.0.0", &yes, &no);
        check(">=1.0.0,<2.0.0", &yes, &no);
        check("=>1.0.0 =<1.99.99", &yes, &no);
        check(">1.0.0", &["1.0.1"], &["1.0.0"]);
        check(">1.2", &["1.3.0", "2.0.0"], &["1.2.5"]);
        check(">1", &["2.0.0"], &["1.9.0"]);
        check("<=1.2", &["1.2.9", "1.0.0"], &["1.3.0"]);
        check("<1.2", &["1.1.9"], &["1.2.0"]);
        check(">=1.2.x", &["1.2.0", "3.0.0"], &["1.1.9"]);
    }

    #[test]
    fn tilde_and_caret_follow_masterminds() {
        check("~1.4", &["1.4.0", "1.4.9"], &["1.5.0", "1.3.9"]);
        check("~1.4.2", &["1.4.2", "1.4.9"], &["1.4.1", "1.5.0"]);
        check("~1", &["1.0.0", "1.9.0"], &["2.0.0"]);
        check("~>1.4", &["1.4.3"], &["1.5.0"]);
        check("^2", &["2.0.0", "2.9.9"], &["3.0.0", "1.9.9"]);
        check("^1.2.3", &["1.2.3", "1.9.0"], &["1.2.2", "2.0.0"]);
        check("^0.2.3", &["0.2.3", "0.2.9"], &["0.3.0", "0.2.2"]);
        check("^0.0.3", &["0.0.3"], &["0.0.4"]);
        check("^0.0", &["0.0.1", "0.0.9"], &["0.1.0"]);
        check("^0", &["0.5.0"], &["1.0.0"]);
    }

    #[test]
    fn alternatives_hyphen_ranges_and_not_equal() {
        check("1.2.x || >=3.0.0", &["1.2.5", "3.1.0"], &["2.0.0", "1.3.0"]);
        check("1.2 - 1.4.5", &["1.2.0", "1.4.5"], &["1.4.6", "1.1.0"]);
        check("1.2 - 1.4", &["1.4.9"], &["1.5.0"]);
        check(">=1.0.0 !=1.3.0", &["1.2.0", "1.4.0"], &["1.3.0"]);
        check("!=1.3", &["1.2.0", "1.4.0"], &["1.3.7"]);
    }

    #[test]
    fn prereleases_need_a_prerelease_comparator() {
        check(">=1.0.0", &["1.1.0"], &["1.1.0-rc.1"]);
        // Flux's idiom: -0 admits pre-releases of every later version too.
        check(
            ">=1.0.0-0",
            &["1.1.0-rc.1", "1.0.0-alpha", "2.0.0"],
            &["0.9.0-rc.1"],
        );
        check("1.0.0-rc.1", &["1.0.0-rc.1"], &["1.0.0-rc.2", "1.0.0"]);
        check("~1.4.0-0", &["1.4.2-beta"], &["1.5.0-beta"]);
    }

    #[test]
    fn invalid_constraints_are_explained() {
        for bad in [
            "", ">=", "1.2.3.4", "foo", ">= <2", "1 -", "1.x.3", "1.2-rc.1", "||",
        ] {
            let err = Constraint::parse(bad).expect_err(bad);
            assert_eq!(err.constraint, bad);
            assert!(!err.reason.to_string().is_empty());
        }
    }

    #[test]
    fn lenient_index_versions() {
        assert_eq!(parse_version("v1.2.3"), Some(Version::new(1, 2, 3)));
        assert_eq!(parse_version("1.2"), Some(Version::new(1, 2, 0)));
        assert_eq!(parse_version("3"), Some(Version::new(3, 0, 0)));
        assert_eq!(
            parse_version("1.2-rc.1").map(|v| v.pre.to_string()),
            Some("rc.1".into())
        );
        assert_eq!(parse_version("latest"), None);
        assert_eq!(parse_version("1.2.3.4"), None);
    }

    const PUBLISHED: &[&str] = &[
        "2.1.0-rc.1",
        "2.0.1",
        "2.0.0",
        "1.10.0",
        "1.9.3",
        "1.4.7",
        "1.4.2",
        "not-semver",
    ];

    fn pick(constraint: Option<&str>) -> Result<&'static str, SelectError> {
        select(PUBLISHED, constraint).map(|i| PUBLISHED[i])
    }

    #[test]
    fn selects_latest_stable_by_default() {
        assert_eq!(pick(None), Ok("2.0.1"));
    }

    #[test]
    fn selects_highest_in_range_not_lexically() {
        assert_eq!(pick(Some(">=1.0.0 <2.0.0")), Ok("1.10.0"));
        assert_eq!(pick(Some("~1.4")), Ok("1.4.7"));
        assert_eq!(pick(Some("^2")), Ok("2.0.1"));
        assert_eq!(pick(Some("1.x")), Ok("1.10.0"));
        assert_eq!(pick(Some(">=2.0.0-0")), Ok("2.1.0-rc.1"));
    }

    #[test]
    fn exact_string_match_wins() {
        assert_eq!(pick(Some("1.4.2")), Ok("1.4.2"));
        assert_eq!(pick(Some("2.1.0-rc.1")), Ok("2.1.0-rc.1"));
        assert_eq!(pick(Some("not-semver")), Ok("not-semver"));
    }

    #[test]
    fn no_match_lists_versions_newest_first() {
        let Err(SelectError::NoMatch { available }) = pick(Some(">=3")) else {
            panic!("expected NoMatch");
        };
        assert_eq!(
            available,
            [
                "2.1.0-rc.1",
                "2.0.1",
                "2.0.0",
                "1.10.0",
                "1.9.3",
                "1.4.7",
                "1.4.2",
                "not-semver"
            ]
        );
        assert!(matches!(
            pick(Some(">=x1")),
            Err(SelectError::Constraint(_))
        ));
    }

    #[test]
    fn only_prereleases_is_no_stable() {
        let versions = ["1.0.0-rc.2", "1.0.0-rc.1"];
        assert_eq!(
            select(&versions, None),
            Err(SelectError::NoStable {
                available: vec!["1.0.0-rc.2".into(), "1.0.0-rc.1".into()]
            })
        );
        assert_eq!(select(&versions, Some(">=0.0.0-0")), Ok(0));
    }
}

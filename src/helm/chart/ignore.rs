//! `.helmignore` rules, ported from Helm's `pkg/ignore` so a chart directory loads to the
//! same files as with `helm install`. Patterns use Go's `filepath.Match` syntax: `*`, `?`,
//! `[...]` classes and `\` escapes; `**` is refused, as in Helm. A pattern without `/`
//! matches the base name, one with `/` the whole path, a leading `/` anchors at the chart
//! root, a trailing `/` matches directories only.
//!
//! Negation keeps Helm's semantics, odd as they are: `!pat` ignores every path that does
//! NOT match `pat`, and evaluation continues past paths that do.

pub(crate) const HELMIGNORE: &str = ".helmignore";

/// A `.helmignore` line Helm would refuse, with the line's number.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {rule:?}: {why}")]
pub struct RuleError {
    pub line: usize,
    pub rule: String,
    pub why: RuleProblem,
}

/// What is wrong with a `.helmignore` pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RuleProblem {
    #[error("double-star (**) syntax is not supported")]
    DoubleStar,
    #[error("trailing backslash")]
    TrailingBackslash,
    #[error("malformed character class")]
    MalformedClass,
}

#[derive(Debug, Default)]
pub(crate) struct Rules {
    patterns: Vec<Pattern>,
}

#[derive(Debug)]
struct Pattern {
    glob: String,
    scope: Scope,
    negate: bool,
    must_dir: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Scope {
    /// No `/` in the pattern: match the base name.
    BaseName,
    /// Match the whole chart-relative path.
    Path,
}

impl Rules {
    /// Parses a `.helmignore` file. Errors name the offending line.
    pub(crate) fn parse(text: &str) -> Result<Self, RuleError> {
        let mut rules = Self::default();
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        for (n, line) in text.lines().enumerate() {
            rules.add(line).map_err(|why| RuleError {
                line: n + 1,
                rule: line.trim().to_owned(),
                why,
            })?;
        }
        Ok(rules)
    }

    /// Helm always ignores dotfiles in `templates/`.
    pub(crate) fn add_defaults(&mut self) {
        self.add("templates/.?*")
            .expect("the default rule is a valid pattern");
    }

    fn add(&mut self, rule: &str) -> Result<(), RuleProblem> {
        let rule = rule.trim();
        if rule.is_empty() || rule.starts_with('#') {
            return Ok(());
        }
        if rule.contains("**") {
            return Err(RuleProblem::DoubleStar);
        }
        validate(rule)?;

        let (negate, rule) = match rule.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, rule),
        };
        let (must_dir, rule) = match rule.strip_suffix('/') {
            Some(rest) => (true, rest),
            None => (false, rule),
        };
        let (glob, scope) = if let Some(rooted) = rule.strip_prefix('/') {
            (rooted, Scope::Path)
        } else if rule.contains('/') {
            (rule, Scope::Path)
        } else {
            (rule, Scope::BaseName)
        };
        self.patterns.push(Pattern {
            glob: glob.to_string(),
            scope,
            negate,
            must_dir,
        });
        Ok(())
    }

    /// Whether the chart-relative path (`/`-separated) is ignored.
    pub(crate) fn ignore(&self, path: &str, is_dir: bool) -> bool {
        if path.is_empty() || path == "." || path == "./" {
            return false;
        }
        for p in &self.patterns {
            if p.negate {
                if p.must_dir && !is_dir {
                    return true;
                }
                if !p.matches(path) {
                    return true;
                }
                continue;
            }
            if p.must_dir && !is_dir {
                continue;
            }
            if p.matches(path) {
                return true;
            }
        }
        false
    }
}

impl Pattern {
    fn matches(&self, path: &str) -> bool {
        let subject = match self.scope {
            Scope::BaseName => path.rsplit('/').next().unwrap_or(path),
            Scope::Path => path,
        };
        glob_match(&self.glob, subject)
    }
}

/// Go's `filepath.Match` on `/`-separated paths. The pattern is assumed valid (see
/// `validate`); a malformed remainder simply does not match.
pub(crate) fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = name.chars().collect();
    match_here(&p, &s)
}

fn match_here(p: &[char], s: &[char]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some('*') => {
            let rest = &p[1..];
            for i in 0..=s.len() {
                if match_here(rest, &s[i..]) {
                    return true;
                }
                if i < s.len() && s[i] == '/' {
                    break;
                }
            }
            false
        }
        Some('?') => match s.first() {
            Some(c) if *c != '/' => match_here(&p[1..], &s[1..]),
            _ => false,
        },
        Some('[') => {
            let Some(c) = s.first() else { return false };
            match class(&p[1..], *c) {
                Some((true, used)) => match_here(&p[1 + used..], &s[1..]),
                _ => false,
            }
        }
        Some('\\') => match (p.get(1), s.first()) {
            (Some(want), Some(got)) if want == got => match_here(&p[2..], &s[1..]),
            _ => false,
        },
        Some(want) => match s.first() {
            Some(got) if got == want => match_here(&p[1..], &s[1..]),
            _ => false,
        },
    }
}

/// Matches `c` against the class starting after `[`; returns whether it matched and how
/// many pattern characters the class used (through the closing `]`).
fn class(p: &[char], c: char) -> Option<(bool, usize)> {
    let mut i = 0;
    let negated = p.first() == Some(&'^');
    if negated {
        i += 1;
    }
    let mut matched = false;
    let mut ranges = 0;
    loop {
        if p.get(i) == Some(&']') && ranges > 0 {
            i += 1;
            break;
        }
        let (lo, used) = class_char(&p[i..])?;
        i += used;
        let mut hi = lo;
        if p.get(i) == Some(&'-') {
            let (h, used) = class_char(&p[i + 1..])?;
            hi = h;
            i += 1 + used;
        }
        if lo <= c && c <= hi {
            matched = true;
        }
        ranges += 1;
    }
    Some((matched != negated, i))
}

/// One (possibly escaped) character of a class; `-`, `]` and end of pattern are errors,
/// as in Go's `getEsc`.
fn class_char(p: &[char]) -> Option<(char, usize)> {
    match p.first()? {
        '-' | ']' => None,
        '\\' => p.get(1).map(|c| (*c, 2)),
        c => Some((*c, 1)),
    }
}

/// Rejects patterns Go's `filepath.Match` would report as `ErrBadPattern`.
fn validate(pattern: &str) -> Result<(), RuleProblem> {
    let p: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            '\\' => {
                if i + 1 >= p.len() {
                    return Err(RuleProblem::TrailingBackslash);
                }
                i += 2;
            }
            '[' => {
                // Any character will do to check the class's syntax.
                let (_, used) = class(&p[i + 1..], 'a').ok_or(RuleProblem::MalformedClass)?;
                i += 1 + used;
            }
            _ => i += 1,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cases from Helm's pkg/ignore/rules_test.go (files and dirs as in its testdata).
    #[test]
    fn matches_like_helm() {
        let dirs = ["cargo", "mast", "templates", "mast/"];
        let cases: &[(&str, &str, bool)] = &[
            ("helm.txt", "helm.txt", true),
            ("helm.*", "helm.txt", true),
            ("helm.*", "rudder.txt", false),
            ("*.txt", "tiller.txt", true),
            ("*.txt", "cargo/a.txt", true),
            ("cargo/*.txt", "cargo/a.txt", true),
            ("cargo/*.*", "cargo/a.txt", true),
            ("cargo/*.txt", "mast/a.txt", false),
            ("ru[c-e]?er.txt", "rudder.txt", true),
            ("templates/.?*", "templates/.dotfile", true),
            // "." should never get ignored. https://github.com/helm/helm/issues/1776
            (".*", ".", false),
            (".*", "./", false),
            (".*", ".joonix", true),
            (".*", "helm.txt", false),
            (".*", "", false),
            // Directory tests
            ("cargo/", "cargo", true),
            ("cargo/", "cargo/", true),
            ("cargo/", "mast/", false),
            ("helm.txt/", "helm.txt", false),
            // Negation tests
            ("!helm.txt", "helm.txt", false),
            ("!helm.txt", "tiller.txt", true),
            ("!*.txt", "cargo", true),
            ("!cargo/", "mast/", true),
            // Absolute path tests
            ("/a.txt", "a.txt", true),
            ("/a.txt", "cargo/a.txt", false),
            ("/cargo/a.txt", "cargo/a.txt", true),
        ];
        for (rule, path, want) in cases {
            let rules = Rules::parse(rule).unwrap();
            let is_dir = dirs.contains(path) || path.ends_with('/');
            assert_eq!(
                rules.ignore(path.trim_end_matches('/'), is_dir),
                *want,
                "rule {rule:?} on {path:?}"
            );
        }
    }

    #[test]
    fn comments_blank_lines_and_bad_patterns() {
        let rules = Rules::parse("# comment\n\n  *.bak  \n").unwrap();
        assert!(rules.ignore("x.bak", false));
        assert!(!rules.ignore("x.yaml", false));
        assert!(
            Rules::parse("a/**/b")
                .unwrap_err()
                .to_string()
                .contains("line 1")
        );
        assert!(
            Rules::parse("ok\n[a-")
                .unwrap_err()
                .to_string()
                .contains("line 2")
        );
        assert!(Rules::parse("x\\").is_err());
    }

    #[test]
    fn go_match_syntax() {
        assert!(glob_match("a[^b]c", "axc"));
        assert!(!glob_match("a[^b]c", "abc"));
        assert!(glob_match("a\\*b", "a*b"));
        assert!(!glob_match("a\\*b", "axb"));
        assert!(!glob_match("a*", "a/b"));
        assert!(!glob_match("a?b", "a/b"));
        assert!(glob_match("*", ""));
        assert!(glob_match("[\\]]", "]"));
    }

    #[test]
    fn default_rule_hides_template_dotfiles() {
        let mut rules = Rules::default();
        rules.add_defaults();
        assert!(rules.ignore("templates/.swp", false));
        assert!(!rules.ignore("templates/a.yaml", false));
        assert!(!rules.ignore(".helmignore", false));
    }
}

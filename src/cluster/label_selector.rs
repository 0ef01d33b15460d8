//! kubectl's label selector syntax (`-l`), for choosing among objects already in hand (the
//! dashboard's rows) as the API server would choose among stored ones: equality
//! (`k=v`, `k==v`, `k!=v`), existence (`k`, `!k`) and sets (`k in (a,b)`, `k notin (a)`),
//! requirements joined by commas, all of which must hold.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("label selector {0:?}: an empty requirement")]
    Empty(String),
    #[error("label selector {0:?}: a set needs a closing parenthesis")]
    Unclosed(String),
    #[error("label selector {0:?}: {1:?} is not a label key")]
    Key(String, String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    Absent(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed selector; the empty one selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector(Vec<Requirement>);

impl Selector {
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let whole = || text.to_owned();
        let mut requirements = Vec::new();
        let mut rest = text.trim();
        while !rest.is_empty() {
            // A set's values hold commas: the requirement ends after its parenthesis.
            let end = match (rest.find('('), rest.find(',')) {
                (Some(open), Some(comma)) if open < comma => {
                    let close = rest[open..]
                        .find(')')
                        .ok_or_else(|| SelectorError::Unclosed(whole()))?;
                    open + close + 1
                }
                (Some(open), None) => {
                    let close = rest[open..]
                        .find(')')
                        .ok_or_else(|| SelectorError::Unclosed(whole()))?;
                    open + close + 1
                }
                (_, Some(comma)) => comma,
                (None, None) => rest.len(),
            };
            let (part, after) = rest.split_at(end);
            requirements.push(requirement(part.trim(), text)?);
            rest = after.trim_start();
            rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
        }
        Ok(Self(requirements))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::Absent(k) => !labels.contains_key(k),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
        })
    }
}

fn requirement(part: &str, whole: &str) -> Result<Requirement, SelectorError> {
    let key = |k: &str| {
        let k = k.trim();
        let ok = !k.is_empty()
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
        if ok {
            Ok(k.to_owned())
        } else {
            Err(SelectorError::Key(whole.to_owned(), k.to_owned()))
        }
    };
    let set = |values: &str| -> Result<Vec<String>, SelectorError> {
        let inner = values
            .trim()
            .strip_prefix('(')
            .and_then(|v| v.strip_suffix(')'))
            .ok_or_else(|| SelectorError::Unclosed(whole.to_owned()))?;
        Ok(inner.split(',').map(|v| v.trim().to_owned()).collect())
    };
    if part.is_empty() {
        return Err(SelectorError::Empty(whole.to_owned()));
    }
    if let Some((k, v)) = part.split_once("!=") {
        return Ok(Requirement::NotEquals(key(k)?, v.trim().to_owned()));
    }
    if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return Ok(Requirement::Equals(key(k)?, v.trim().to_owned()));
    }
    if let Some((k, v)) = part.split_once(" notin ") {
        return Ok(Requirement::NotIn(key(k)?, set(v)?));
    }
    if let Some((k, v)) = part.split_once(" in ") {
        return Ok(Requirement::In(key(k)?, set(v)?));
    }
    if let Some(k) = part.strip_prefix('!') {
        return Ok(Requirement::Absent(key(k)?));
    }
    Ok(Requirement::Exists(key(part)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn every_form_kubectl_takes_selects_as_the_api_server_does() {
        let l = labels(&[("team", "checkout"), ("tier", "web")]);
        for (selector, selected) in [
            ("", true),
            ("team=checkout", true),
            ("team==checkout", true),
            ("team=payments", false),
            ("team!=payments", true),
            ("owner!=x", true),
            ("team", true),
            ("!team", false),
            ("!owner", true),
            ("team in (payments, checkout)", true),
            ("team notin (checkout)", false),
            ("owner notin (x)", true),
            ("owner in (x)", false),
            ("team=checkout,tier in (web,api),!owner", true),
            ("team=checkout, tier=api", false),
        ] {
            let parsed = Selector::parse(selector).unwrap();
            assert_eq!(parsed.matches(&l), selected, "{selector}");
        }
    }

    #[test]
    fn a_selector_that_does_not_read_says_why() {
        for bad in ["team in (a", "a b c=d", "team=x,,y=z"] {
            assert!(Selector::parse(bad).is_err(), "{bad}");
        }
    }
}

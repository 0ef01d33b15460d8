//! Themes: YAML files with one colour per role. The shipped ones are compiled in from
//! `themes/`; user themes live in `<config dir>/themes/NAME.yaml`.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

use super::Error;
use super::view_model::State;

/// The shipped themes, by name.
pub const BUILTIN: &[(&str, &str)] = &[
    ("dark", include_str!("../../../themes/dark.yaml")),
    ("light", include_str!("../../../themes/light.yaml")),
    (
        "high-contrast",
        include_str!("../../../themes/high-contrast.yaml"),
    ),
    (
        "colorblind",
        include_str!("../../../themes/colorblind.yaml"),
    ),
];

#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    pub foreground: Color,
    pub background: Color,
    pub muted: Color,
    pub accent: Color,
    pub header: Color,
    pub selection_fg: Color,
    pub selection_bg: Color,
    pub marked: Color,
    pub border: Color,
    pub ready: Color,
    pub progressing: Color,
    pub failed: Color,
    pub suspended: Color,
    pub canceled: Color,
    pub unknown: Color,
    pub error: Color,
}

/// The file format: every colour is a string so errors can name the field.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    name: String,
    foreground: String,
    background: String,
    muted: String,
    accent: String,
    header: String,
    selection_fg: String,
    selection_bg: String,
    marked: String,
    border: String,
    ready: String,
    progressing: String,
    failed: String,
    suspended: String,
    canceled: String,
    unknown: String,
    error: String,
}

impl Theme {
    pub fn from_yaml(text: &str) -> Result<Self, Error> {
        let f: ThemeFile = crate::text::yaml::from_str(text)
            .map_err(|e| Error::Theme(format!("invalid theme: {e}")))?;
        let c = |field: &str, v: &str| {
            Color::from_str(v).map_err(|_| {
                Error::Theme(format!("theme {}: {field}: unknown colour {v:?}", f.name))
            })
        };
        Ok(Self {
            foreground: c("foreground", &f.foreground)?,
            background: c("background", &f.background)?,
            muted: c("muted", &f.muted)?,
            accent: c("accent", &f.accent)?,
            header: c("header", &f.header)?,
            selection_fg: c("selection_fg", &f.selection_fg)?,
            selection_bg: c("selection_bg", &f.selection_bg)?,
            marked: c("marked", &f.marked)?,
            border: c("border", &f.border)?,
            ready: c("ready", &f.ready)?,
            progressing: c("progressing", &f.progressing)?,
            failed: c("failed", &f.failed)?,
            suspended: c("suspended", &f.suspended)?,
            canceled: c("canceled", &f.canceled)?,
            unknown: c("unknown", &f.unknown)?,
            error: c("error", &f.error)?,
            name: f.name,
        })
    }

    pub fn builtin(name: &str) -> Option<Self> {
        BUILTIN
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, text)| Self::from_yaml(text).expect("shipped themes are valid"))
    }

    /// `--theme` (a file path or a theme name), else config.yaml's `theme`, else dark.
    /// Names are looked up in the user's theme directory first, then the shipped ones.
    pub fn resolve(flag: Option<&str>, config_dir: Option<&Path>) -> Result<Self, Error> {
        let config = config_dir
            .map(Config::load)
            .transpose()?
            .unwrap_or_default();
        let wanted = flag
            .map(str::to_owned)
            .or(config.theme)
            .unwrap_or_else(|| "dark".into());
        let as_path = PathBuf::from(&wanted);
        if wanted.ends_with(".yaml") && as_path.is_file() {
            return Self::from_file(&as_path);
        }
        if let Some(dir) = config_dir {
            let user = dir.join("themes").join(format!("{wanted}.yaml"));
            if user.is_file() {
                return Self::from_file(&user);
            }
        }
        Self::builtin(&wanted).ok_or_else(|| {
            let names: Vec<_> = BUILTIN.iter().map(|(n, _)| *n).collect();
            Error::Theme(format!(
                "no theme {wanted:?}: use one of {} or a user theme in {}",
                names.join(", "),
                config_dir.map_or_else(
                    || "the config directory".into(),
                    |d| d.join("themes").display().to_string()
                )
            ))
        })
    }

    fn from_file(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Theme(format!("{}: {e}", path.display())))?;
        Self::from_yaml(&text).map_err(|e| Error::Theme(format!("{}: {e}", path.display())))
    }

    pub fn base(&self) -> Style {
        Style::default().fg(self.foreground).bg(self.background)
    }

    pub fn muted(&self) -> Style {
        self.base().fg(self.muted)
    }

    pub fn header(&self) -> Style {
        self.base().fg(self.header).add_modifier(Modifier::BOLD)
    }

    pub fn selected(&self) -> Style {
        Style::default()
            .fg(self.selection_fg)
            .bg(self.selection_bg)
            .add_modifier(Modifier::BOLD)
    }

    pub fn state(&self, state: State) -> Style {
        let fg = match state {
            State::Ready => self.ready,
            State::Progressing => self.progressing,
            State::Failed => self.failed,
            State::Suspended => self.suspended,
            // Attention without failure, as a cancelled wait.
            State::Canceled | State::Drifted => self.canceled,
            State::Unknown => self.unknown,
        };
        self.base().fg(fg)
    }
}

/// `<config dir>/config.yaml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Theme name or path used when `--theme` is not given.
    #[serde(default)]
    pub theme: Option<String>,
    /// The dashboard's fleet when no `--contexts` / `--all-contexts` / `--context` is
    /// given: kubeconfig contexts shown at once.
    #[serde(default)]
    pub fleet: Option<Vec<String>>,
}

impl Config {
    pub fn load(dir: &Path) -> Result<Self, Error> {
        let path = dir.join("config.yaml");
        match std::fs::read_to_string(&path) {
            Ok(text) => crate::text::yaml::from_str(&text)
                .map_err(|e| Error::Theme(format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(Error::Theme(format!("{}: {e}", path.display()))),
        }
    }
}

/// The platform config directory (e.g. ~/.config/wheelhouse on Linux).
pub fn config_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("dev", "wheelhouse", "wheelhouse")
        .map(|d| d.config_dir().to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_themes_parse_and_differ() {
        let themes: Vec<Theme> = BUILTIN
            .iter()
            .map(|(n, _)| Theme::builtin(n).unwrap())
            .collect();
        assert_eq!(themes.len(), 4);
        for t in &themes {
            assert_ne!(t.ready, t.failed, "{}", t.name);
        }
        assert_ne!(themes[0], themes[1]);
    }

    #[test]
    fn an_indexed_colour_may_be_written_unquoted() {
        let text = BUILTIN[0].1.replace("muted: darkgray", "muted: 245");
        assert_eq!(Theme::from_yaml(&text).unwrap().muted, Color::Indexed(245));
        let err = Theme::from_yaml("name: x\n").unwrap_err().to_string();
        assert!(err.contains("missing field"), "{err}");
    }

    #[test]
    fn resolves_flag_config_and_user_themes() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Theme::resolve(None, Some(dir.path())).unwrap().name, "dark");
        assert_eq!(
            Theme::resolve(Some("light"), Some(dir.path()))
                .unwrap()
                .name,
            "light"
        );
        std::fs::write(dir.path().join("config.yaml"), "theme: high-contrast\n").unwrap();
        assert_eq!(
            Theme::resolve(None, Some(dir.path())).unwrap().name,
            "high-contrast"
        );
        std::fs::create_dir(dir.path().join("themes")).unwrap();
        let mine = BUILTIN[0].1.replace("name: dark", "name: mine");
        std::fs::write(dir.path().join("themes/mine.yaml"), mine).unwrap();
        assert_eq!(
            Theme::resolve(Some("mine"), Some(dir.path())).unwrap().name,
            "mine"
        );
        let err = Theme::resolve(Some("nope"), Some(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("colorblind"), "{err}");
        let bad = BUILTIN[0].1.replace("ready: lightgreen", "ready: blurple");
        let err = Theme::from_yaml(&bad).unwrap_err().to_string();
        assert!(err.contains("ready") && err.contains("blurple"), "{err}");
        // A config.yaml of only comments sets nothing.
        std::fs::write(dir.path().join("config.yaml"), "# later\n").unwrap();
        assert_eq!(Theme::resolve(None, Some(dir.path())).unwrap().name, "dark");
    }
}
